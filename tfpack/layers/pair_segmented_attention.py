"""Cross-attention of pair packs in rows: target k against its own input k only.

A pair pack holds sequence k of the encoder row (input, `Le` tokens a row)
and sequence k of the decoder row (target, `Ld`), with the same id k. Dense
cross-attention scores all `Ld x Le` token pairs and masks the pairs of
different sequences; the pairs of a pack need only `sum(ld_k * le_k)`. As
`tfpack.layers.segmented_attention` does for self-attention, the segmented
layout moves target k's queries and input k's keys into row k of one tier,
attends there and moves the results back.

The two sides have different row lengths and boundaries, so both must put
sequence k in the same row: they rank the sequences by one joint score,
`le_k * Ld + ld_k * Le` (ties to the lower id). The scores of a pack add up
to `2 * Le * Ld` at most, so the sequence of rank `r` has at most
`2 * Le // (r + 1)` input and `2 * Ld // (r + 1)` target tokens: rows come
in tiers as for self-attention, each with a query length and a key length
(`pair_tiers`; `S` bounds each side where given). A pack the rows cannot
hold (more than `K` sequences, one longer than its side's `S`, tokens not
contiguous) is computed exactly over the whole pack under the pair mask
(`ops.cond`, so both stay compiled).

T5Gemma 2 attends to a target's own keys and its input's in one softmax
("merged"): with `self_key`/`self_value` the rows hold the target's keys
(causal, banded by `self_window`) followed by its input's.

Worked example, `Le=6, Ld=4, K=2` (`pair_tiers(4, 6, 2)`: one tier of 2 rows
of 4 queries and 6 keys):

    encoder ids  [1, 1, 1, 1, 2, 2]   decoder ids [1, 2, 2, 0]
    scores       1: 4*4 + 1*6 = 22    2: 2*4 + 2*6 = 20   -> ranks 0, 1
    row 0        queries [d0, -, -, -]      keys [e0, e1, e2, e3, -, -]
    row 1        queries [d1, d2, -, -]     keys [e4, e5, -, -, -, -]
"""

import keras
from keras import ops

from tfpack.layers.dense_attention import band_mask, row_mask, softmax_attention
from tfpack.layers.segmented_attention import from_rows, segment_layout, to_rows

__all__ = ["attend_across_rows", "pair_layout", "pair_tiers", "pair_work"]


