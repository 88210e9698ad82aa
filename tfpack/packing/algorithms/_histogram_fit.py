"""Histogram packing with worst or best fit: the engine of ``spfhp`` and ``lpfhp``.

The histogram is walked from the longest length to the shortest. Open packs
are kept in groups of identical packs, keyed by their free space; all
sequences of one length go, a group at a time, to the open packs with the
most free space (worst fit: shortest pack first, SPFHP) or the least free
space that still fits (best fit: longest pack first, LPFHP), splitting a
group when fewer sequences than packs remain. Among groups with equal space
the most recently opened is taken first (as the paper's code does). What fits
nowhere opens new packs. A pack closes when full or at ``max_sequences_per_pack``.

With ``split_counts`` (LPFHP, the paper's appendix R) a group of sequences
may go several at a time into each pack, e.g. two 256s into one 512-pack,
instead of one per pack.

The loop runs over at most ``max_length`` lengths and O(``max_length``)
groups: O(n + L^2) for n sequences, independent of n after the histogram.
"""

from __future__ import annotations

import bisect

import numpy as np

from tfpack.packing.algorithms import base


def histogram_fit(
    histogram: np.ndarray,
    max_length: int,
    max_sequences_per_pack: int | None,
    *,
    best_fit: bool,
    split_counts: bool,
) -> base.AlgorithmResult:
    """Pack ``histogram``; see the module docstring for the rule."""
    depth = max_length if max_sequences_per_pack is None else max_sequences_per_pack
    groups: dict[int, list[tuple[int, tuple[int, ...]]]] = {}  # free space -> [(count, pack)]
    spaces: list[int] = []  # free spaces with open groups, sorted
    closed: list[tuple[int, tuple[int, ...]]] = []

    def add(pack: tuple[int, ...], count: int) -> None:
        if count <= 0:
            return
        space = max_length - sum(pack)
        if space == 0 or len(pack) >= depth:
            closed.append((count, pack))
            return
        if space not in groups:
            groups[space] = []
            bisect.insort(spaces, space)
        groups[space].append((count, pack))

    for length in range(max_length, 0, -1):
        left = int(histogram[length - 1])
        while left > 0:
            at = bisect.bisect_left(spaces, length)
            if at == len(spaces):  # fits nowhere: new packs
                repeat = min(max_length // length, depth, left) if split_counts else 1
                add((length,) * repeat, left // repeat)
                left -= left // repeat * repeat
                continue
            space = spaces[at] if best_fit else spaces[-1]
            count, pack = groups[space].pop()
            if not groups[space]:
                del groups[space]
                spaces.remove(space)
            repeat = min(space // length, depth - len(pack), left) if split_counts else 1
            used = min(count, left // repeat)
            add(pack, count - used)
            add(pack + (length,) * repeat, used)
            left -= used * repeat
    packs = closed + [item for group in groups.values() for item in group]
    return base.AlgorithmResult(
        [pack for _, pack in packs], np.array([count for count, _ in packs], dtype=np.int64)
    )
