"""Settling a fill: its least-filled packs dissolved, their pairs moved into the others' room.

The dot-product fill (`_dot`) leaves, where both rows bind (1e6 balanced
pairs at K=16), 0.9-1.0% more packs than the bound, its waste spread about 1%
a pack. Placing the pairs of the least-filled packs into the free room of the
others alone saves nothing: that room, 1% a pack, is smaller than the pairs.
What saves packs is moving a larger pair into a room where a smaller one
leaves: the smaller goes back to the pairs to place, the room left shrinks.

The pass (compiled: `tfpack/packing/_kernels.c`, ``settle``): the `_SHARE`
of packs of least ``e * Ld + d * Le`` (summed over their pairs) are emptied.
Their pairs, largest ``e * Ld + d * Le`` first, each go to the tightest place
that holds them, the least ``re' * Ld + rd' * Le`` among: a pack's own room
``(re, rd)`` (where it has a place), or a pair ``q``'s *slot*, its pack's room
with ``q`` taken out, where ``q`` is smaller (``q`` then joins the pairs to
place, so each move leaves the pairs to place smaller). A pair that finds no
place stays out; the search looks at 256 cells of a 2-D table of slots at
most (the kernel's ``LOOKED``), so the pass runs in 0.1-0.2 s CPU on
1e6 pairs. The pairs left out are then filled by `_dot` into new packs, and
the result is kept only where it has fewer packs than the fill.

1e6 balanced pairs, K=16 (module notes of the benchmark's results, Round
pair43): 0.13-0.17% fewer packs. Dissolving 4% / 5% / 7% of packs saved 381
/ 586 / 473 packs (512/128; the kernel looking at 512 cells a query): 5%.

>>> import numpy as np
>>> from tfpack.packing.pairs._first_fit import Placed
>>> # Le = Ld = 10, K = 3: packs {(6, 6), (2, 2)}, {(3, 3)} (dissolved), {(8, 8)}. (3, 3) fits no
>>> # room (2, 2); it takes the place of (2, 2) (slot (4, 4)), which goes into the room of (8, 8).
>>> placed = Placed(np.array([0, 0, 1, 2]), np.array([6, 2, 3, 8]), np.array([6, 2, 3, 8]), 3)
>>> after = settle(placed, (10, 10, 3), share=0.34)
>>> after.packs, sorted(zip(after.pack.tolist(), after.a.tolist()))
(2, [(0, 3), (0, 6), (1, 2), (1, 8)])
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.compiled import kernels
from tfpack.packing.pairs._dot import dot_fill
from tfpack.packing.pairs._first_fit import Placed

__all__ = ["settle", "settled_fill"]

# The share of the fill's packs dissolved (module notes).
_SHARE = 0.05
# Moves (pairs placed, each maybe pushing one out) at most, per pair: a bound on CPU the table's
# look-ups keep far from binding (1e6 balanced pairs: under 0.04 a pair).
_MOVES = 0.1


def settle(placed: Placed, limits, share: float = _SHARE) -> Placed:
    """``placed`` with its ``share`` of least-filled packs dissolved and re-placed (module notes).

    ``placed`` itself where that leaves as many packs or more.
    """
    max_input, max_target, depth = limits
    dissolve = int(share * placed.packs)
    if dissolve < 1 or len(placed.pack) == 0:
        return placed
    pack = np.frombuffer(kernels.settle(
        np.ascontiguousarray(placed.pack, dtype=np.int64).tobytes(),
        np.ascontiguousarray(placed.a, dtype=np.int64).tobytes(),
        np.ascontiguousarray(placed.b, dtype=np.int64).tobytes(), placed.packs, max_input, max_target,
        -1 if depth is None else depth, dissolve, int(_MOVES * len(placed.pack)) + 64), dtype=np.int64)
    out = pack < 0
    live = np.bincount(pack[~out], minlength=placed.packs) > 0
    kept, pack_in = int(live.sum()), (np.cumsum(live) - 1)[pack[~out]]
    counts = np.zeros((max_input, max_target), dtype=np.int64)
    np.add.at(counts, (placed.a[out] - 1, placed.b[out] - 1), 1)
    refill = dot_fill(counts, limits)[0] if out.any() else Placed(*(np.zeros(0, np.int64),) * 3, 0)
    if refill is None or kept + refill.packs >= placed.packs:
        return placed
    pack = np.concatenate([pack_in, refill.pack + kept])
    a = np.concatenate([placed.a[~out], refill.a])
    b = np.concatenate([placed.b[~out], refill.b])
    order = np.argsort(pack, kind="stable")
    return Placed(pack[order], a[order], b[order], kept + refill.packs)


def settled_fill(counts: np.ndarray, limits, time_limit: float | None = None, beat=None) -> tuple[Placed | None, None]:
    """`_dot.dot_fill`, then `settle`; no bound (``beat``: unused, as `optimal` passes it to every candidate).

    >>> counts = np.zeros((10, 10), dtype=np.int64)
    >>> counts[5, 5] = counts[1, 1] = counts[2, 2] = counts[7, 7] = 1  # as `settle`'s example
    >>> settled_fill(counts, (10, 10, 3))[0].packs
    2
    """
    placed, _ = dot_fill(counts, limits, time_limit)
    return (None if placed is None else settle(placed, limits)), None
