"""The dot-product fill: packs one at a time, each pair the one most aligned with the room left.

A pack starts empty with room ``(re, rd) = (Le, Ld)``; while it has a place,
it takes, among the pairs left that fit the room, the one ``(e, d)`` with the
largest ``e * re / Le^2 + d * rd / Ld^2`` (the dot product of the pair and
the room, each row scaled by its limit), then the next pack. Large pairs go
first, and a pack that has used more of one row takes pairs heavy on the
other: where both rows bind (balanced lengths at 512/128, K=16, 1e5 pairs) it
leaves 0.94% above the bound where the templates leave 2.0%. Where places
bind (K=4) it fills places with the largest pairs and loses (29,394 packs
where the grid's plan has 25,976).

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
