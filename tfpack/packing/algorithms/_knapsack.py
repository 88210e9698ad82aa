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

Lengths that can never improve a pack are skipped (`_dominated`): a copy of a
length can be swapped for a free copy of a shorter length worth at least as
much, and a pack of at most ``k`` sequences always has one free when ``k`` such
copies exist. Column generation's duals grow with length in plateaus of equal
values, so most lengths of a plateau are skipped; the best value stays exact.
(Ties in ``lengths`` are allowed: "shorter" then means "earlier".)

Two more savings leave the result exact or bounded from above:

- Columns past ``k * l + 1`` (``l`` the longest length so far) are not
  computed: no pack of lengths up to ``l`` fills them, so they repeat the last
  computed column, filled in when a longer length needs them (backtracking
  reads them there too). Short lengths touch a fraction of the table.
- With at most 165 sequences a pack (`OVERSTATES`), the table is float32 (three
  times faster than float64: it moves half the bytes). Every value and every
  multiple of one is rounded *up* to float32, so the table sums overstate the
  values; a sum of at most ``k`` rounded terms is at least the exact sum times
  ``1 - (k + 1) 2**-24``, so the best value is reported multiplied by
  ``1 + 2 (k + 2) 2**-24``: never below the exact best, and at most
  `OVERSTATES` above it. That keeps Farley's bound (``h.y / best``) valid. The
  packs' own values are recomputed in float64 from their copies, and only
  packs worth more than ``min_value`` by that count are returned. ``exact=True``
  runs float64 throughout (the reported best is then exact up to rounding of
  at most ``k`` double additions).
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from tfpack.packing.algorithms._budget import Budget, OutOfTime


