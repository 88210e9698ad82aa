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


def segment_layout(sequence_ids, tiers, max_sequences_per_pack):
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
    longer = ops.expand_dims(counts, 1) > ops.expand_dims(counts, 2)
    tie = ops.logical_and(ops.expand_dims(counts, 1) == ops.expand_dims(counts, 2),
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
