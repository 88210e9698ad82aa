"""Per-sequence first/best fit decreasing, run on groups: the engine of ``ffd``/``bfd``.

First fit decreasing (FFD) sorts the sequences longest first and puts each
into the first pack, in opening order, that still has room (tokens and
depth), opening a new pack when none has; best fit decreasing (BFD) picks the
pack with the least free space that fits instead (ties: the earliest opened).
multipack and TRL do this sequence by sequence, O(n log n).

Because lengths are integers <= L, equal sequences arrive together and the
packs fall into few groups of identical packs that are contiguous in opening
order. A sequence of length ``l`` entering a pack with free space ``s`` keeps
it the first (FFD) or tightest (BFD) fit until it holds
``min(s // l, depth left)`` of them, so each group of packs takes its
sequences in bulk and splits into at most three groups (full, one partial,
untouched). The result is exactly that of the per-sequence algorithm, in
O(n + L * groups) with groups = O(L), i.e. independent of n after the
histogram.

Best fit keeps the groups that still fit something in buckets by free space
instead (`_best_fit_decreasing`): a length takes its tightest fit from the
smallest non-empty bucket at or above it, and a group it fills has less space
than that length afterwards (or is full). Spaces below the current length
only receive groups, spaces at or above it (the zone) only give them, apart
from the one group a length splits; so a bucket is sorted by opening order
once, when the zone reaches it, and the zone's non-empty buckets stay a stack
(smallest last). A histogram with every length of L=65,536 takes ~0.5 s (the
array scan above costs O(L x groups) there; a sorted list of (space, order)
in blocks took 1.0-1.3x as long, with the same plans). A group's opening order is the
index of its first pack among all packs opened: a split group's pieces start
at its first, first + full packs, and so on.
"""

from __future__ import annotations

import bisect

import numpy as np

from tfpack.packing.algorithms import base


