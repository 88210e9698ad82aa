"""Block-diagonal (and causal) attention masks derived from `sequence_ids`,
and the helpers that keep a non-finite value inside its own sequence.

A mask added to the scores does not isolate a NaN: ``NaN + (-1e9)`` is NaN,
so one NaN key turns the softmax of every query of the pack into NaN, and a
probability of exactly 0 times a NaN value is NaN again. Attention that
isolates sequences therefore (1) selects the scores with ``where``
(`allowed_from_bias` recovers the allowed pairs of an additive mask) and (2)
multiplies probabilities by `isolate_values`' values: non-finite value
rows zeroed, and every query allowed to see one marked, so `show_poisoned`
makes exactly those outputs NaN. A NaN of sequence A then never reaches
sequence B, and A's own outputs still show it (nothing is hidden).

>>> import numpy as np
>>> value = np.array([[[[1.0]], [[np.nan]], [[2.0]]]], "float32")  # [b, k, h, d]
>>> allowed = PackedAttentionMask()(np.array([[1, 1, 2]]))[:, None]  # [b, 1, q, k]
>>> clean, poisoned = isolate_values(value, allowed)
>>> np.asarray(clean).ravel().tolist(), np.asarray(poisoned).tolist()
([1.0, 0.0, 2.0], [[True, True, False]])
"""

import keras
from keras import ops

from tfpack.params import Anything, Boolean, Options, validate_params

_MASK_TYPES = ("boolean", "additive")
# At or below this, an additive mask blocks a pair: tfpack's masks hold 0 or
# `large_negative_number` (-3e4 in float16, -1e9 otherwise); a bias such as
# ALiBi's stays far above it.
_BLOCKED_BELOW = -1.5e4


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


def allowed_from_bias(bias):
    """Boolean: where an additive mask (`PackedAttentionMask(mask_type="additive")`,
    0 or `large_negative_number`) allows attention; same shape as `bias`."""
    return ops.cast(bias, "float32") > _BLOCKED_BELOW


def isolate_values(value, allowed):
    """`(clean_value, poisoned)`: the values with non-finite rows zeroed, and which queries
    may see one of them.

    Args:
        value: `[batch, keys, heads, head_dim]`.
        allowed: boolean `[batch or 1, heads or 1, queries, keys]` (True = query may
            attend to key).

    Returns:
        `clean_value` (same shape as `value`: a key with any non-finite value
        is all zeros) and `poisoned`, boolean `[batch, queries]`: the query may
        attend to such a key, so its output must be non-finite
        (`show_poisoned`).
    """
    bad = ops.logical_not(ops.all(ops.isfinite(value), axis=(2, 3)))  # [b, k]
    clean = ops.where(bad[:, :, None, None], ops.zeros_like(value), value)
    sees = ops.cast(ops.any(allowed, axis=1), "float32")  # [b, q, k]
    reached = ops.matmul(sees, ops.cast(bad, "float32")[:, :, None])[..., 0]
    return clean, reached > 0


def isolate_tokens(x, allowed):
    """`(clean_x, show)`: a non-finite token kept inside the tokens allowed to see it,
    for a block (attention and per-token layers) that mixes tokens only through
    attention under `allowed`.

    The block runs on `clean_x` (non-finite tokens zeroed, so every key and value it
    computes is finite) and `show(output)` makes NaN exactly the outputs of the
    tokens allowed to see a non-finite one (itself included). Finite inputs pass
    through unchanged. Attention written elsewhere (keras-hub's layers) is isolated
    this way without touching its scores.

    >>> import numpy as np
    >>> x = np.array([[[1.0], [np.nan], [2.0]]], "float32")  # [b, L, dim]
    >>> allowed = PackedAttentionMask()(np.array([[1, 1, 2]]))  # [b, L, L]
    >>> clean, show = isolate_tokens(x, allowed)
    >>> np.asarray(clean).ravel().tolist(), np.asarray(show(clean)).ravel().tolist()
    ([1.0, 0.0, 2.0], [nan, nan, 2.0])

    Args:
        x: `[batch, length, dim]`.
        allowed: boolean `[batch, length, length]` (True = query may attend to key).

    Returns:
        `clean_x` (same shape as `x`) and `show`, mapping a `[batch, length, ...]`
        output of the block to the same with NaN at the reached tokens.
    """
    clean, poisoned = isolate_values(x[:, :, None, :], allowed[:, None])

    def show(output):
        reached = poisoned
        for _ in range(len(output.shape) - 2):
            reached = ops.expand_dims(reached, -1)
        return ops.where(reached, ops.cast(float("nan"), output.dtype), output)

    return clean[:, :, 0, :], show


def show_poisoned(context, poisoned):
    """`context` `[batch, queries, heads, head_dim]` with NaN where `poisoned` `[batch, queries]`."""
    nan = ops.cast(float("nan"), context.dtype)
    return ops.where(poisoned[:, :, None, None], nan, context)


@validate_params({"query_sequence_ids": Anything("an int tensor [B, Lq]"),
                  "key_sequence_ids": Anything("an int tensor [B, Lk]")})
def pair_attention_mask(query_sequence_ids, key_sequence_ids):
    """Boolean `[B, Lq, Lk]`: query `q` may attend to key `k` when both are real and
    carry the same sequence id: the cross-attention mask of a pair pack, where the
    decoder's sequence `k` attends only to the encoder's sequence `k`
    (`tfpack.tasks.seq2seq`).

    >>> import numpy as np
    >>> mask = pair_attention_mask(np.array([[1, 1, 2, 0]]), np.array([[1, 2, 2]]))
    >>> np.asarray(mask)[0].astype(int)
    array([[1, 0, 0],
           [1, 0, 0],
           [0, 1, 1],
           [0, 0, 0]])
    """
    query = ops.expand_dims(ops.cast(query_sequence_ids, "int32"), 2)
    key = ops.expand_dims(ops.cast(key_sequence_ids, "int32"), 1)
    return ops.logical_and(ops.logical_and(query > 0, key > 0), ops.equal(query, key))


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

    @validate_params({"causal": Boolean(), "mask_type": Options(*_MASK_TYPES),
                      "block_diagonal": Boolean()})
    def __init__(self, causal=False, mask_type="boolean", block_diagonal=True,
                 **kwargs):
        super().__init__(**kwargs)
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
