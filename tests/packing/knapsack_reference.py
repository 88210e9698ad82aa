"""A plain numpy reference of `_knapsack.price` (the C kernel's spec).

The numpy implementation that `tfpack/packing/_kernels.c` replaced, verbatim
but for its module plumbing: the table, the anchors, the binary split of
copies, the columns filled only when a longer length needs them, the
backtracking of `_knapsack`'s module notes. The compiled kernel must give the
same best value and the same packs, bit for bit (tests/packing/test_kernels.py);
benchmarks/planner_kernels.py times the two.
"""

import dataclasses
import heapq

import numpy as np

from tfpack.packing.algorithms._budget import Budget, OutOfTime


@dataclasses.dataclass(frozen=True)
class Pricing:
    best_value: float
    patterns: list
    pattern_values: np.ndarray


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
    skip = dominated(lengths, usable, priced, max_length, depth)
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


def dominated(lengths, copies, values, max_length, depth) -> np.ndarray:
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
