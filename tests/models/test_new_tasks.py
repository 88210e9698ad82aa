"""TextEmbedder, TokenClassifier, QuestionAnswerer on tiny backbones: exact heads and
losses, config round trips, and packed == unpacked per example over random lengths."""

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.layers.pooling import PackedSequencePooling
from tfpack.models import DecoderBackbone, QuestionAnswerer, TextEmbedder, TokenClassifier
from tfpack.testing import assert_packed_equals_unpacked, pack_examples

from model_helpers import VOCAB, tiny_encoder

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def tiny_decoder():
    return DecoderBackbone(vocabulary_size=VOCAB, num_layers=1, hidden_dim=16, num_heads=2,
                           intermediate_dim=32, max_sequence_length=16)


def examples_for(task, lengths, seed):
    rng = np.random.default_rng(seed)
    examples = []
    for n in lengths:
        example = {"input_ids": rng.integers(1, VOCAB, n)}
        if task == "token_classification":
            labels = rng.integers(0, len(TAGS), n)
            labels[rng.random(n) < 0.3] = -100
            example["labels"] = labels
        elif task == "question_answering":
            start = int(rng.integers(0, n))
            example["start_positions"] = start
            example["end_positions"] = int(rng.integers(start, n))
        else:
            example["labels"] = int(rng.integers(0, 2))
        examples.append(example)
    return examples


def make(task, backbone):
    if task == "embedding":
        return TextEmbedder(backbone, pooling="mean")
    if task == "token_classification":
        return TokenClassifier(backbone, len(TAGS), tags=TAGS, dropout=0.0)
    return QuestionAnswerer(backbone)


def test_mean_pooling_averages_own_tokens_only():
    hidden = np.arange(12, dtype="float32").reshape(1, 4, 3)
    sequence_ids = np.array([[1, 1, 2, 0]])
    args = (hidden, sequence_ids, np.array([[0, 2, 0]]), np.array([[1., 1., 0.]]))
    mean = PackedSequencePooling("mean", normalize=False)(*args).numpy()
    np.testing.assert_array_equal(mean[0], [[1.5, 2.5, 3.5], [6, 7, 8], [0, 0, 0]])
    last = PackedSequencePooling("last", normalize=False)(*args).numpy()
    np.testing.assert_array_equal(last[0, :2], [[3, 4, 5], [6, 7, 8]])
    cls = PackedSequencePooling("cls")(*args).numpy()
    np.testing.assert_allclose(cls[0, 0], np.array([0, 1, 2]) / np.sqrt(5), rtol=1e-6)
    with pytest.raises(TfpackError, match="`pooling` must be one of"):
        PackedSequencePooling("max")


@pytest.mark.parametrize("task", ["embedding", "token_classification", "question_answering"])
def test_config_round_trip(task):
    model = make(task, tiny_encoder())
    features = pack_examples(examples_for(task, [3, 4], 0), 8, max_sequences_per_pack=2)
    want = model(features)
    clone = type(model).from_config(model.get_config())
    clone(features)
    clone.set_weights(model.get_weights())
    for name, value in clone(features).items():
        np.testing.assert_allclose(value, want[name], atol=1e-6)
    assert sorted(want) == sorted(model.packed_outputs)


def test_token_classifier_checks_tags():
    with pytest.raises(TfpackError, match="`tags` must name every class"):
        TokenClassifier(tiny_encoder(), 3, tags=["O", "B-X"])


@settings(max_examples=6, deadline=None)
@given(task=st.sampled_from(["embedding", "token_classification", "question_answering"]),
       lengths=st.lists(st.integers(1, 6), min_size=2, max_size=5),
       seed=st.integers(0, 99), decoder=st.booleans())
def test_packed_equals_unpacked_random_lengths(task, lengths, seed, decoder):
    keras.utils.set_random_seed(seed)
    model = make(task, tiny_decoder() if decoder else tiny_encoder())
    examples = examples_for(task, lengths, seed)
    if task == "embedding":
        examples[1]["labels"] = examples[0]["labels"]  # at least one positive pair
    order = list(np.random.default_rng(seed).permutation(len(examples)))
    packs = [order[i:i + 2] for i in range(0, len(order), 2)]  # reordered; a pack of one
    assert_packed_equals_unpacked(model, examples, max_length=12, packs=packs,
                                  max_sequences_per_pack=3)  # empty slots


def test_question_answerer_loss_is_per_sequence_softmax():
    model = QuestionAnswerer(tiny_encoder())
    examples = examples_for("question_answering", [3, 2], 1)
    packed = pack_examples(examples, 6, packs=[[0, 1]])
    assert packed["start_positions"].tolist() == [[examples[0]["start_positions"],
                                                   3 + examples[1]["start_positions"]]]
    outputs = model(packed)
    stats = model.loss_statistics(packed, outputs)
    start, end = np.asarray(outputs["start_logits"])[0], np.asarray(outputs["end_logits"])[0]

    def ce(logits, index):
        return -(logits[index] - np.log(np.sum(np.exp(logits))))

    want = 0.0
    for begin, n, example in [(0, 3, examples[0]), (3, 2, examples[1])]:
        want += 0.5 * (ce(start[begin:begin + n], example["start_positions"])
                       + ce(end[begin:begin + n], example["end_positions"]))
    np.testing.assert_allclose(float(stats["qa_loss_sum"]), want, rtol=1e-5)
    assert float(stats["qa_count"]) == 2.0


@pytest.mark.parametrize("task", ["embedding", "question_answering"])
def test_gradients_finite_under_xla_with_empty_slots(task):
    # Absent slots pool to zero vectors: an L2 norm's sqrt at 0 gave NaN
    # gradients under XLA (0 * inf) before the norm was clamped inside the root.
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = make(task, tiny_encoder())
    examples = examples_for(task, [3, 2, 1], 0)
    if task == "embedding":
        examples[1]["labels"] = examples[0]["labels"]
    features = {k: tf.constant(v) for k, v in pack_examples(
        examples, 8, packs=[[0, 1], [2]], max_sequences_per_pack=3).items()}
    model(features)

    @tf.function(jit_compile=True)
    def gradients(x):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x, training=False)
        return tape.gradient(loss, model.trainable_variables)

    assert all(bool(tf.reduce_all(tf.math.is_finite(g))) for g in gradients(features)
               if g is not None)