def _row_length(bound, length, rank):
    """Tokens of one side's row for the sequence of `rank` (at least 2 where
    the bound allows: a softmax over one key warns in Keras)."""
    return max(min(2, bound), min(bound, 2 * length // (rank + 1)))


def pair_tiers(query_length, key_length, max_sequences_per_pack,
               query_segment_length=None, key_segment_length=None):
    """Static rows `(first_rank, rows, query_row_length, key_row_length)`.

    Example:

    >>> pair_tiers(6, 4, 2)
    ((0, 2, 6, 4),)
    >>> pair_tiers(2048, 512, 16, 256, 64)
    ((0, 16, 256, 64),)
    >>> pair_tiers(64, 32, 8)
    ((0, 3, 64, 32), (3, 4, 32, 16), (7, 1, 16, 8))
    """
    query_bound = min(query_segment_length or query_length, query_length)
    key_bound = min(key_segment_length or key_length, key_length)
    tiers, rank = [], 0
    while rank < max_sequences_per_pack:
        rows = min(rank + 1, max_sequences_per_pack - rank)
        sizes = (_row_length(query_bound, query_length, rank),
                 _row_length(key_bound, key_length, rank))
        if tiers and tiers[-1][2:] == sizes:
            first, previous = tiers.pop()[:2]
            tiers.append((first, previous + rows) + sizes)
        else:
            tiers.append((rank, rows) + sizes)
        rank += rows
    return tuple(tiers)


def pair_work(query_length, key_length, max_sequences_per_pack,
              query_segment_length=None, key_segment_length=None):
    """Cross-attention scores per pack and head of the rows of `pair_tiers`.

    >>> pair_work(2048, 512, 16, 256, 64) / (2048 * 512)
    0.25
    """
    return sum(rows * q * k for _, rows, q, k in pair_tiers(
        query_length, key_length, max_sequences_per_pack, query_segment_length,
        key_segment_length))


def _counts(sequence_ids, max_sequences_per_pack):
    """Tokens of each sequence id 1..K, `[batch, K]` int32."""
    ids = ops.arange(1, max_sequences_per_pack + 1, dtype="int32")
    member = ops.equal(ops.expand_dims(ops.cast(sequence_ids, "int32"), 2), ids)
    return ops.sum(ops.cast(member, "int32"), axis=1)


def pair_layout(query_sequence_ids, key_sequence_ids, tiers, max_sequences_per_pack):
    """Where each query and each key token goes in the rows of `tiers`
    (`pair_tiers`): `{"fits", "query": [...], "key": [...]}`, one
    `segment_layout` tier dict per tier and side, both ranked by the joint
    score, so row `i` of a tier holds one sequence on both sides.

    >>> import numpy as np
    >>> layout = pair_layout(np.array([[1, 2, 2, 0]]), np.array([[1, 1, 1, 1, 2, 2]]),
    ...                      pair_tiers(4, 6, 2), 2)
    >>> np.asarray(layout["query"][0]["gather_index"]).tolist()
    [[0, 1, 2, 3, 1, 2, 3, 3]]
    >>> np.asarray(layout["key"][0]["lengths"]).tolist(), bool(layout["fits"])
    ([[4, 2]], True)
    """
    query_length, key_length = query_sequence_ids.shape[1], key_sequence_ids.shape[1]
    k = max_sequences_per_pack
    ranking = (_counts(key_sequence_ids, k) * query_length
               + _counts(query_sequence_ids, k) * key_length)
    query = segment_layout(query_sequence_ids, [t[:3] for t in tiers], k, ranking)
    key = segment_layout(key_sequence_ids, [t[:2] + t[3:] for t in tiers], k, ranking)
    return {"fits": ops.logical_and(query["fits"], key["fits"]),
            "query": query["tiers"], "key": key["tiers"]}


def _allowed(key_lengths, query_rows, key_rows, self_lengths=None, self_window=None):
    """Boolean `[R, 1, q, k (+ q)]` of the rows: the input's keys inside its
    length, after the target's own causal keys (banded) when merged."""
    keys = ops.arange(key_rows, dtype="int32")[None, :] < ops.reshape(key_lengths, (-1, 1))
    allowed = ops.broadcast_to(keys[:, None, None, :],
                               (ops.shape(keys)[0], 1, query_rows, key_rows))
    if self_lengths is None:
        return allowed
    own = row_mask(self_lengths, query_rows, True)
    if self_window is not None:
        own = ops.logical_and(own, band_mask(query_rows, self_window))
    return ops.concatenate([own, allowed], axis=-1)


def attend_across_rows(query, key, value, *, query_sequence_ids, key_sequence_ids,
                       max_sequences_per_pack, query_segment_length=None,
                       key_segment_length=None, self_key=None, self_value=None,
                       self_window=None, logit_soft_cap=None, dropout=0.0,
                       training=None, seed_generator=None):
    """Context `[B, Lq, heads, d]` of each target attending to its own input in rows.

    Scores `cap(q . k)` (`cap(s) = c * tanh(s / c)` if `logit_soft_cap`),
    a float32 softmax over the keys of the query's own sequence (and, with
    `self_key`, over its own earlier target keys first, inside the band
    `self_window`), then the values: what dense cross-attention under the
    pair mask gives, for every query whose sequence has at least one key.

    Example (two pairs; each target's context equals the pair's alone):

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q = rng.normal(size=(1, 3, 2, 4)).astype("float32")
    >>> kv = rng.normal(size=(1, 5, 2, 4)).astype("float32")
    >>> def run(q, kv, q_ids, k_ids, k):
    ...     return np.asarray(attend_across_rows(
    ...         q, kv, kv, query_sequence_ids=q_ids, key_sequence_ids=k_ids,
    ...         max_sequences_per_pack=k))
    >>> packed = run(q, kv, np.array([[1, 2, 2]]), np.array([[1, 1, 1, 2, 2]]), 2)
    >>> alone = run(q[:, 1:], kv[:, 3:], np.array([[1, 1]]), np.array([[1, 1]]), 1)
    >>> bool(np.allclose(packed[0, 1:], alone[0], atol=1e-6))
    True

    Args:
        query: `[B, Lq, heads, d]` (the target side), already scaled.
        key, value: `[B, Lk, kv_heads, d]` (the input side; `heads` a
            multiple of `kv_heads`, grouped as in `attend_in_rows`).
        query_sequence_ids, key_sequence_ids: int `[B, Lq]` and `[B, Lk]`,
            1..K, 0 = padding; id k of both sides is one pair.
        max_sequences_per_pack: `K`.
        query_segment_length, key_segment_length: the longest sequence of
            each side (None: its row length).
        self_key, self_value: `[B, Lq, kv_heads, d]`, the target's own keys
            and values for merged attention, or None.
        self_window: `(before, after)` band of the target's own keys.
        logit_soft_cap: the attention-logit soft cap, or None.
        dropout, training, seed_generator: dropout on the probabilities.

    Returns:
        `[B, Lq, heads, d]`; zeros on padding queries.
    """
    groups = query.shape[2] // key.shape[2]
    merged = self_key is not None
    if groups > 1:  # Outside `ops.cond`, as in `attend_in_rows`.
        key, value = ops.repeat(key, groups, axis=2), ops.repeat(value, groups, axis=2)
        if merged:
            self_key = ops.repeat(self_key, groups, axis=2)
            self_value = ops.repeat(self_value, groups, axis=2)
    query_length, key_length = query.shape[1], key.shape[1]
    tiers = pair_tiers(query_length, key_length, max_sequences_per_pack,
                       query_segment_length, key_segment_length)
    layout = pair_layout(query_sequence_ids, key_sequence_ids, tiers, max_sequences_per_pack)
    seed = seed_generator
    if (training and dropout > 0 and keras.backend.backend() == "jax"
            and seed_generator is not None):
        seed = seed_generator.next()  # Outside `ops.cond` on JAX.
    options = dict(dropout=dropout, training=training, seed=seed,
                   logit_soft_cap=logit_soft_cap)

    def attend(q, k, v, allowed, own_k=None, own_v=None):
        if own_k is not None:
            k, v = ops.concatenate([own_k, k], axis=1), ops.concatenate([own_v, v], axis=1)
        return softmax_attention(q, k, v, bias=ops.where(allowed, 0.0, -1e9), **options)

    def segmented():
        context = 0
        for q_tier, k_tier, (_, _, q_rows, k_rows) in zip(layout["query"], layout["key"],
                                                          tiers):
            own = {}
            if merged:
                own = {"own_k": to_rows(self_key, q_tier, q_rows),
                       "own_v": to_rows(self_value, q_tier, q_rows)}
            allowed = _allowed(ops.reshape(k_tier["lengths"], (-1,)), q_rows, k_rows,
                               ops.reshape(q_tier["lengths"], (-1,)) if merged else None,
                               self_window)
            rows = attend(to_rows(query, q_tier, q_rows), to_rows(key, k_tier, k_rows),
                          to_rows(value, k_tier, k_rows), allowed, **own)
            context = context + from_rows(rows, q_tier, q_rows)
        return context

    def whole_packs():
        q_ids = ops.cast(query_sequence_ids, "int32")
        k_ids = ops.cast(key_sequence_ids, "int32")
        allowed = ops.logical_and(ops.expand_dims(q_ids, 2) == ops.expand_dims(k_ids, 1),
                                  ops.expand_dims(k_ids > 0, 1))
        own = {}
        if merged:
            index = ops.arange(query_length, dtype="int32")
            mine = ops.logical_and(ops.expand_dims(q_ids, 2) == ops.expand_dims(q_ids, 1),
                                   (index[:, None] >= index[None, :])[None])
            if self_window is not None:
                mine = ops.logical_and(mine, band_mask(query_length, self_window)[None])
            allowed = ops.concatenate([mine, allowed], axis=-1)
            own = {"own_k": self_key, "own_v": self_value}
        context = attend(query, key, value, ops.expand_dims(allowed, 1), **own)
        return ops.where((q_ids > 0)[:, :, None, None], context, ops.zeros_like(context))

    return ops.cond(layout["fits"], segmented, whole_packs)
