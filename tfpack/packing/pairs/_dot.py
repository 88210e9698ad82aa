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
Ld``: 1.34-1.70%). Where places bind (K=4) it fills places with the largest
pairs and loses (295,525 packs on 1e6 balanced pairs at 512/128 where the
grid's plan has 259,732).

Compiled (`tfpack/packing/_kernels.c`, ``dot_fill``): a row table gives, per
input length, the longest target left within the room, and a scan of inputs
from the longest down stops where no shorter input can beat the best; a pack
whose picks the histogram can repeat is repeated at once.

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 2] = 2; counts[3, 1] = 1  # (6, 1) x2, (2, 3) x2, (4, 2); Le=8, Ld=4
>>> placed, _ = dot_fill(counts, (8, 4, None))
>>> placed.packs, placed.pack.tolist(), placed.a.tolist(), placed.b.tolist()
(3, [0, 0, 1, 1, 2], [6, 2, 6, 2, 4], [1, 3, 1, 3, 2])
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.compiled import kernels
from tfpack.packing.pairs._first_fit import Placed

__all__ = ["dot_fill"]


def dot_fill(counts: np.ndarray, limits, time_limit: float | None = None) -> tuple[Placed, None]:
    """Pairs placed by the dot-product fill (module notes); no bound. ``limits``: (Le, Ld, K or None)."""
    max_input, max_target, depth = limits
    flat = np.ascontiguousarray(counts, dtype=np.int64)
    pack, a, b, packs = kernels.dot_fill(flat.tobytes(), max_input, max_target, -1 if depth is None else depth)
    return Placed(*(np.frombuffer(x, dtype=np.int64) for x in (pack, a, b)), packs), None