@dataclasses.dataclass(frozen=True)
class Pricing:
    """Result of `price`.

    Attributes:
        best_value: the largest value of any feasible pack, or an upper bound
            on it at most `OVERSTATES` (relative) above it (float32 tables; see
            the module notes). With ``exact=True``, exact up to floating point
            rounding of sums of at most depth values.
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
          depth: int | None, *, min_value: float, max_patterns: int,
          exact: bool = False, budget: Budget | None = None) -> Pricing:
    """Best packs for the given per-length values.

    Args:
        lengths: int64 ``[n]`` sequence lengths, ascending (distinct, except
            for lengths rounded up to a coarser grid, see `optimal`).
        bounds: int64 ``[n]`` most copies of each length in one pack.
        values: float64 ``[n]`` value of one sequence of each length (>= 0).
        max_length: tokens per pack.
        depth: sequences per pack, or ``None`` for no limit (see
            `effective_depth`).
        min_value: only packs worth more than this are returned.
        max_patterns: at most this many candidate packs (one per anchor).
        exact: run the table in float64 (else in float32 where a pack holds
            few enough sequences for its rounding to stay below ~1e-5).
        budget: checked every 32 lengths.

    Raises:
        OutOfTime: ``budget`` ended first (there is then no result).
    """
    n = len(lengths)
    rows = 1 if depth is None else depth + 1
    most = int(max_length // lengths[0]) if depth is None else depth  # sequences in a pack
    single = not exact and 2 * (most + 2) * _F32_EPS <= OVERSTATES
    table = np.zeros((rows, max_length + 1), dtype=np.float32 if single else np.float64)
    scratch, better = np.empty_like(table), np.empty(table.shape, dtype=bool)
    items = []  # (row, tokens, sequences, bit-packed mask of the states it improved)
    anchor_value = np.full(n, -np.inf)
    anchor_copies = np.zeros(n, dtype=np.int64)
    anchor_item = np.zeros(n, dtype=np.int64)  # items before the anchor's own
    usable = _copies(lengths, bounds, max_length, depth)
    # float32: every value (and every multiple of one) rounded up, so the table
    # only overstates; each of its sums of at most `most` terms is then within
    # (most + 1) * 2**-24 (relative) below the exact sum of those terms.
    priced = _round_up(values, table.dtype)
    skip = _dominated(lengths, usable, priced, max_length, depth)
    # Columns from `filled` on repeat column `filled - 1`: with lengths up to
    # l so far, no pack of at most `most` sequences holds more than most * l tokens.
    filled = 1
    for r in range(n):
        if budget is not None and r % 32 == 31 and budget.expired():
            raise OutOfTime
        length, value = int(lengths[r]), float(priced[r])
        copies = int(usable[r])
        if value <= 0.0 or copies <= 0:
            continue
        reach = min(max_length + 1, most * length + 1)
        if reach > filled:
            table[:, filled:reach] = table[:, filled - 1: filled]
            filled = reach
        # Anchor: m copies of this length, the rest from shorter lengths.
        best, best_m = -np.inf, 0
        for m in range(1, copies + 1):
            total = m * value + float(table[0 if depth is None else depth - m,
                                            min(max_length - m * length, filled - 1)])
            if total > best:
                best, best_m = total, m
        anchor_value[r], anchor_copies[r], anchor_item[r] = best, best_m, len(items)
        if skip[r]:
            continue  # still an anchor (more columns), but no better pack holds it
        for part in _binary_split(copies):
            tokens, gain = part * length, table.dtype.type(part * value)
            if float(gain) < part * value:  # exact in float64: value has 24 bits, part < 2**29
                gain = np.nextafter(gain, table.dtype.type(np.inf))
            shift = 0 if depth is None else part
            height, width = rows - shift, filled - tokens  # tokens <= most * length < filled
            # Into preallocated buffers: no temporaries of the table's size per item.
            source = np.add(table[:height, :width], gain, out=scratch[:height, :width])
            target = table[shift:, tokens:filled]
            improved = np.greater(source, target, out=better[:height, :width])
            np.copyto(target, source, where=improved)
            items.append((r, tokens, shift, filled, _pack_mask(improved)))
    best_value = max(float(table[-1, min(max_length, filled - 1)]),
                     float(anchor_value.max(initial=0.0)))
    if single:
        best_value *= 1 + 2 * (most + 2) * _F32_EPS

    slack = 0.0 if not single else 2 * (most + 2) * _F32_EPS * max(1.0, abs(min_value))
    candidates = np.flatnonzero(anchor_value > min_value - slack)
    candidates = candidates[np.argsort(-anchor_value[candidates], kind="stable")]
    candidates = candidates[: max_patterns if not single else 2 * max_patterns]
    patterns = _backtrack(items, candidates, anchor_copies, anchor_item, lengths, max_length,
                          depth) if len(candidates) else []
    worth = np.array([copies @ values[rows] for rows, copies in patterns], dtype=np.float64)
    keep = np.flatnonzero(worth > min_value)
    keep = keep[np.argsort(-worth[keep], kind="stable")][:max_patterns]
    return Pricing(best_value, [patterns[j] for j in keep], worth[keep])


_F32_EPS = 2.0 ** -24  # unit roundoff of float32
OVERSTATES = 2e-5  # `Pricing.best_value` is at most this much (relative) above the exact best


def _round_up(values, dtype):
    """``values`` in ``dtype``, each rounded up (never below the float64 value)."""
    values = np.asarray(values, dtype=np.float64)
    rounded = values.astype(dtype)
    return np.where(rounded < values, np.nextafter(rounded, np.inf, dtype=dtype), rounded)


def _copies(lengths, bounds, max_length, depth) -> np.ndarray:
    """Most copies of each length one pack can hold."""
    copies = np.minimum(bounds, max_length // lengths)
    return copies if depth is None else np.minimum(copies, depth)


def _dominated(lengths, copies, values, max_length, depth) -> np.ndarray:
    """bool ``[n]``: lengths no best pack needs, as shorter lengths serve instead.

    No pack holds more than ``k`` sequences (the depth, or as many of the
    shortest length as fit), so one holding length ``r`` holds at most ``k - 1``
    others. If shorter lengths offer ``k`` copies (within their ``copies``)
    each worth at least ``values[r]``, one of them is free in that pack and
    replaces ``r``: no more tokens, no more sequences, no less value. Repeating
    this ends (the row drops each time) in an equally good pack without skipped
    lengths, so the best value over the other lengths is the best value.
    """
    n = len(lengths)
    k = int(max_length // lengths[0]) if n else 0
    if depth is not None:
        k = min(k, depth)
    skip = np.zeros(n, dtype=bool)
    best: list[float] = []  # min-heap: the k most valuable copies of shorter lengths
    for r in range(n):
        value = float(values[r])
        skip[r] = len(best) == k and best[0] >= value
        for _ in range(int(copies[r])):
            if len(best) < k:
                heapq.heappush(best, value)
            elif value > best[0]:
                heapq.heapreplace(best, value)
            else:
                break
    return skip


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
        r, tokens, shift, filled, improved = items[t]
        np.minimum(c, filled - 1, out=c)  # the table repeats its last filled column
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
