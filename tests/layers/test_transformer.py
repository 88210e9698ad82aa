import keras
import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.layers import PackedAttentionMask
from tfpack.layers import PackedSelfAttention
from tfpack.layers import PackedTransformerBlock

RNG = np.random.default_rng(0)
X = RNG.normal(size=(1, 6, 8)).astype("float32")
SEQUENCE_IDS = np.array([[1, 1, 2, 2, 2, 0]])
MASK = PackedAttentionMask(mask_type="additive")(SEQUENCE_IDS)


def test_self_attention_matches_keras_multi_head_attention():
    ours = PackedSelfAttention(num_heads=2, hidden_dim=8)
    out = np.asarray(ours(X, MASK))
    theirs = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    theirs(X, X)
    for dense, name in ((ours.query_dense, "query"), (ours.key_dense, "key"),
                        (ours.value_dense, "value")):
        kernel, bias = dense.get_weights()
        getattr(theirs, f"_{name}_dense").set_weights(
            [kernel.reshape(8, 2, 4), bias.reshape(2, 4)])
    kernel, bias = ours.output_dense.get_weights()
    theirs._output_dense.set_weights([kernel.reshape(2, 4, 8), bias])
    expected = np.asarray(theirs(X, X, attention_mask=PackedAttentionMask()(
        SEQUENCE_IDS)))
    np.testing.assert_allclose(out[:, :5], expected[:, :5], atol=1e-5)


@pytest.mark.parametrize("norm_first,rotary", [(False, False), (True, True)])
def test_block_keeps_sequences_apart(norm_first, rotary):
    block = PackedTransformerBlock(2, 8, 16, norm_first=norm_first,
                                   rotary=rotary)
    positions = np.array([[0, 1, 0, 1, 2, 0]])
    packed = np.asarray(block(X, MASK, positions))
    alone_mask = PackedAttentionMask(mask_type="additive")(
        np.array([[1, 1, 1]]))
    alone = np.asarray(block(X[:, 2:5], alone_mask, positions[:, 2:5]))
    np.testing.assert_allclose(packed[:, 2:5], alone, atol=1e-5)


def test_block_config_round_trip_and_training_step():
    block = PackedTransformerBlock(2, 8, 16, activation="gelu_tanh",
                                   dropout=0.1, rotary=True,
                                   rotary_max_wavelength=500)
    clone = PackedTransformerBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config()
    import tensorflow as tf

    with tf.GradientTape() as tape:
        y = block(X, MASK, np.zeros((1, 6), "int32"), training=True)
        loss = tf.reduce_sum(y ** 2)
    grads = tape.gradient(loss, block.trainable_variables)
    assert len(grads) == len(block.trainable_variables) == 16
    assert all(g is not None for g in grads)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_block_mixed_precision_is_finite(policy):
    block = PackedTransformerBlock(2, 8, 16, dtype=policy)
    mask = PackedAttentionMask(mask_type="additive", dtype=policy)(
        SEQUENCE_IDS)
    out = block(X, mask)
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert np.all(np.isfinite(np.asarray(keras.ops.cast(out, "float32"))))


def test_errors_name_arguments():
    with pytest.raises(TfpackError, match=r"Received: hidden_dim=10, "
                                          r"num_heads=3"):
        PackedSelfAttention(num_heads=3, hidden_dim=10)
    with pytest.raises(TfpackError, match=r"Received: activation='swish'"):
        PackedTransformerBlock(2, 8, 16, activation="swish")
