"""Block-diagonal (and causal) attention masks derived from `sequence_ids`."""

import keras
from keras import ops

from tfpack.errors import TfpackError

_MASK_TYPES = ("boolean", "additive")


def large_negative_number(dtype):
    """A large negative value that cannot overflow when added to logits.

    float16 saturates at -65504, so its "minus infinity" is -3e4 (as in
    `keras.layers.Softmax`): attention logits of up to ~3e4 can be added to it
    without reaching -inf (which would make a fully masked row NaN). float32
    and bfloat16 share float32's exponent range, where -1e9 is safe.
    """
    if keras.backend.standardize_dtype(dtype) == "float16":
        return -3e4
    return -1e9


@keras.saving.register_keras_serializable(package="tfpack")
class PackedAttentionMask(keras.layers.Layer):
    """Attention mask that keeps packed sequences apart (seed 000, 3.2.2).

    Token `q` may attend to token `k` only when both are real (sequence id
    above 0) and belong to the same sequence of the pack. Padding attends
    nowhere and nothing attends to padding. With `causal=True` the mask is
    also lower-triangular, which gives the causal block-diagonal mask of a
    packed decoder (seed 002). The mask is computed from `sequence_ids` on the
    device, so only `[B, L]` ints cross from the host, never `[B, L, L]`.

    Example:

    >>> import numpy as np
    >>> mask = PackedAttentionMask()(np.array([[1, 1, 2, 0]]))
    >>> np.asarray(mask)[0].astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 0],
           [0, 0, 0, 0]])

    Args:
        causal: also forbid attending to later tokens.
        mask_type: `"boolean"`: a `[B, L, L]` bool mask (True = may attend), the
            form `keras.layers.MultiHeadAttention(attention_mask=...)` takes.
            `"additive"`: a `[B, 1, L, L]` tensor in the layer's compute dtype,
            0 where attention is allowed and a large negative number where it
            is not (-3e4 in float16, -1e9 otherwise: safe in float16 and
            bfloat16), to add to the attention logits before the softmax.
        block_diagonal: keep sequences apart. `False` gives vanilla BERT's
            padding-only mask (for unpacked data and the paper's ablation).
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        sequence_ids: int tensor `[batch, length]`: 1..K for the sequence a
            token belongs to, 0 for padding.

    Returns:
        The mask described under `mask_type`.
    """

    def __init__(self, causal=False, mask_type="boolean", block_diagonal=True,
                 **kwargs):
        super().__init__(**kwargs)
        if mask_type not in _MASK_TYPES:
            raise TfpackError(
                f"`mask_type` must be one of {_MASK_TYPES}. "
                f"Received: mask_type={mask_type!r}")
        self.causal = bool(causal)
        self.mask_type = mask_type
        self.block_diagonal = bool(block_diagonal)
        self.built = True

    def call(self, sequence_ids):
        sequence_ids = ops.cast(sequence_ids, "int32")
        query = ops.expand_dims(sequence_ids, 2)  # [B, L, 1]
        key = ops.expand_dims(sequence_ids, 1)  # [B, 1, L]
        allowed = ops.logical_and(query > 0, key > 0)
        if self.block_diagonal:
            allowed = ops.logical_and(allowed, ops.equal(query, key))
        if self.causal:
            length = ops.shape(sequence_ids)[1]
            index = ops.arange(length, dtype="int32")
            lower = ops.expand_dims(index, 1) >= ops.expand_dims(index, 0)
            allowed = ops.logical_and(allowed, ops.expand_dims(lower, 0))
        if self.mask_type == "boolean":
            return allowed
        blocked = ops.cast(large_negative_number(self.compute_dtype),
                           self.compute_dtype)
        zero = ops.zeros((), self.compute_dtype)
        return ops.expand_dims(ops.where(allowed, zero, blocked), 1)

    def compute_output_spec(self, sequence_ids):
        batch, length = sequence_ids.shape
        if self.mask_type == "boolean":
            return keras.KerasTensor((batch, length, length), dtype="bool")
        return keras.KerasTensor((batch, 1, length, length),
                                 dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "causal": self.causal,
            "mask_type": self.mask_type,
            "block_diagonal": self.block_diagonal,
        })
        return config
