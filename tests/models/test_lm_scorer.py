"""CausalLMScorer: per-example log-likelihoods equal to unpacked ones and to a NumPy
reference; CausalLM's perplexity metric is the same packed and unpacked."""

import keras
import numpy as np
import pytest

import tensorflow as tf

from tfpack.inference import predict
from tfpack.models import CausalLM, CausalLMScorer, DecoderBackbone
from tfpack.testing import next_token_labels, pack_examples

VOCAB, L = 30, 16


def lm():
    keras.utils.set_random_seed(3)
    return CausalLM(DecoderBackbone(vocabulary_size=VOCAB, num_layers=2, hidden_dim=16,
                                    num_heads=2, intermediate_dim=32, max_sequence_length=L))


def examples(seed=0, weights=True):
    rng = np.random.default_rng(seed)
    result = []
    for n in (5, 3, 7, 2, 6):
        ids = rng.integers(1, VOCAB, n)
        example = {"input_ids": ids, "labels": next_token_labels(ids)}
        if weights:  # A prompt of `prompt` tokens: its targets are not scored.
            prompt = int(rng.integers(1, n))
            example["loss_weights"] = (np.arange(n) >= prompt - 1).astype("float32")
        result.append(example)
    return result


def per_example(scorer, data, packs):
    features = pack_examples(data, L, packs=packs, max_sequences_per_pack=4)
    out = {k: np.asarray(v) for k, v in scorer(features).items()}
    found = {}
    for row, pack in enumerate(packs):
        for slot, index in enumerate(pack):
            found[index] = (out["log_likelihood"][row, slot], out["targets"][row, slot])
    return [found[i] for i in range(len(data))], features


def test_scores_packed_equal_unpacked_and_reference():
    model = lm()
    scorer = CausalLMScorer(model)
    data = examples()
    packed, features = per_example(scorer, data, [[4, 1], [2, 3], [0]])  # reordered, one alone
    assert features["sequence_mask"].sum() == 5  # K=4 leaves empty slots
    unpacked, alone = per_example(scorer, data, [[i] for i in range(len(data))])
    logits = np.asarray(model(alone)["logits"], np.float64)
    for i, example in enumerate(data):
        n = len(example["input_ids"])
        log_probs = logits[i, :n - 1] - np.log(np.exp(logits[i, :n - 1]).sum(-1, keepdims=True))
        picked = log_probs[np.arange(n - 1), example["input_ids"][1:]]
        want = float(np.sum(picked * example["loss_weights"][:n - 1]))
        assert packed[i][0] == pytest.approx(want, abs=1e-4)
        assert packed[i][0] == pytest.approx(unpacked[i][0], abs=1e-5)
        assert packed[i][1] == unpacked[i][1] == example["loss_weights"][:n - 1].sum()
    # tfpack.predict with the sft roles carries loss_weights: continuation scores.
    ragged = tf.data.Dataset.from_generator(
        lambda: ({"input_ids": e["input_ids"], "loss_weights": e["loss_weights"]}
                 for e in data),
        output_signature={"input_ids": tf.TensorSpec([None], tf.int32),
                          "loss_weights": tf.TensorSpec([None], tf.float32)})
    scores = predict(scorer, ragged, max_length=L, max_sequences_per_pack=3, batch_size=2,
                     roles="sft", jit_compile=False)
    np.testing.assert_allclose(scores["log_likelihood"], [s for s, _ in unpacked], atol=1e-5)


def test_perplexity_metric_is_per_target_packed_or_not():
    model = lm()
    model.compile(jit_compile=False)
    data = examples(1, weights=False)
    results = [model.evaluate(pack_examples(data, L, packs=packs, max_sequences_per_pack=4),
                              batch_size=2, verbose=0, return_dict=True)
               for packs in ([[4, 1], [2, 3], [0]], [[i] for i in range(len(data))])]
    assert results[0]["perplexity"] == pytest.approx(results[1]["perplexity"], rel=1e-5)
    scores, _ = per_example(CausalLMScorer(model), data, [[i] for i in range(len(data))])
    total = sum(s for s, _ in scores) / sum(n for _, n in scores)
    assert results[0]["perplexity"] == pytest.approx(np.exp(-total), rel=1e-5)


def test_scorer_config_round_trip():
    scorer = CausalLMScorer(lm())
    clone = CausalLMScorer.from_config(scorer.get_config())
    assert clone.lm.vocabulary_size == VOCAB and "loss_weights" in clone.input_features
