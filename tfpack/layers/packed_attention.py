"""The attention computation of a pack, dense or segmented, as one function.

`PackedSelfAttention` and the keras-hub encoder adapters project queries,
keys and values with their own layers and hand them here, so the choice
between dense and segmented attention (and the JAX fused kernel) lives in
one place.
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers import segmented_attention as segments
from tfpack.layers.dense_attention import softmax_attention


def packed_attention(query, key, value, *, implementation, dense_bias,
                     sequence_ids=None, causal=False,
                     max_sequences_per_pack=None, segment_length=None,
                     dropout=0.0, training=None, seed_generator=None,
                     logit_soft_cap=None, window=None):
    """Context `[b, L, h, d]` of pre-scaled `query`, `key`, `value`.

    Example:

    >>> import numpy as np
    >>> from tfpack.layers import PackedAttentionMask
    >>> q = np.random.default_rng(0).normal(size=(1, 4, 2, 3)).astype("float32")
    >>> ids = np.array([[1, 1, 2, 0]])
    >>> mask = lambda: PackedAttentionMask(mask_type="additive")(ids)
    >>> dense = packed_attention(q, q, q, implementation="dense",
    ...                          dense_bias=mask)
    >>> segmented = packed_attention(q, q, q, implementation="segmented",
    ...                              dense_bias=mask, sequence_ids=ids,
    ...                              max_sequences_per_pack=2)
    >>> bool(np.allclose(np.asarray(dense)[0, :3], np.asarray(segmented)[0, :3],
    ...                  atol=1e-6))
    True

    Args:
        query, key, value: `[batch, length, heads, head_dim]`, queries
            already multiplied by the attention scale.
        implementation: `"dense"` or `"segmented"` (resolved, not `"auto"`).
        dense_bias: callable returning the additive `[batch, 1, L, L]` mask;
            called only where dense attention runs (inside the fallback
            branch for segmented attention).
        sequence_ids: int `[batch, length]`; required by `"segmented"`.
        causal: decoder attention (segmented rows).
        window: `(before, after)` band of `band_mask` inside each sequence
            (sliding-window layers), applied in the segmented rows; the
            dense path takes it from `dense_bias`.
        logit_soft_cap: Gemma's attention-logit soft cap, or None.
        max_sequences_per_pack: `K` of the segmented rows.
        segment_length: `S` of the segmented rows; None = `L`.
        dropout: rate on the attention probabilities.
        training: whether dropout is active.
        seed_generator: the `keras.random.SeedGenerator` of the dropout.
    """
    # On JAX a seed is drawn here, outside `ops.cond`: the generator's state
    # cannot be updated inside a branch there.
    seed = seed_generator
    if (training and dropout > 0 and keras.backend.backend() == "jax"
            and seed_generator is not None):
        seed = seed_generator.next()
    options = dict(dropout=dropout, training=training, seed=seed,
                   logit_soft_cap=logit_soft_cap)

    def dense():
        return softmax_attention(query, key, value, bias=dense_bias(),
                                 **options)

    if implementation == "dense":
        return dense()
    length = query.shape[1]
    if sequence_ids is None:
        raise TfpackError("`attention_implementation='segmented'` needs "
                          "`sequence_ids`. Received: sequence_ids=None")
    if length is None:
        raise TfpackError("`attention_implementation='segmented'` needs a "
                          "static row length. Received: length=None")
    tiers = segments.segment_tiers(length, max_sequences_per_pack,
                                   segment_length)
    layout = segments.segment_layout(sequence_ids, tiers,
                                     max_sequences_per_pack)

    def segmented():
        context = 0
        for tier, (_, _, row_length) in zip(layout["tiers"], tiers):
            rows = [segments.to_rows(x, tier, row_length)
                    for x in (query, key, value)]
            attended = softmax_attention(*rows, causal=causal, window=window,
                                         lengths=tier["lengths"], **options)
            context = context + segments.from_rows(attended, tier, row_length)
        return context

    return ops.cond(layout["fits"], segmented, dense)
