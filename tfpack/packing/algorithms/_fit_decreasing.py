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
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import base


def fit_decreasing(
    histogram: np.ndarray, max_length: int, max_depth: int | None, *, best_fit: bool
) -> base.AlgorithmResult:
    """Pack ``histogram`` as per-sequence FFD (or BFD with ``best_fit``) would."""
    depth = max_length if max_depth is None else max_depth
    present = np.flatnonzero(histogram)
    shortest = int(present[0]) + 1 if present.size else 1
    open_groups: list[tuple[int, int, tuple[int, ...]]] = []  # (packs, free space, lengths), opening order
    closed: list[tuple[int, tuple[int, ...]]] = []

    def keep(groups: list, count: int, space: int, pack: tuple[int, ...]) -> None:
        if count <= 0:
            return
        # No later (shorter or equal) sequence fits: the pack is final.
        if space < shortest or len(pack) >= depth:
            closed.append((count, pack))
        else:
            groups.append((count, space, pack))

    for length in range(max_length, 0, -1):
        left = int(histogram[length - 1])
        if left == 0:
            continue
        fits = [i for i, (_, space, pack) in enumerate(open_groups) if space >= length and len(pack) < depth]
        if best_fit:
            fits.sort(key=lambda i: open_groups[i][1])  # stable: ties keep opening order
        taken: dict[int, int] = {}
        for i in fits:
            if left == 0:
                break
            count, space, pack = open_groups[i]
            per_pack = min(space // length, depth - len(pack))
            taken[i] = min(left, count * per_pack)
            left -= taken[i]
        groups: list[tuple[int, int, tuple[int, ...]]] = []
        for i, (count, space, pack) in enumerate(open_groups):
            if i not in taken:
                groups.append((count, space, pack))
                continue
            per_pack = min(space // length, depth - len(pack))
            full, rest = divmod(taken[i], per_pack)
            keep(groups, full, space - per_pack * length, pack + (length,) * per_pack)
            keep(groups, int(rest > 0), space - rest * length, pack + (length,) * rest)
            keep(groups, count - full - int(rest > 0), space, pack)
        if left:
            per_pack = min(max_length // length, depth)
            full, rest = divmod(left, per_pack)
            keep(groups, full, max_length - per_pack * length, (length,) * per_pack)
            keep(groups, int(rest > 0), max_length - rest * length, (length,) * rest)
        open_groups = groups
    packs = closed + [(count, pack) for count, _, pack in open_groups]
    return base.AlgorithmResult(
        [pack for _, pack in packs], np.array([count for count, _ in packs], dtype=np.int64)
    )
