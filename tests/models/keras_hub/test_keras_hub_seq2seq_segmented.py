"""Segmented attention for pair packs (issue 35): encoder and decoder
self-attention in rows of one sequence, cross-attention in rows pairing
target k with input k; each pair's outputs and the gradients of a loss
summed over the pairs equal the keras-hub backbone's on that pair alone,
for every encoder-decoder family (the JAX run shares the subprocess of
`test_keras_hub_seq2seq.py`)."""

import keras
import numpy as np
import pytest

from seq2seq_helpers import FAMILIES
from test_keras_hub_seq2seq import check_pairs_alone
from tfpack.errors import TfpackError
from tfpack.layers.pair_segmented_attention import attend_across_rows, pair_tiers
from tfpack.models import from_keras_hub
from tfpack.models.keras_hub import KerasHubT5


@pytest.fixture(scope="module")
def backbones():
    """Each family's tiny backbone, built once for the module."""
    built = {}

    def get(name):
        if name not in built:
            keras.utils.set_random_seed(0)
            built[name] = FAMILIES[name]()
        return built[name]

    return get


def _adapter(backbone, **options):
    return backbone, from_keras_hub(backbone, attention_implementation="segmented",
                                    max_sequences_per_pack=3, check_exact=False, **options)


# T5 untied runs T5's attention code as T5 does.
@pytest.mark.parametrize("name", sorted(set(FAMILIES) - {"t5_untied_relu"}))
def test_segmented_pairs_equal_each_pair_alone(name, backbones):
    """The packs of `check_pairs_alone` hold 3 and 2 pairs whose input and
    target ranks differ (pair lengths (5, 3), (2, 4), (3, 2)), so target k
    must meet input k in a row ranked jointly."""
    backbone, adapter = _adapter(backbones(name))
    assert set(adapter.implementations(12, 10).values()) == {"segmented"}
    assert check_pairs_alone(backbone, adapter) > 0


@pytest.mark.parametrize("name", ["t5", "t5gemma2"])
def test_packs_the_rows_cannot_hold_fall_back_exactly(name, backbones):
    """`segment_length=2` is below most pairs' lengths: every batch runs the
    whole-pack scores under the pair mask (T5's bias from positions,
    T5Gemma 2's merged softmax), still exact."""
    backbone, adapter = _adapter(backbones(name), segment_length=2)
    assert check_pairs_alone(backbone, adapter) > 0


def _dense_cross(query, key, value, q_ids, k_ids, self_key=None, self_value=None,
                 window=None):
    """Dense reference: the pair mask (and the merged causal part) by hand."""
    allowed = (q_ids[:, :, None] == k_ids[:, None, :]) & (k_ids[:, None, :] > 0)
    if self_key is not None:
        i = np.arange(q_ids.shape[1])
        own = (q_ids[:, :, None] == q_ids[:, None, :]) & (i[:, None] >= i[None, :])
        if window is not None:
            own &= (i[:, None] - i[None, :]) <= window[0]
        allowed = np.concatenate([own, allowed], axis=-1)
        key, value = (np.concatenate(p, axis=1) for p in ((self_key, key), (self_value, value)))
    scores = np.einsum("bqhd,bkhd->bhqk", query, key)
    scores = np.where(allowed[:, None], scores, -1e30)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", weights, value)
    return np.where((q_ids > 0)[:, :, None, None], out, 0.0)


