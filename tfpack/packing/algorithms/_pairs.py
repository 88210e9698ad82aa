"""Packs of at most two sequences, planned exactly: the fewest packs, and so a bound.

With ``max_sequences_per_pack=2`` packing is a matching problem, and a greedy
solves it (Lemma, as for "boats to save people"): take the longest sequence
``x`` left; if the shortest ``s`` left fits beside it (``x + s <= L``), pair
them, else ``x`` goes alone (nothing fits beside it). Pairing with ``s`` is
safe: in a plan where ``x`` is with ``y`` and ``s`` with ``z`` (or alone),
``(x, s)`` and ``(y, z)`` are packs too, as ``y + z <= y + x <= L``; where
``x`` is alone, moving ``s`` beside it uses no more packs. So the greedy's
plan has the fewest packs there are, and its count is a lower bound for any
plan (`optimal` reports it as the ``"pairs"`` bound). On counts it takes
O(distinct lengths)::

    lengths 6, 6, 5, 3, 2 in packs of 8: (6, 2), (6,) alone (the 3 does not fit),
    (5, 3): 3 packs (tokens say 3; best fit decreasing makes 3 too)

where the local lengths bind far more than tokens or sequences (spikes at
L=8,192, depth 2: 14,307,799 packs, the bounds 12,096,392) no LP is needed.
"""

from __future__ import annotations

import numpy as np


def pairs(histogram: np.ndarray, max_length: int) -> dict[tuple[int, ...], int]:
    """The fewest packs of at most two sequences (module notes): packs -> how many.

    >>> h = np.zeros(8, dtype=np.int64); h[[5, 4, 2, 1]] = [2, 1, 1, 1]
    >>> pairs(h, 8)
    {(6, 2): 1, (6,): 1, (5, 3): 1}
    """
    count = [int(c) for c in histogram]
    plan: dict[tuple[int, ...], int] = {}

    def add(pack: tuple[int, ...], number: int) -> None:
        if number:
            plan[pack] = plan.get(pack, 0) + number

    low, high = 1, max_length
    while True:
        while high >= 1 and not count[high - 1]:
            high -= 1
        while low <= max_length and not count[low - 1]:
            low += 1
        if high < 1 or low > high:
            return plan
        if low == high:  # one length left: two a pack where two fit
            n = count[high - 1]
            if 2 * high <= max_length:
                add((high, high), n // 2)
                add((high,), n % 2)
            else:
                add((high,), n)
            count[high - 1] = 0
        elif low + high <= max_length:  # the longest with the shortest, as many as both have
            n = min(count[low - 1], count[high - 1])
            add((high, low), n)
            count[low - 1] -= n
            count[high - 1] -= n
        else:  # nothing fits beside the longest
            add((high,), count[high - 1])
            count[high - 1] = 0
