"""Attention over each packed sequence alone: gather, attend, scatter back.

Dense packed attention computes all `L x L` scores of a pack and masks the
pairs of different sequences afterwards; a pack of sequences `l_1..l_k`
needs only `sum(l_i^2)` of them. The segmented layout moves every sequence
of a pack into its own row, attends inside each row with a padding mask (and
a causal one for decoders) and moves the results back to their tokens.

Rows need static shapes under XLA, fixed at trace time from `L` (row length
of the pack), `K` (sequences per pack at most) and `S` (tokens per sequence
at most, `L` if unbounded). Sequences are ranked by length inside each pack;
as their lengths add up to `L` at most, the sequence of rank `r` (0 = the
longest) has at most `L // (r + 1)` tokens. Rows therefore come in *tiers*:
ranks `[2^g - 1, 2^(g+1) - 1)` share rows of `min(S, L // 2^g)` tokens.
`segment_tiers` lists them; the score work is `sum(rows * length^2)` instead
of `L^2`. For `L=2048, K=16, S=256`: 15 rows of 256 and one of 128, 1.0M
scores instead of 4.2M.

Worked example, `L=6, K=2, S=6` (tiers: 1 row of 6, 1 row of 3):

    sequence_ids  [1, 1, 2, 2, 2, 0]     lengths 2 and 3, so sequence 2 ranks 0
    tier 0 rows   [[t2, t3, t4, -, -, -]]
    tier 1 rows   [[t0, t1, -]]

A pack the rows cannot hold (more than `K` sequences, one longer than `S`, or
a sequence whose tokens are not contiguous) is still computed exactly:
`segment_layout` reports `fits=False` and the caller falls back to dense
attention for that batch (`ops.cond`, so both stay compiled).
"""

from keras import ops

from tfpack.layers.dense_attention import band_mask, row_mask, softmax_attention


