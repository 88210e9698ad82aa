"""Packs filled by subset sums, for small plans where one row binds and nearly every pack must be full.

Debian package descriptions and synopses (694 pairs at 512/128, K=16) need
114 packs by their input tokens, which leave 113 tokens spare: a plan of 114
fills every pack to about a token. Templates, compounds and settling leave
115 there, and an ejection search found no 114 in 170 s (the benchmark's
results, Round pairgap44). Filling one pack at a time to the most tokens a
subset of the pairs left can reach finds it at once:

Each pack takes the pair left that is longest on the binding row (the row
whose tokens need more packs), then the subset of the other pairs left whose
lengths on that row sum the most within its room, among those whose other
row and count fit too: the sums reachable are found by a subset-sum table
over the pairs left in an order shuffled with ``seed`` (each sum keeps the
pair that reached it first, so a sum's subset is read back from the table),
the largest sum first, the next where its subset breaks the other row or the
places. A pack costs one pass of the table per pair left: O(n * L) for n
pairs at limit L, so `subset_fill` runs on up to `_MOST_PAIRS` pairs (694
Debian pairs at 512/128, K=16: 114 packs on a bound of 114 in 0.1 s CPU an
order, in 7 of 10 orders; at 1024/256 58 on 58 in 7 of 10).

>>> counts = np.zeros((10, 4), dtype=np.int64)
>>> counts[5, 0] = counts[3, 0] = counts[6, 1] = counts[2, 1] = 1  # (6, 1), (4, 1), (7, 2), (3, 2)
>>> placed = subset_fill(counts, (10, 4, None), seed=0)  # (7, 2) takes (3, 2); (6, 1) takes (4, 1)
>>> placed.packs, sorted(zip(placed.pack.tolist(), placed.a.tolist()))
(2, [(0, 3), (0, 7), (1, 4), (1, 6)])
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._packs import pairs_of

__all__ = ["subset_fill"]

# Pairs at most: a pack costs a pass of a subset-sum table per pair left (0.1 s on 694 pairs).
_MOST_PAIRS = 1_000
# Orders tried at most (Debian at 512/128, K=16: 114 packs in 7 of 10 orders, 115 in the others).
_ATTEMPTS = 3


def subset_fill(counts: np.ndarray, limits, *, seed: int, floor: int = 0) -> Placed | None:
    """Packs filled one at a time to the most tokens of the binding row (module notes), the fewest
    of `_ATTEMPTS` orders (drawn from ``seed``), stopping at ``floor`` packs; None past
    `_MOST_PAIRS` pairs."""
    max_input, max_target, depth = limits
    a, b = pairs_of(counts)
    if a.size > _MOST_PAIRS or a.size == 0:
        return None
    pack = None
    for attempt in range(_ATTEMPTS):
        rng = np.random.default_rng([seed, attempt])
        if int(b.sum()) * max_input > int(a.sum()) * max_target:  # the targets bind: fill by them
            tried = _filled(b, a, (max_target, max_input, depth), rng)
        else:
            tried = _filled(a, b, limits, rng)
        pack = tried if pack is None or tried.max() < pack.max() else pack
        if pack.max() + 1 <= floor:
            break
    order = np.argsort(pack, kind="stable")
    return Placed(pack[order], a[order], b[order], int(pack.max()) + 1)


def _filled(a: np.ndarray, b: np.ndarray, limits, rng: np.random.Generator) -> np.ndarray:
    """The pack of each pair, packs filled by ``a`` (module notes)."""
    max_a, max_b, depth = limits
    places = a.size if depth is None else depth
    pack = np.full(a.size, -1, dtype=np.int64)
    left = np.argsort(-a, kind="stable")
    packs = 0
    while left.size:
        first, rest = left[0], rng.permutation(left[1:])
        chosen = _subset(a, b, rest, max_a - a[first], max_b - b[first], places - 1)
        pack[first] = pack[chosen] = packs
        packs += 1
        left = left[pack[left] < 0]
    return pack


def _subset(a, b, order, room_a, room_b, places) -> list[int]:
    """Pairs of ``order`` whose ``a`` sum the most within ``room_a`` with ``b`` within ``room_b`` and
    at most ``places`` of them, among the subsets the table keeps (module notes)."""
    first = np.full(room_a + 1, -1, dtype=np.int64)  # the pair that first reached each sum
    reached = np.zeros(room_a + 1, dtype=bool)
    reached[0] = True
    for i in order:
        x = int(a[i])
        if x > room_a:
            continue
        new = np.zeros_like(reached)
        new[x:] = reached[:room_a + 1 - x]
        first[new & ~reached] = i
        reached |= new
    for total in np.flatnonzero(reached)[::-1]:
        chosen, t = [], int(total)
        while t:
            chosen.append(int(first[t]))
            t -= int(a[first[t]])
        if len(chosen) <= places and int(b[chosen].sum()) <= room_b:
            return chosen
    return []
