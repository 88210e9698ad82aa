"""The dot-product fill: packs one at a time, each pair the one most aligned with the room left.

A pack starts with the pair left of the largest share of a limit,
``max(e / Le, d / Ld)`` (ties: the larger ``e / Le + d / Ld``, then the
longer input), as first fit decreasing orders pairs; then, while it has a
place, it takes, among the pairs left that fit its room ``(re, rd)``, the one
``(e, d)`` with the largest ``e * re / Le^2 + d * rd / Ld^2`` (the dot
product of the pair and the room, each row scaled by its limit; ties: the
longer input, then target), then the next pack. A pack that has used more of
one row takes pairs heavy on the other: where both rows bind (1e6 balanced
pairs at K=16) it leaves 0.88-0.97% above the bound where compounds leave
2.9-3.7% (first picks by the dot product with the full room, ``e / Le + d /
Ld``: 1.34-1.70%).

Where places bind too, the largest pairs would take the places and leave
room no pair fills (1e6 balanced pairs at 512/128, K=4: 294,497 packs where
the grid's plan has 259,732). There each pick, with ``s > 1`` places left,
is *aimed*: the same rule within the room ``(re / s, rd / s)`` first, the
whole room only where no pair fits that: 257,813 packs on a bound of
257,026 (bimodal pairs: 261,454 on 261,215, the grid's plan 262,432).
Aimed picks win while a pack has places for fewer than `_AIMED` times the
pairs it must hold on average (balanced pairs, about 4.1 a pack: K=5 / 6 /
7 251,058 / 250,902 / 249,840 aimed, 268,119 / 256,268 / 250,864 not; K=8
248,936 aimed, 248,456 not).

Compiled (`tfpack/packing/_kernels.c`, ``dot_fill``): a row table gives, per
input length, the longest target left within the room, and a scan of inputs
from the longest down stops where no shorter input can beat the best; a pack
whose picks the histogram can repeat is repeated at once.

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 2] = 2; counts[3, 1] = 1  # (6, 1) x2, (2, 3) x2, (4, 2); Le=8, Ld=4
>>> placed, _ = dot_fill(counts, (8, 4, None), aimed=False)
>>> placed.packs, placed.pack.tolist(), placed.a.tolist(), placed.b.tolist()
(3, [0, 0, 1, 1, 2], [6, 2, 6, 2, 4], [1, 3, 1, 3, 2])
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.compiled import kernels
from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._packs import cells

__all__ = ["dot_fill"]

# Picks are aimed (module notes) where ``K`` is under this many times the pairs a pack must hold.
_AIMED = 1.85
# The fill's tables take 17 bytes a cell of ``counts`` (empty or not): past this many cells
# (some 570 MB) it plans nothing.
_MOST_CELLS = 2 ** 25


def dot_fill(counts: np.ndarray, limits, time_limit: float | None = None,
             aimed: bool | None = None) -> tuple[Placed | None, None]:
    """Pairs placed by the dot-product fill (module notes); no bound.

    ``limits``: (Le, Ld, K or None); ``aimed``: None chooses (`_aimed`).
    None where ``counts`` has over `_MOST_CELLS` cells.
    """
    max_input, max_target, depth = limits
    if counts.size > _MOST_CELLS:
        return None, None
    aimed = _aimed(counts, limits) if aimed is None else aimed
    flat = np.ascontiguousarray(counts, dtype=np.int64)
    pack, a, b, packs = kernels.dot_fill(flat.tobytes(), max_input, max_target,
                                         -1 if depth is None else depth, bool(aimed and depth is not None))
    return Placed(*(np.frombuffer(x, dtype=np.int64) for x in (pack, a, b)), packs), None


def _aimed(counts: np.ndarray, limits) -> bool:
    """Whether ``K`` is under `_AIMED` times the pairs a pack must hold (tokens' and places' packs).

    >>> counts = np.zeros((8, 4), dtype=np.int64); counts[3, 1] = 8  # eight (4, 2): 4 packs at K=2
    >>> _aimed(counts, (8, 4, 2)), _aimed(counts, (8, 4, 4)), _aimed(counts, (8, 4, None))
    (True, False, False)
    """
    max_input, max_target, depth = limits
    if depth is None:
        return False
    a, b, n = cells(counts)
    pairs = int(n.sum())
    packs = max(float(a @ n) / max_input, float(b @ n) / max_target, pairs / depth, 1.0)
    return depth < _AIMED * pairs / packs
