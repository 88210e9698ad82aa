import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.layers import PackedAttentionMask

SEQUENCE_IDS = np.array([[1, 1, 2, 2, 2, 0]])


def test_block_diagonal_by_hand():
    mask = np.asarray(PackedAttentionMask()(SEQUENCE_IDS))[0].astype(int)
    expected = np.array([
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0],
    ])
    np.testing.assert_array_equal(mask, expected)


def test_causal_block_diagonal_by_hand():
    mask = np.asarray(PackedAttentionMask(causal=True)(SEQUENCE_IDS))[0]
    expected = np.array([
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0],
    ])
    np.testing.assert_array_equal(mask.astype(int), expected)


def test_padding_only_mask_for_ablation():
    mask = PackedAttentionMask(block_diagonal=False)(SEQUENCE_IDS)
    mask = np.asarray(mask)[0].astype(int)
    np.testing.assert_array_equal(mask[:5, :5], np.ones((5, 5)))
    assert mask[:, 5].sum() == 0 and mask[5].sum() == 0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_additive_mask_is_finite_and_safe(dtype):
    layer = PackedAttentionMask(mask_type="additive", dtype=dtype)
    mask = layer(SEQUENCE_IDS)
    assert tuple(mask.shape) == (1, 1, 6, 6)
    assert keras.backend.standardize_dtype(mask.dtype) == dtype
    values = np.asarray(keras.ops.cast(mask, "float32"))[0, 0]
    boolean = np.asarray(PackedAttentionMask()(SEQUENCE_IDS))[0]
    assert np.all(values[boolean] == 0)
    assert np.all(values[~boolean] <= -1e4)
    # Logits plus the mask stay finite in the mask's own dtype, and the
    # softmax of a row puts no weight on other sequences.
    logits = keras.ops.cast(np.full((1, 1, 6, 6), 30.0), dtype) + mask
    assert np.all(np.isfinite(np.asarray(keras.ops.cast(logits, "float32"))))
    probabilities = np.asarray(keras.ops.cast(
        keras.ops.softmax(keras.ops.cast(logits, "float32")), "float32"))
    np.testing.assert_allclose(probabilities[0, 0, 0, :2], [0.5, 0.5])
    np.testing.assert_array_equal(probabilities[0, 0, 0, 2:], 0.0)


def test_boolean_mask_drives_keras_multi_head_attention():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 6, 8)).astype("float32")
    attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    mask = PackedAttentionMask()(SEQUENCE_IDS)
    packed = np.asarray(attention(x, x, attention_mask=mask))
    # Sequence 2 alone (tokens 2..4) gives the same outputs as in the pack.
    alone = np.asarray(attention(x[:, 2:5], x[:, 2:5]))
    np.testing.assert_allclose(packed[:, 2:5], alone, atol=1e-6)


def test_symbolic_call_and_config_round_trip():
    layer = PackedAttentionMask(causal=True, mask_type="additive")
    symbolic = layer(keras.Input((7,), dtype="int32"))
    assert tuple(symbolic.shape) == (None, 1, 7, 7)
    clone = PackedAttentionMask.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer))
    assert isinstance(restored, PackedAttentionMask) and restored.causal


def test_bad_mask_type_names_argument():
    with pytest.raises(TfpackError, match=r"`mask_type` must be one of .* "
                                          r"Received: mask_type='dense'"):
        PackedAttentionMask(mask_type="dense")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.integers(0, 4),
       st.booleans())
def test_mask_matches_definition(lengths, padding, causal):
    ids = np.concatenate([np.full(n, k + 1) for k, n in enumerate(lengths)]
                         + [np.zeros(padding, int)])[None]
    mask = np.asarray(PackedAttentionMask(causal=causal)(ids))[0]
    q, k = ids[0][:, None], ids[0][None, :]
    expected = (q == k) & (q > 0) & (k > 0)
    if causal:
        expected &= np.tri(ids.shape[1], dtype=bool)
    np.testing.assert_array_equal(mask, expected)
