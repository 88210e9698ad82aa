"""Dense softmax attention of pre-scaled queries, and the masks it takes.

The one dense kernel: `tfpack.layers.packed_attention` runs it over whole
packs (under the packed mask) and `tfpack.layers.segmented_attention` over
rows of one sequence each (inside each row's length), so both share its
float32 softmax, soft caps, windows and non-finite isolation.
"""

import keras
from keras import ops

from tfpack.layers.attention_mask import allowed_from_bias, isolate_values, show_poisoned

__all__ = ["band_mask", "row_mask", "softmax_attention"]


def row_mask(lengths, row_length, causal):
    """Boolean `[batch * rows, 1, S, S]`: keys inside the row, causal if
    asked."""
    columns = ops.arange(row_length, dtype="int32")
    keys = ops.expand_dims(columns, 0) < ops.reshape(lengths, (-1, 1))
    allowed = keys[:, None, None, :]
    if causal:
        lower = ops.expand_dims(columns, 1) >= ops.expand_dims(columns, 0)
        allowed = ops.logical_and(allowed, lower[None, None])
    return allowed


def band_mask(length, window):
    """Boolean `[length, length]`: query `i` may see key `j` when
    `i - before <= j <= i + after`, for `window = (before, after)`.

    A sliding window of `W` tokens in a decoder is `(W - 1, 0)`.

    >>> import numpy as np
    >>> np.asarray(band_mask(4, (1, 0))).astype(int).tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    """
    before, after = window
    index = ops.arange(length, dtype="int32")
    offset = ops.expand_dims(index, 0) - ops.expand_dims(index, 1)  # j - i
    return ops.logical_and(offset >= -before, offset <= after)


def softmax_attention(query, key, value, *, causal=False, bias=None,
                      lengths=None, dropout=0.0, training=None, seed=None,
                      logit_soft_cap=None, window=None):
    """Softmax attention of `[b, q, h, d]` pre-scaled queries.

    Either under an additive `bias` (`[b, 1, q, k]`) or inside the first
    `lengths[b]` keys of each row (causal if asked, inside the band
    `window` of `band_mask` if given). Logits are soft-capped, as Gemma's
    (`cap * tanh(logits / cap)`), before the mask when `logit_soft_cap` is
    set. The softmax runs in float32. On JAX without active dropout or soft
    cap: `jax.nn.dot_product_attention` (cuDNN on GPUs where it applies;
    the window as its `local_window_size`).

    A non-finite query, key or value reaches only the queries allowed to
    see it: scores are selected (not only added to) by the mask, and
    values go through `isolate_values` (see `tfpack.layers.attention_mask`),
    so a NaN in one sequence of a pack never turns another into NaN, and
    the outputs of its own sequence are NaN.
    """
    dropout_active = bool(training) and dropout > 0
    if lengths is not None:
        allowed = row_mask(lengths, query.shape[1], causal)
        if window is not None:
            allowed = ops.logical_and(allowed, band_mask(query.shape[1], window))
    else:
        allowed = allowed_from_bias(bias)
    value, poisoned = isolate_values(value, allowed)
    if (keras.backend.backend() == "jax" and not dropout_active
            and logit_soft_cap is None):
        import jax

        # Queries come pre-scaled (as in the einsum path): scale=1.
        if lengths is not None:
            lengths = ops.cast(ops.reshape(lengths, (-1,)), "int32")
            context = jax.nn.dot_product_attention(
                query, key, value, scale=1.0, is_causal=causal,
                query_seq_lengths=lengths, key_value_seq_lengths=lengths,
                local_window_size=None if window is None else tuple(window))
        else:
            context = jax.nn.dot_product_attention(
                query, key, value, bias=ops.cast(bias, query.dtype), mask=allowed,
                scale=1.0)
        return show_poisoned(context, poisoned)
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
    if logit_soft_cap is not None:
        scores = ops.tanh(scores / logit_soft_cap) * logit_soft_cap
    if bias is not None and lengths is None:
        scores = scores + ops.cast(bias, "float32")
    # `where`, not only the additive mask: NaN + (-1e9) would stay NaN.
    scores = ops.where(allowed, scores, -1e9)
    probabilities = ops.cast(ops.softmax(scores, axis=-1), query.dtype)
    if dropout_active:
        probabilities = keras.random.dropout(probabilities, dropout, seed=seed)
    return show_poisoned(ops.einsum("bhqk,bkhd->bqhd", probabilities, value), poisoned)
