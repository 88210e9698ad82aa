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
place stays out. The pairs left out are then filled by `_dot` into new packs,
and the result is kept only where it has fewer packs than before. Most of the
pairs of the packs dissolved end out (1e6 balanced pairs at 1024/256, 10%
dissolved: 92,333 pairs out, 23,863 packs refilled of 24,470 emptied): the pass
packs the kept packs tighter with larger pairs and leaves the small ones,
which the fill packs well, to new packs.

`settled_fill` runs the pass at `_SHARES` in turn (10%, 5%, 10%, 5%): each
pass finds the packs the one before left least filled (its refill's among
them). 1e6 balanced pairs at K=16, 512/128 / 1024/256 / 2048/512 (seed 0),
above the bound after each pass: the fill 0.88 / 0.90 / 0.97%; 0.66 / 0.65
/ 0.73%; 0.52 / 0.48 / 0.50%; 0.38 / 0.40 / 0.48%; 0.37 / 0.34 / 0.43%
(one pass at 5%, pair43's: 0.70 / 0.76 / 0.83%; 5% a pass throughout: 0.57 /
0.63 / 0.73% after two).

The search for the tightest place (the kernel's ``tightest``) walks a 2-D
table of slots by rows from the pair's ``(e, d)`` and stops at 256 cells (the
kernel's ``LOOKED``). A slot whose pair is not smaller than the pair placed
is dropped from the table for good when the search passes it: the pairs are
placed largest first and a pair pushed out is smaller than the one that
pushed it, so the sizes placed never grow and that slot can hold none of
them again (reslotting a pack lists only the slots of pairs smaller than the
last one placed). The search then looks only at slots it can take: 1e6
balanced pairs at 512/128, 5% dissolved, 246,269 packs in 0.09 s CPU, where
it walked the larger pairs' slots at every search and gave 246,488 in 0.16 s
(256 cells), 246,314 in 0.25 s (512) and 246,292 in 0.65 s (1024). Full packs
(about 70% of them there) neither take nor give a pair: only the others'
pairs go to the kernel.

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
from tfpack.packing.pairs._packs import counts_of

__all__ = ["settle", "settled", "settled_fill"]

# The share of the packs dissolved by one pass, `settle`'s default (module notes).
_SHARE = 0.05
# The shares of `settled_fill`'s passes, in turn (module notes).
_SHARES = (0.1, 0.05, 0.1, 0.05)
# Moves (pairs placed, each maybe pushing one out) at most, per pair: a bound on CPU the table's
# look-ups keep far from binding (1e6 balanced pairs: under 0.04 a pair).
_MOVES = 0.1


def settle(placed: Placed, limits, share: float = _SHARE) -> Placed:
    """``placed`` with its ``share`` of least-filled packs dissolved and re-placed (module notes).

    ``placed`` itself where that leaves as many packs or more.
    """
    after = _pass(placed, limits, share)
    return placed if after is None else _by_pack(after)


def _pass(placed: Placed, limits, share: float) -> Placed | None:
    """One pass of `settle`, its pairs in no order; None where it leaves as many packs or more.

    Only the pairs of packs with room go to the kernel: a full pack takes no pair and gives none
    (its pairs fill their slots; the least-filled packs dissolved are never full but where all are).
    """
    max_input, max_target, depth = limits
    dissolve = int(share * placed.packs)
    if dissolve < 1 or len(placed.pack) == 0:
        return None
    room = (np.bincount(placed.pack, placed.a, placed.packs) < max_input) | (
        np.bincount(placed.pack, placed.b, placed.packs) < max_target)
    if int(room.sum()) <= dissolve:
        room[:] = True
    moving = room[placed.pack]
    ids = np.flatnonzero(room)
    local = np.cumsum(room) - 1
    pack_m, a_m, b_m = local[placed.pack[moving]], placed.a[moving], placed.b[moving]
    pack = np.frombuffer(kernels.settle(
        pack_m.tobytes(), np.ascontiguousarray(a_m, dtype=np.int64).tobytes(),
        np.ascontiguousarray(b_m, dtype=np.int64).tobytes(), ids.size, max_input, max_target,
        -1 if depth is None else depth, dissolve, int(_MOVES * len(placed.pack)) + 64), dtype=np.int64)
    out = pack < 0
    live = np.bincount(pack[~out], minlength=ids.size) > 0
    kept = int(live.sum()) + placed.packs - ids.size
    if kept >= placed.packs and out.any():
        return None  # the refill would add a pack at least
    # Packs renumbered: the full ones, then the kept ones, then the refill's.
    full = ~room
    number = np.zeros(placed.packs, dtype=np.int64)
    number[full] = np.arange(int(full.sum()))
    counts = counts_of(a_m[out], b_m[out], (max_input, max_target))
    refill = dot_fill(counts, limits)[0] if out.any() else Placed(*(np.zeros(0, np.int64),) * 3, 0)
    if refill is None or kept + refill.packs >= placed.packs:
        return None
    pack_in = int(full.sum()) + (np.cumsum(live) - 1)[pack[~out]]
    return Placed(np.concatenate([number[placed.pack[~moving]], pack_in, refill.pack + kept]),
                  np.concatenate([placed.a[~moving], a_m[~out], refill.a]),
                  np.concatenate([placed.b[~moving], b_m[~out], refill.b]), kept + refill.packs)


def _by_pack(placed: Placed) -> Placed:
    order = np.argsort(placed.pack, kind="stable")
    return Placed(placed.pack[order], placed.a[order], placed.b[order], placed.packs)


def settled_fill(counts: np.ndarray, limits, time_limit: float | None = None, beat=None) -> tuple[Placed | None, None]:
    """`_dot.dot_fill`, then the passes of `settle` at `_SHARES`; no bound (``beat``: unused, as
    `optimal` passes it to every candidate).

    >>> counts = np.zeros((10, 10), dtype=np.int64)
    >>> counts[5, 5] = counts[1, 1] = counts[2, 2] = counts[7, 7] = 1  # as `settle`'s example
    >>> settled_fill(counts, (10, 10, 3))[0].packs
    2
    """
    placed, _ = dot_fill(counts, limits, time_limit)
    return (None if placed is None else settled(placed, limits)), None


def settled(placed: Placed, limits) -> Placed:
    """``placed`` after the passes of `settle` at `_SHARES` (``placed`` itself where none drops a pack).

    >>> # `settle`'s example and 7 full packs {(10, 10)}: 10% of 10 packs, {(3, 3)}, dissolved first.
    >>> lengths = np.array([6, 2, 3, 8] + [10] * 7)
    >>> settled(Placed(np.array([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), lengths, lengths, 10), (10, 10, 3)).packs
    9
    """
    after = placed
    for share in _SHARES:
        after = _pass(after, limits, share) or after
    return placed if after is placed else _by_pack(after)
