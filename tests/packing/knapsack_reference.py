"""A plain numpy reference of `_knapsack.price`'s dynamic program (the C kernel's spec).

The table, the anchors, the binary split of copies, the columns filled only
when a longer length needs them and the backtracking of `_knapsack`'s module
notes, written with whole-array numpy steps and nothing else: the compiled
kernel (`tfpack/packing/_kernels.c`) must give the same best value and the
same packs, bit for bit (tests/packing/test_kernels.py).
"""

import heapq

import numpy as np

from tfpack.packing.algorithms import _knapsack


def dominated(lengths, copies, values, max_length, depth):
    k = int(max_length // lengths[0]) if len(lengths) else 0
    if depth is not None:
        k = min(k, depth)
    skip = np.zeros(len(lengths), dtype=bool)
    best = []  # min-heap: the k most valuable copies of shorter lengths
    for r in range(len(lengths)):
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


def price(lengths, bounds, values, max_length, depth, *, min_value, max_patterns, exact=False):
    """(best_value, patterns, pattern_values) as `_knapsack.price` returns them."""
    n = len(lengths)
    rows = 1 if depth is None else depth + 1
    most = int(max_length // lengths[0]) if depth is None else depth
    eps = 2.0 ** -24
    single = not exact and 2 * (most + 2) * eps <= _knapsack.OVERSTATES
    table = np.zeros((rows, max_length + 1), dtype=np.float32 if single else np.float64)
    usable = _knapsack._copies(lengths, bounds, max_length, depth)
    values = np.asarray(values, dtype=np.float64)
    priced = values.astype(table.dtype)
    priced = np.where(priced < values, np.nextafter(priced, np.inf, dtype=table.dtype), priced)
    skip = dominated(lengths, usable, priced, max_length, depth)
    items, anchor_value = [], np.full(n, -np.inf)
    anchor_copies, anchor_item = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    filled = 1
    for r in range(n):
        length, value, copies = int(lengths[r]), float(priced[r]), int(usable[r])
        if value <= 0.0 or copies <= 0:
            continue
        reach = min(max_length + 1, most * length + 1)
        if reach > filled:
            table[:, filled:reach] = table[:, filled - 1: filled]
            filled = reach
        best, best_m = -np.inf, 0
        for m in range(1, copies + 1):
            total = m * value + float(table[0 if depth is None else depth - m,
                                            min(max_length - m * length, filled - 1)])
            if total > best:
                best, best_m = total, m
        anchor_value[r], anchor_copies[r], anchor_item[r] = best, best_m, len(items)
        if skip[r]:
            continue
        part_power, left = 1, copies
        while left > 0:
            part = min(part_power, left)
            left, part_power = left - part, 2 * part_power
            tokens, gain = part * length, table.dtype.type(part * value)
            if float(gain) < part * value:
                gain = np.nextafter(gain, table.dtype.type(np.inf))
            shift = 0 if depth is None else part
            height, width = rows - shift, filled - tokens
            source = table[:height, :width] + gain
            target = table[shift:, tokens:filled]
            improved = source > target
            target[improved] = source[improved]
            items.append((r, tokens, shift, filled, improved))
    best_value = max(float(table[-1, min(max_length, filled - 1)]),
                     float(anchor_value.max(initial=0.0)))
    if single:
        best_value *= 1 + 2 * (most + 2) * eps
    slack = 0.0 if not single else 2 * (most + 2) * eps * max(1.0, abs(min_value))
    candidates = np.flatnonzero(anchor_value > min_value - slack)
    candidates = candidates[np.argsort(-anchor_value[candidates], kind="stable")]
    candidates = candidates[: max_patterns if not single else 2 * max_patterns]
    patterns = []
    for anchor in candidates.tolist():
        m = int(anchor_copies[anchor])
        k = 0 if depth is None else depth - m
        c = max_length - m * int(lengths[anchor])
        taken = {anchor: m}
        for t in range(int(anchor_item[anchor]) - 1, -1, -1):
            r, tokens, shift, filled_t, improved = items[t]
            c = min(c, filled_t - 1)
            if c >= tokens and k >= shift and improved[k - shift, c - tokens]:
                taken[r] = taken.get(r, 0) + tokens // int(lengths[r])
                c, k = c - tokens, k - shift
        order = sorted(taken)
        patterns.append((np.array(order, dtype=np.int64),
                         np.array([taken[r] for r in order], dtype=np.int64)))
    worth = np.array([copies @ values[rows] for rows, copies in patterns], dtype=np.float64)
    keep = np.flatnonzero(worth > min_value)
    keep = keep[np.argsort(-worth[keep], kind="stable")][:max_patterns]
    return best_value, [patterns[j] for j in keep], worth[keep]