def fit_decreasing(
    histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, best_fit: bool
) -> base.AlgorithmResult:
    """Pack ``histogram`` as per-sequence FFD (or BFD with ``best_fit``) would."""
    depth_limit = max_length if max_sequences_per_pack is None else max_sequences_per_pack
    if best_fit:
        return _best_fit_decreasing(histogram, max_length, depth_limit)
    # Groups of identical packs, in opening order; full packs simply stop fitting.
    count = np.zeros(0, dtype=np.int64)
    space = np.zeros(0, dtype=np.int64)
    depth = np.zeros(0, dtype=np.int64)
    contents: list[tuple[int, ...]] = []

    for length in range(max_length, 0, -1):
        left = int(histogram[length - 1])
        if left == 0:
            continue
        fits = np.flatnonzero((space >= length) & (depth < depth_limit))
        if best_fit:
            fits = fits[np.argsort(space[fits], kind="stable")]  # ties keep opening order
        per_pack = np.minimum(space[fits] // length, depth_limit - depth[fits])
        room = np.cumsum(count[fits] * per_pack)
        filled = int(np.searchsorted(room, left, side="right"))  # groups taking all they can
        full = fits[:filled]
        space[full] -= per_pack[:filled] * length
        depth[full] += per_pack[:filled]
        for i, k in zip(full.tolist(), per_pack[:filled].tolist()):
            contents[i] += (length,) * k
        left -= int(room[filled - 1]) if filled else 0
        if left and filled < fits.size:
            # The next group takes the rest: split it into full / partial / untouched packs.
            i, k = int(fits[filled]), int(per_pack[filled])
            packs, rest = divmod(left, k)
            pieces = [(packs, k), (int(rest > 0), rest), (int(count[i]) - packs - int(rest > 0), 0)]
            pieces = [(n, m) for n, m in pieces if n > 0]
            count = np.concatenate([count[:i], [n for n, _ in pieces], count[i + 1 :]])
            space = np.concatenate([space[:i], [space[i] - m * length for _, m in pieces], space[i + 1 :]])
            depth = np.concatenate([depth[:i], [depth[i] + m for _, m in pieces], depth[i + 1 :]])
            contents[i : i + 1] = [contents[i] + (length,) * m for _, m in pieces]
            left = 0
        if left:
            # Fits nowhere: new packs, each filled with as many copies as fit.
            k = min(max_length // length, depth_limit)
            packs, rest = divmod(left, k)
            pieces = [(n, m) for n, m in ((packs, k), (int(rest > 0), rest)) if n > 0]
            count = np.append(count, [n for n, _ in pieces])
            space = np.append(space, [max_length - m * length for _, m in pieces])
            depth = np.append(depth, [m for _, m in pieces])
            contents += [(length,) * m for _, m in pieces]
    return base.AlgorithmResult(contents, count)


def _best_fit_decreasing(histogram: np.ndarray, max_length: int,
                         depth_limit: int) -> base.AlgorithmResult:
    """Best fit decreasing on groups in buckets by free space; module notes."""
    groups: dict[int, list] = {}  # first pack's index -> [count, space, depth, contents]
    # Groups that can take more, by free space: -(first pack's index), ascending (so the
    # earliest opened is last), kept sorted only in the active zone (spaces >= `active`).
    buckets: dict[int, list[int]] = {}
    zone: list[int] = []  # -(space) of the zone's non-empty buckets, ascending
    active = max_length + 1  # the zone's least space
    opened = 0  # packs opened so far

    def place(key: int, count: int, space: int, depth: int, contents: tuple) -> None:
        """Record a group (in its bucket if it can take more)."""
        groups[key] = [count, space, depth, contents]
        if space > 0 and depth < depth_limit:
            bucket = buckets.get(space)
            if bucket is None:
                bucket = buckets[space] = []
            if space < active:  # sorted when the zone reaches it
                bucket.append(-key)
                return
            if not bucket:
                bisect.insort(zone, -space)
            bisect.insort(bucket, -key)

    lengths = np.flatnonzero(histogram)[::-1] + 1
    for length, left in zip(lengths.tolist(), np.asarray(histogram)[lengths - 1].tolist()):
        for space in range(active - 1, length - 1, -1):  # the zone grows down to `length`
            bucket = buckets.get(space)
            if bucket:
                bucket.sort()
                zone.append(-space)
        active = length
        while left and zone:
            space = -zone[-1]  # the tightest fit, and in it the earliest opened
            bucket = buckets[space]
            key = -bucket.pop()
            if not bucket:
                zone.pop()
            count, _, depth, contents = groups.pop(key)
            k = min(space // length, depth_limit - depth)
            if count * k <= left:  # every pack of the group takes k: below the zone now
                left -= count * k
                space -= k * length
                depth += k
                groups[key] = [count, space, depth, contents + (length,) * k]
                if space > 0 and depth < depth_limit:  # `place`, inlined: space < active
                    bucket = buckets.get(space)
                    if bucket is None:
                        buckets[space] = [-key]
                    else:
                        bucket.append(-key)
                continue
            packs, rest = divmod(left, k)  # split: full / partial / untouched
            pieces = [(packs, k), (int(rest > 0), rest), (count - packs - int(rest > 0), 0)]
            for number, taken in pieces:
                if number:
                    place(key, number, space - taken * length, depth + taken,
                          contents + (length,) * taken)
                    key += number
            left = 0
        if left:  # fits nowhere: new packs, each with as many copies as fit
            k = min(max_length // length, depth_limit)
            packs, rest = divmod(left, k)
            for number, taken in ((packs, k), (int(rest > 0), rest)):
                if number:
                    place(opened, number, max_length - taken * length, taken, (length,) * taken)
                    opened += number
    order = sorted(groups)
    return base.AlgorithmResult([groups[key][3] for key in order],
                                np.array([groups[key][0] for key in order], dtype=np.int64))


def packs(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *,
          best_fit: bool) -> dict[tuple[int, ...], int]:
    """`fit_decreasing` as packs (lengths, longest first) -> how many."""
    result = fit_decreasing(histogram, max_length, max_sequences_per_pack, best_fit=best_fit)
    plan: dict[tuple[int, ...], int] = {}
    for strategy, count in zip(result.strategies, result.counts.tolist()):
        plan[strategy] = plan.get(strategy, 0) + count
    return plan
