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
(smallest last). That loop runs compiled (`tfpack.packing.compiled`,
``tfpack/packing/_kernels.c``; a pack's contents a chain of (length, copies)
links shared by the pieces of a split, made tuples at the end): the same
plans as the Python loop it replaced (tests/packing/fit_reference.py) on
the 30 generated cases of benchmarks/planners_suite.py, 6-11x less CPU
(benchmarks/results/planner_kernels.md; every length of L=65,536: 0.07 s
instead of 0.43-0.57 s). A group's opening order is the
index of its first pack among all packs opened: a split group's pieces start
at its first, first + full packs, and so on.
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import base
from tfpack.packing.compiled import kernels


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
    """Best fit decreasing on groups in buckets by free space (module notes), compiled."""
    strategies, counts = kernels.best_fit_decreasing(
        np.ascontiguousarray(histogram, dtype=np.int64), int(max_length), int(depth_limit))
    return base.AlgorithmResult(strategies, np.frombuffer(counts, dtype=np.int64).copy())


def packs(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *,
          best_fit: bool) -> dict[tuple[int, ...], int]:
    """`fit_decreasing` as packs (lengths, longest first) -> how many."""
    result = fit_decreasing(histogram, max_length, max_sequences_per_pack, best_fit=best_fit)
    plan: dict[tuple[int, ...], int] = {}
    for strategy, count in zip(result.strategies, result.counts.tolist()):
        plan[strategy] = plan.get(strategy, 0) + count
    return plan
