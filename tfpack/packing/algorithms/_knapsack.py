"""Pricing for the `optimal` planner: a bounded knapsack with at most K items.

Given a value ``y[r]`` for one sequence of length ``lengths[r]`` (the LP duals),
find packs (at most ``max_length`` tokens, at most ``max_sequences_per_pack`` sequences, at
most ``bounds[r]`` copies of length ``lengths[r]``) of largest total value::

    lengths=[2, 3, 5], bounds=[2, 2, 1], values=[.2, .35, .6], max_length=8, depth=3
    -> best value .95 by the pack [5, 3] (rows [1, 2], copies [1, 1]); for the
       anchor 3, [3, 3, 2] (rows [0, 1], copies [1, 2], value .9); for 2, [2, 2]

The dynamic program runs over (sequences used, tokens used) and processes the
lengths in ascending order, each length split into 0/1 items of 1, 2, 4, ...
copies (binary splitting of the copy bound). Because lengths come in ascending
order, the table just before a length is processed gives, for that length as
the *longest* in the pack ("anchor"), the best completion with shorter
sequences. One candidate pack per anchor gives many diverse columns from one
solve, which is what makes column generation converge in few rounds.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Pricing:
    """Result of `price`.

    Attributes:
        best_value: the largest value of any feasible pack (exact up to
            floating point rounding of sums of at most depth values).
        patterns: candidate packs, best first, each of value ``> min_value``:
            ``(rows, copies)``, int64 arrays, rows ascending.
        pattern_values: float64 ``[P]`` their values.
    """

    best_value: float
    patterns: list[tuple[np.ndarray, np.ndarray]]
    pattern_values: np.ndarray


def effective_depth(lengths: np.ndarray, bounds: np.ndarray, max_length: int,
                    max_sequences_per_pack: int | None) -> int | None:
    """``max_sequences_per_pack``, or ``None`` when it can never bind (fewer sequences fit anyway)."""
    if max_sequences_per_pack is None:
        return None
    order = np.argsort(lengths, kind="stable")
    copies = np.repeat(lengths[order], np.minimum(bounds[order], max_length))
    most = int(np.searchsorted(np.cumsum(copies), max_length, side="right"))
    return None if most <= max_sequences_per_pack else int(max_sequences_per_pack)


def _binary_split(bound: int) -> list[int]:
    parts, power = [], 1
    while bound > 0:
        take = min(power, bound)
        parts.append(take)
        bound -= take
        power *= 2
    return parts


def price(lengths: np.ndarray, bounds: np.ndarray, values: np.ndarray, max_length: int,
          depth: int | None, *, min_value: float, max_patterns: int) -> Pricing:
    """Best packs for the given per-length values.

    Args:
        lengths: int64 ``[n]`` distinct sequence lengths, ascending.
        bounds: int64 ``[n]`` most copies of each length in one pack.
        values: float64 ``[n]`` value of one sequence of each length (>= 0).
        max_length: tokens per pack.
        depth: sequences per pack, or ``None`` for no limit (see
            `effective_depth`).
        min_value: only packs worth more than this are returned.
        max_patterns: at most this many candidate packs (one per anchor).
    """
    n = len(lengths)
    rows = 1 if depth is None else depth + 1
    table = np.zeros((rows, max_length + 1))
    items = []  # (row, tokens, sequences, bit-packed mask of the states it improved)
    anchor_value = np.full(n, -np.inf)
    anchor_copies = np.zeros(n, dtype=np.int64)
    anchor_item = np.zeros(n, dtype=np.int64)  # items before the anchor's own
    for r in range(n):
        length, value = int(lengths[r]), float(values[r])
        copies = min(int(bounds[r]), max_length // length)
        if depth is not None:
            copies = min(copies, depth)
        if value <= 0.0 or copies <= 0:
            continue
        # Anchor: m copies of this length, the rest from shorter lengths.
        best, best_m = -np.inf, 0
        for m in range(1, copies + 1):
            total = m * value + table[0 if depth is None else depth - m, max_length - m * length]
            if total > best:
                best, best_m = total, m
        anchor_value[r], anchor_copies[r], anchor_item[r] = best, best_m, len(items)
        for part in _binary_split(copies):
            tokens, gain = part * length, part * value
            shift = 0 if depth is None else part
            source = table[: rows - shift, : max_length + 1 - tokens] + gain
            target = table[shift:, tokens:]
            improved = source > target
            np.copyto(target, source, where=improved)
            items.append((r, tokens, shift, _pack_mask(improved)))
    best_value = float(table[-1, max_length])

    candidates = np.flatnonzero(anchor_value > min_value)
    candidates = candidates[np.argsort(-anchor_value[candidates], kind="stable")][:max_patterns]
    patterns = _backtrack(items, candidates, anchor_copies, anchor_item, lengths, max_length,
                          depth) if len(candidates) else []
    return Pricing(max(best_value, float(anchor_value.max(initial=0.0))), patterns,
                   anchor_value[candidates])


def _backtrack(items, anchors, anchor_copies, anchor_item, lengths, max_length,
               depth) -> list[tuple[np.ndarray, np.ndarray]]:
    """The packs of the anchors: each anchor's copies plus its best completion."""
    copies = anchor_copies[anchors]
    k = np.zeros_like(copies) if depth is None else depth - copies
    c = max_length - copies * lengths[anchors]
    end = anchor_item[anchors]
    which = np.arange(len(anchors))
    taken = [(which, anchors, copies)]  # (pattern, row, copies)
    for t in range(int(end.max()) - 1, -1, -1):
        r, tokens, shift, improved = items[t]
        live = (end > t) & (c >= tokens) & (k >= shift)
        if not live.any():
            continue
        idx = which[live]
        idx = idx[_lookup(improved, k[idx] - shift, c[idx] - tokens)]
        if len(idx):
            part = tokens // int(lengths[r])
            taken.append((idx, np.full(len(idx), r), np.full(len(idx), part)))
            c[idx] -= tokens
            k[idx] -= shift
    pattern, row, count = (np.concatenate(v) for v in zip(*taken))
    order = np.lexsort((row, pattern))
    pattern, row, count = pattern[order], row[order], count[order]
    # Binary parts of one length add up: merge equal (pattern, row) entries.
    first = np.ones(len(row), dtype=bool)
    first[1:] = (pattern[1:] != pattern[:-1]) | (row[1:] != row[:-1])
    starts = np.flatnonzero(first)
    row, count, pattern = row[starts], np.add.reduceat(count, starts), pattern[starts]
    bounds = np.searchsorted(pattern, np.arange(len(anchors) + 1))
    return [(row[a:b], count[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _pack_mask(improved: np.ndarray) -> np.ndarray:
    return np.packbits(improved, axis=-1)


def _lookup(packed: np.ndarray, k: np.ndarray, c: np.ndarray) -> np.ndarray:
    return ((packed[k, c >> 3] >> (7 - (c & 7))) & 1).astype(bool)