@pytest.mark.parametrize("merged", [False, True])
def test_cross_rows_equal_the_dense_pair_mask(merged):
    """Random pair packs (3 pairs, ranks differing between the sides, padding
    on both) against a hand-built dense reference; with 4 pairs in a pack
    of `K=3` the rows cannot hold it and the fallback runs."""
    rng = np.random.default_rng(0)
    q_ids = np.array([[1, 2, 2, 2, 3, 0, 0], [1, 1, 1, 1, 2, 3, 4]])
    k_ids = np.array([[1, 1, 1, 1, 2, 3, 3, 0], [1, 2, 2, 3, 3, 3, 4, 0]])
    query = rng.normal(size=(2, 7, 2, 4)).astype("float32")
    key, value = (rng.normal(size=(2, 8, 2, 4)).astype("float32") for _ in range(2))
    extra = {}
    if merged:
        extra = {"self_key": rng.normal(size=(2, 7, 2, 4)).astype("float32"),
                 "self_value": rng.normal(size=(2, 7, 2, 4)).astype("float32"),
                 "self_window": (1, 0)}
    for rows in (q_ids[:1], q_ids):  # One pack the rows hold; then one they cannot.
        n = len(rows)
        got = attend_across_rows(query[:n], key[:n], value[:n], query_sequence_ids=rows,
                                 key_sequence_ids=k_ids[:n], max_sequences_per_pack=3,
                                 **{k: v[:n] if k != "self_window" else v
                                    for k, v in extra.items()})
        want = _dense_cross(query[:n], key[:n], value[:n], rows, k_ids[:n],
                            extra.get("self_key", [None])[:n] if merged else None,
                            extra.get("self_value", [None])[:n] if merged else None,
                            extra.get("self_window"))
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_pair_tiers_bound_each_side_by_the_joint_rank():
    """Rank r holds at most 2 * L // (r + 1) tokens of each side (scores
    add up to 2 * Le * Ld), capped by S."""
    # Ranks 0-2 share rows of the rank-1 bound (2 * 10 // 2, capped at L);
    # rank 3: 2 * 10 // 4 = 5 queries, 2 * 20 // 4 = 10 keys.
    assert pair_tiers(10, 20, 4) == ((0, 3, 10, 20), (3, 1, 5, 10))
    assert pair_tiers(10, 20, 4, 3, 3) == ((0, 4, 3, 3),)


def test_auto_segments_each_kind_where_its_work_ratio_pays(backbones):
    """TensorFlow, CPU: encoder (L=2048, S=128) and cross-attention pay;
    the decoder (L=256) is below the measured minimum length; without `K`
    every kind is dense."""
    backbone = backbones("t5")
    adapter = KerasHubT5(backbone, max_sequences_per_pack=16, segment_length=128)
    assert adapter.implementations(2048, 256) == {
        "encoder": "segmented", "decoder": "dense", "cross": "segmented"}
    assert set(KerasHubT5(backbone).implementations(2048, 256).values()) == {"dense"}
    # Work ratios 1.23 (self) and 1.00 (cross): above one stream's 1.1 on
    # TensorFlow, below the pairs' measured 2.0 (segmented 0.56x there).
    assert set(KerasHubT5(backbone, max_sequences_per_pack=4, segment_length=256)
               .implementations(512, 512).values()) == {"dense"}
    assert set(KerasHubT5(backbone, max_sequences_per_pack=2).implementations(
        2048, 512).values()) == {"dense"}


def test_flash_is_refused_for_pairs(backbones):
    with pytest.raises(TfpackError, match=r"no flash kernel.*"
                                          r"Received: attention_implementation='flash'"):
        KerasHubT5(backbones("t5"), attention_implementation="flash",
                   max_sequences_per_pack=3)


def test_the_run_time_pair_probe_runs_segmented(backbones):
    """`check_packing_exact` probes the adapter as configured."""
    from tfpack.testing import check_packing_exact

    _, adapter = _adapter(backbones("t5"))
    assert check_packing_exact(adapter).implementation == "segmented"


def test_a_segment_length_per_side_bounds_each_side(backbones):
    """`(inputs, targets)`: the rows follow each side's bound (the packs'
    longest input is 6 and target 5, so they fit and stay exact), the
    choice of "auto" follows them, and the config keeps the pair."""
    backbone, adapter = _adapter(backbones("t5"), segment_length=(6, 5))
    assert adapter.segment_lengths == (6, 5)
    assert check_pairs_alone(backbone, adapter) > 0
    auto = KerasHubT5(backbone, max_sequences_per_pack=16, segment_length=(128, 16))
    assert auto.implementations(2048, 512) == {
        "encoder": "segmented", "decoder": "segmented", "cross": "segmented"}
    assert KerasHubT5.from_config(auto.get_config()).segment_lengths == (128, 16)


def test_a_pair_of_segment_lengths_is_refused_where_one_stream_is_packed(backbones):
    import keras_hub

    bert = keras_hub.models.BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
                                         hidden_dim=8, intermediate_dim=16,
                                         max_sequence_length=16)
    with pytest.raises(TfpackError, match=r"`segment_length` must be .*"
                                          r"Received: segment_length=\(8, 4\)"):
        from_keras_hub(bert, segment_length=(8, 4), check_exact=False)
    with pytest.raises(TfpackError, match=r"Received: segment_length=\(8, 0\)"):
        KerasHubT5(backbones("t5"), segment_length=(8, 0))