def segment_tiers(length, max_sequences_per_pack, segment_length=None):
    """Static rows: `(first_rank, rows, row_length)` per tier.

    Example:

    >>> segment_tiers(2048, 16, 256)
    ((0, 15, 256), (15, 1, 128))
    >>> segment_tiers(6, 2)
    ((0, 1, 6), (1, 1, 3))
    """
    bound = min(segment_length or length, length)
    tiers, rank = [], 0
    while rank < max_sequences_per_pack:
        rows = min(rank + 1, max_sequences_per_pack - rank)  # ranks [2^g-1, 2^(g+1)-1)
        # At least 2 tokens a row where S allows: a softmax over one key is
        # all ones, and Keras warns about it.
        row_length = max(min(2, bound), min(bound, length // (rank + 1)))
        if tiers and tiers[-1][2] == row_length:
            first, previous, _ = tiers.pop()
            tiers.append((first, previous + rows, row_length))
        else:
            tiers.append((rank, rows, row_length))
        rank += rows
    return tuple(tiers)


def segment_work(length, max_sequences_per_pack, segment_length=None):
    """Attention scores per pack and head of the segmented rows."""
    return sum(rows * size ** 2 for _, rows, size in
               segment_tiers(length, max_sequences_per_pack, segment_length))


def segment_layout(sequence_ids, tiers, max_sequences_per_pack, ranking=None):
    """Where each token goes in the rows of `tiers`.

    Example:

    >>> import numpy as np
    >>> layout = segment_layout(np.array([[1, 1, 2, 2, 2, 0]]),
    ...                         segment_tiers(6, 2), 2)
    >>> [np.asarray(t["lengths"]).tolist() for t in layout["tiers"]]
    [[[3]], [[2]]]
    >>> np.asarray(layout["tiers"][1]["gather_index"]).tolist()
    [[0, 1, 2]]
    >>> bool(layout["fits"])
    True

    Args:
        sequence_ids: int `[batch, length]`, 1..K per sequence, 0 = padding.
        tiers: `segment_tiers(length, K, S)`.
        max_sequences_per_pack: `K`.
        ranking: int `[batch, K]`, the score that ranks the sequences (rank
            0 = the highest; ties to the lower id), or None for their token
            counts (two rows sharing one ranking put sequence k in the same
            row of both: `tfpack.layers.pair_segmented_attention`).

    Returns:
        dict of `fits` (scalar bool) and `tiers`, one dict per tier:
        `gather_index` int `[batch, rows * row_length]` (token read into each
        slot), `token_slots` int `[batch, length]` (slot of each token),
        `in_tier` bool `[batch, length]` (token belongs to this tier) and
        `lengths` int `[batch, rows]` (tokens per row, at least 1 so that
        empty rows stay finite; they are never read back).
    """
    sequence_ids = ops.cast(sequence_ids, "int32")
    length = sequence_ids.shape[1] or ops.shape(sequence_ids)[1]
    positions = ops.arange(length, dtype="int32")
    ids = ops.arange(1, max_sequences_per_pack + 1, dtype="int32")
    member = ops.equal(ops.expand_dims(sequence_ids, 2), ids)  # [B, L, K]
    counts = ops.sum(ops.cast(member, "int32"), axis=1)  # [B, K]
    starts = ops.min(ops.where(member, positions[:, None], length), axis=1)
    ends = ops.max(ops.where(member, positions[:, None], -1), axis=1)
    # Rank 0 is the longest sequence; ties go to the lower sequence id.
    score = counts if ranking is None else ops.cast(ranking, "int32")
    longer = ops.expand_dims(score, 1) > ops.expand_dims(score, 2)
    tie = ops.logical_and(ops.expand_dims(score, 1) == ops.expand_dims(score, 2),
                          ids[None, None, :] < ids[None, :, None])  # j < k
    ranks = ops.sum(ops.cast(ops.logical_or(longer, tie), "int32"), axis=2)
    by_rank = ops.cast(ops.equal(ops.expand_dims(ranks, 2),
                                 ids[None, None, :] - 1), "int32")  # [B,k,r]
    rank_counts = ops.sum(by_rank * ops.expand_dims(counts, 2), axis=1)
    rank_starts = ops.sum(by_rank * ops.expand_dims(starts, 2), axis=1)

    real = sequence_ids > 0
    sequence = ops.clip(sequence_ids - 1, 0, max_sequences_per_pack - 1)
    token_rank = ops.take_along_axis(ranks, sequence, axis=1)
    token_column = positions - ops.take_along_axis(starts, sequence, axis=1)
    fits = ops.logical_and(
        ops.all(ops.logical_or(counts == 0, ends - starts + 1 == counts)),
        ops.all(ops.logical_and(sequence_ids >= 0,
                                sequence_ids <= max_sequences_per_pack)))
    layout = []
    for first, rows, row_length in tiers:
        tier_counts = rank_counts[:, first:first + rows]
        fits = ops.logical_and(fits, ops.all(tier_counts <= row_length))
        columns = ops.arange(row_length, dtype="int32")
        gather = ops.minimum(
            ops.expand_dims(rank_starts[:, first:first + rows], 2) + columns,
            length - 1)
        in_tier = ops.logical_and(
            real, ops.logical_and(token_rank >= first,
                                  token_rank < first + rows))
        slots = ((token_rank - first) * row_length
                 + ops.clip(token_column, 0, row_length - 1))
        layout.append({
            "gather_index": ops.reshape(gather, (-1, rows * row_length)),
            "token_slots": ops.where(in_tier, slots, 0),
            "in_tier": in_tier,
            "lengths": ops.clip(tier_counts, 1, row_length),
        })
    return {"fits": fits, "tiers": layout}


def _batched_take(values, index):
    """`values[b, index[b, i]]` for `values` `[B, N, ...]`, `index` `[B, M]`."""
    shape = ops.shape(values)
    flat = ops.reshape(values, (-1,) + tuple(values.shape[2:]))
    offsets = ops.arange(shape[0], dtype="int32")[:, None] * shape[1]
    taken = ops.take(flat, ops.reshape(index + offsets, (-1,)), axis=0)
    return ops.reshape(taken, (shape[0], -1) + tuple(values.shape[2:]))


def to_rows(x, tier, row_length):
    """`[batch, length, ...]` -> `[batch * rows, row_length, ...]`."""
    rows = _batched_take(x, tier["gather_index"])
    return ops.reshape(rows, (-1, row_length) + tuple(x.shape[2:]))


def from_rows(rows, tier, row_length):
    """`[batch * rows, row_length, ...]` -> `[batch, length, ...]`; zeros on
    tokens of other tiers and padding."""
    tail = tuple(rows.shape[2:])
    batch = ops.shape(tier["token_slots"])[0]
    grid = ops.reshape(rows, (batch, -1) + tail)
    tokens = _batched_take(grid, tier["token_slots"])
    keep = ops.reshape(tier["in_tier"], tuple(ops.shape(tier["in_tier"]))
                       + (1,) * len(tail))
    return ops.where(keep, tokens, ops.zeros_like(tokens))


def attend_in_rows(query, key, value, *, sequence_ids, max_sequences_per_pack,
                   segment_length=None, causal=False, window=None,
                   logit_soft_cap=None, sinks=None, bias=None,
                   row_features=None, dropout=0.0, training=None,
                   seed_generator=None):
    """Context `[B, L, heads, d]` of each packed sequence attending in its own row.

    The segmented attention of every keras-hub family: each sequence's
    queries, keys and values move into a row of `segment_tiers(L, K, S)`,
    attend there (causal, inside a band, soft-capped, with sink logits and
    per-head additive biases computed per row, as the family needs) and move
    back. A pack the rows cannot hold (`segment_layout`'s `fits`) is
    computed exactly by the same scores over the whole pack under the
    packed mask (`ops.cond`, so both stay compiled).

    Scores: `cap(q . k + bias(rows))` (soft cap `cap(s) = c * tanh(s / c)`
    if `logit_soft_cap`); keys of other sequences, after the query
    (`causal`) or outside the band `window` are removed; a softmax in
    float32 over the remaining keys and, per head, the sink logit
    `sinks[h]` if given (GPT-OSS: the sink takes probability mass and
    contributes no value).

    Example (an ALiBi-style bias from positions inside each sequence):

    >>> import numpy as np
    >>> from keras import ops
    >>> q = np.random.default_rng(0).normal(size=(1, 5, 2, 4)).astype("float32")
    >>> ids, pos = np.array([[1, 1, 1, 2, 2]]), np.array([[0, 1, 2, 0, 1]])
    >>> def alibi(rows):  # [rows, heads, S, S]
    ...     p = ops.cast(rows["positions"], "float32")
    ...     return ops.convert_to_tensor([0.5, 0.25])[None, :, None, None] * p[:, None, None, :]
    >>> def run(q, ids, pos, k):
    ...     return np.asarray(attend_in_rows(
    ...         q, q, q, sequence_ids=ids, max_sequences_per_pack=k, causal=True,
    ...         bias=alibi, row_features={"positions": pos}))
    >>> bool(np.allclose(run(q, ids, pos, 2)[0, 3:],
    ...                  run(q[:, 3:], ids[:, 3:] - 1, pos[:, 3:], 1)[0], atol=1e-6))
    True

    Args:
        query: `[B, L, heads, d]`, already multiplied by the query scale.
        key, value: `[B, L, kv_heads, d]` (`heads` a multiple of `kv_heads`:
            grouped-query attention, query head `h` reads kv head
            `h // (heads // kv_heads)`).
        sequence_ids: int `[B, L]`, 1..K, 0 = padding.
        max_sequences_per_pack: `K`.
        segment_length: `S`, the longest sequence (None: `L`).
        causal: queries see earlier keys of their sequence only.
        window: `(before, after)` band of row offsets (`band_mask`).
        logit_soft_cap: Gemma's attention-logit soft cap, or None.
        sinks: `[heads]` sink logits (GPT-OSS), or None.
        bias: callable `bias(rows)` -> additive logits `[R, heads or 1, N,
            N]` of `R` rows of `N` tokens, where `rows` holds `query` and
            `key` (`[R, N, heads, d]`, keys repeated to every head) and each
            `row_features` entry (`[R, N, ...]`); or None. It must depend on
            the tokens of a row only through these (positions inside a
            sequence, not row offsets), as it also scores whole packs.
        row_features: dict of per-token tensors `[B, L, ...]` that `bias`
            reads (positions, token types).
        dropout: rate on the probabilities; `training`: whether it is
            active; `seed_generator`: its `keras.random.SeedGenerator`.

    Returns:
        `[B, L, heads, d]`; zeros on padding tokens.
    """
    import keras

    length = query.shape[1]
    tiers = segment_tiers(length, max_sequences_per_pack, segment_length)
    layout = segment_layout(sequence_ids, tiers, max_sequences_per_pack)
    groups = query.shape[2] // key.shape[2]
    if groups > 1:
        # Before the rows (outside `ops.cond`): the gradient of a repeat
        # inside a branch fails to compile under XLA on TensorFlow.
        key = ops.repeat(key, groups, axis=2)
        value = ops.repeat(value, groups, axis=2)
    seed = seed_generator
    # On JAX a seed is drawn outside `ops.cond`, whose branches cannot
    # update the generator's state there.
    if (training and dropout > 0 and keras.backend.backend() == "jax"
            and seed_generator is not None):
        seed = seed_generator.next()
    options = dict(dropout=dropout, training=training, seed=seed,
                   logit_soft_cap=logit_soft_cap)

    def attend(rows, mask, lengths=None):
        """`mask`: boolean `[R, 1, N, N]`; `lengths` of the tier's rows."""
        key, value = rows["key"], rows["value"]
        if bias is None and sinks is None:
            # Unchanged from `packed_attention` (and its fused JAX kernel).
            if lengths is not None:
                return softmax_attention(rows["query"], key, value,
                                         causal=causal, lengths=lengths,
                                         window=window, **options)
            additive = ops.where(mask, 0.0, -1e9)
            return softmax_attention(rows["query"], key, value, bias=additive,
                                     **options)
        scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", rows["query"], key),
                          "float32")
        if bias is not None:
            scores = scores + ops.cast(bias(rows), "float32")
        if logit_soft_cap is not None:
            scores = ops.tanh(scores / logit_soft_cap) * logit_soft_cap
        scores = ops.where(mask, scores, -1e9)
        if sinks is not None:
            sink = ops.reshape(ops.cast(sinks, "float32"), (1, -1, 1, 1))
            sink = ops.zeros_like(scores[..., :1]) + sink
            scores = ops.concatenate([scores, sink], axis=-1)
        probabilities = ops.softmax(scores, axis=-1)
        if sinks is not None:
            probabilities = probabilities[..., :-1]
        probabilities = ops.cast(probabilities, rows["query"].dtype)
        if bool(training) and dropout > 0:
            probabilities = keras.random.dropout(probabilities, dropout,
                                                 seed=seed)
        return ops.einsum("bhqk,bkhd->bqhd", probabilities, value)

    def segmented():
        context = 0
        for tier, (_, _, row_length) in zip(layout["tiers"], tiers):
            rows = {name: to_rows(x, tier, row_length) for name, x in
                    dict(row_features or {}, query=query, key=key,
                         value=value).items()}
            lengths = ops.reshape(tier["lengths"], (-1,))
            mask = row_mask(lengths, row_length, causal)
            if window is not None:
                mask = ops.logical_and(mask, band_mask(row_length, window))
            context = context + from_rows(attend(rows, mask, lengths), tier,
                                          row_length)
        return context

    def whole_packs():
        ids = ops.cast(sequence_ids, "int32")
        real = ids > 0
        mask = ops.logical_and(ops.expand_dims(ids, 2) == ops.expand_dims(ids, 1),
                               ops.expand_dims(real, 1))
        index = ops.arange(length, dtype="int32")
        if causal:
            mask = ops.logical_and(mask, (index[:, None] >= index[None, :])[None])
        if window is not None:
            mask = ops.logical_and(mask, band_mask(length, window)[None])
        rows = dict(row_features or {}, query=query, key=key, value=value)
        context = attend(rows, ops.expand_dims(mask, 1))
        return ops.where(real[:, :, None, None], context,
                         ops.zeros_like(context))

    return ops.cond(layout["fits"], segmented, whole_packs)
