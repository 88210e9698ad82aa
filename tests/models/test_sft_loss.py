"""SFT: per-token loss weights (prompt targets not trained), per-token or
per-sequence averaging, exact across packing, accumulation and replicas."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.errors import TfpackError
from tfpack.layers import causal_lm_count, causal_lm_statistics
from tfpack.testing import assert_packed_equals_unpacked, pack_examples

from sft_helpers import (MAX_LENGTH, expected_update, make_model, sft_example, sft_packs,
                         trainer_update)
from update_helpers import max_difference

LN3 = math.log(3.0)
# One pack, V=2: sequence 1 = positions 0..2, sequence 2 = positions 3..4.
LOGITS = np.array([[[0, 0], [LN3, 0], [0, 0], [0, LN3], [0, 0]]], np.float32)
LABELS = np.array([[1, 1, -100, 1, -100]])
WEIGHTS = np.array([[0.0, 1.0, 0.0, 0.5, 0.0]], np.float32)  # position 0: a prompt target
SEQUENCE_IDS = np.array([[1, 1, 1, 2, 2]])


def _stats(**kwargs):
    stats = causal_lm_statistics(LOGITS, LABELS, **kwargs)
    return {k.split("_", 1)[1]: round(float(v), 5) for k, v in stats.items()}


def test_hand_computed_weighted_losses():
    # Position 1: p(1) = 1/4 -> ln 4, wrong; position 3: p(1) = 3/4 -> ln 4/3, right.
    assert _stats() == {"loss_sum": round(math.log(2) + math.log(4) + math.log(4 / 3), 5),
                        "count": 3.0, "correct": 1.0}
    assert _stats(loss_weights=WEIGHTS) == {
        "loss_sum": round(math.log(4) + 0.5 * math.log(4 / 3), 5), "count": 1.5,
        "correct": 0.5}
    # Per sequence: mean of ln 4 (sequence 1) and ln 4/3 (sequence 2, weight 0.5 / 0.5).
    assert _stats(loss_weights=WEIGHTS, sequence_ids=SEQUENCE_IDS, num_sequences=2,
                  averaging="sequence") == {
        "loss_sum": round(math.log(4) + math.log(4 / 3), 5), "count": 2.0, "correct": 1.0}
    assert float(causal_lm_count(LABELS, WEIGHTS)) == 1.5
    assert float(causal_lm_count(LABELS, WEIGHTS, SEQUENCE_IDS, num_sequences=2,
                                 averaging="sequence")) == 2.0
    # A sequence whose targets all weigh 0 does not count.
    only_prompt = np.array([[0.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
    assert _stats(loss_weights=only_prompt, sequence_ids=SEQUENCE_IDS, num_sequences=2,
                  averaging="sequence")["count"] == 1.0


def test_averaging_errors():
    with pytest.raises(TfpackError, match=r"Received: averaging='pack'"):
        causal_lm_statistics(LOGITS, LABELS, averaging="pack")
    with pytest.raises(TfpackError, match=r"needs `sequence_ids` and `num_sequences`"):
        causal_lm_count(LABELS, averaging="sequence")
    with pytest.raises(TfpackError, match=r"Received: lm_averaging='batch'"):
        make_model("batch")


def _examples():
    rng = np.random.default_rng(0)
    return [sft_example(rng.integers(1, 20, a).tolist(), rng.integers(1, 20, b).tolist())
            for a, b in ((3, 2), (1, 4), (2, 1), (4, 3), (1, 1))]


@pytest.mark.parametrize("averaging", ["token", "sequence"])
def test_packed_equals_unpacked_with_prompt_masking(averaging):
    # Seeded: unseeded weights made the outcome depend on which tests ran before.
    keras.utils.set_random_seed(0)
    model = make_model(averaging)
    result = assert_packed_equals_unpacked(model, _examples(), max_length=MAX_LENGTH)
    assert result.max_gradient_difference < 1e-5
    # The weights matter: the same model without them has another loss.
    features = pack_examples(_examples(), MAX_LENGTH)
    unweighted = {k: v for k, v in features.items() if k != "loss_weights"}
    assert abs(float(model.compute_loss(x=features)) -
               float(model.compute_loss(x=unweighted))) > 1e-3
    assert float(model.target_counts(features)["lm"]) == (
        11.0 if averaging == "token" else 5.0)


def test_pipeline_packs_train_like_single_examples():
    """sft_examples -> tfpack.data.pack -> CausalLM: the loss of the packs is the
    loss of the examples one per row (prompt targets excluded both ways)."""
    pairs = [([1, 2, 3], [7, 8]), ([4], [5, 6, 9]), ([10, 11], [12]), ([13], [14, 15])]
    dataset = tfpack.builders.sft_examples(pairs, max_length=8)
    packs = next(iter(dataset.apply(tfpack.data.pack(
        max_length=8, max_sequences_per_pack=3, algorithm="ffd")).batch(8)))
    assert packs["loss_weights"].dtype == tf.float32
    single = next(iter(dataset.apply(tfpack.data.pack(
        max_length=8, max_sequences_per_pack=1, algorithm="none")).batch(8)))
    assert len(packs["input_ids"]) < len(single["input_ids"]) == 4
    for averaging in ("token", "sequence"):
        model = make_model(averaging)
        packed = model.loss_statistics(packs, model(packs))
        unpacked = model.loss_statistics(single, model(single))
        assert float(packed["lm_count"]) == float(unpacked["lm_count"]) == (
            8.0 if averaging == "token" else 4.0)
        np.testing.assert_allclose(float(packed["lm_loss_sum"]),
                                   float(unpacked["lm_loss_sum"]), rtol=1e-5)


@pytest.mark.parametrize("averaging", ["token", "sequence"])
def test_normalization_is_global_across_accumulation(averaging):
    weights, record = trainer_update(tf.distribute.get_strategy(), averaging, micro=2,
                                     accumulation=2)
    assert max_difference(weights, expected_update(averaging, 1)) < 1e-5
    # The per-micro-batch mean would have moved the weights elsewhere.
    assert max_difference(weights, expected_update(averaging, 2)) > 1e-4


def test_fit_trains_on_weighted_targets():
    model = make_model("sequence")
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    data = tf.data.Dataset.from_tensor_slices(sft_packs()).batch(4)
    history = model.fit(data, epochs=3, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert set(history) == {"loss", "lm_accuracy"}
