"""Templates on a blend of both lengths, for plans where inputs and targets both bind.

When a pack must fill its encoder and its decoder row at once (T5's span
corruption sizes Le=512, Ld=114 so that both bind), templates on one side
leave the other side's load to chance. Here a pair's size is one number,
``s = ceil(S * (a / Le + b / Ld) / 2)``, and the one-length ``optimal`` plans
packs of at most ``S``: a pack's inputs and targets then fill its two rows
``a / Le + b / Ld <= 2`` together. Pairs of one size take its slots, the most
input-heavy first into the packs that hold the most targets relative to
inputs so far, so that each pack fills both rows alike; the packs that still
overflow one row give back pairs, which first fit places (`_first_fit`).

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 2] = 2  # (6, 1) and (2, 3) fill (8, 4) together
>>> placed, _ = blend(counts, (8, 4, None), time_limit=None)
>>> placed.packs
2
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.pairs._first_fit import Placed, refit
from tfpack.packing.pairs._packs import cells

SCALE = 2048  # S: the blend's resolution; rounding up costs at most depth / S of a pack


def blend(counts: np.ndarray, limits, time_limit: float | None, beat: int | None = None) -> tuple[Placed | None, None]:
    """Pairs placed from blended-size templates (module notes); no bound; None where it would
    have ``beat`` packs or more for sure (`_first_fit.floor`)."""
    from tfpack.packing.plans import plan  # noqa: PLC0415  (plans imports this package)
    from tfpack.packing.pairs._templates import _slots  # noqa: PLC0415

    max_input, max_target, depth = limits
    a, b, n = cells(counts)
    size = np.ceil(SCALE * (a / max_input + b / max_target) / 2 - 1e-9).astype(np.int64)
    histogram = np.bincount(size, n, SCALE + 1)[1:].astype(np.int64)
    templates = plan(histogram, SCALE, depth, "optimal", time_limit=time_limit)
    slot_pack, slot_size = _slots(templates.strategies, templates.counts)
    packs = int(templates.counts.sum())
    pack, pa, pb = _assign(a, b, n, size, slot_pack, slot_size, limits, packs)
    keep = _fitting(pack, pa, pb, limits, packs)
    return refit(Placed(pack, pa, pb, packs), keep, limits, counts.shape, beat), None


def _assign(a, b, n, size, slot_pack, slot_size, limits, packs):
    """Pairs into slots of their size (1, 2, ...): input-heavy pairs to the target-heavy packs first."""
    max_input, max_target, _ = limits
    top = int(max(size.max(initial=0), slot_size.max(initial=0)))  # `_rounding`: past SCALE classes
    lean = a / max_input - b / max_target  # > 0: input-heavy
    order = np.lexsort((-lean, -size))
    pair_a, pair_b = np.repeat(a[order], n[order]), np.repeat(b[order], n[order])
    pair_size = np.repeat(size[order], n[order])
    slots = np.lexsort((slot_pack, -slot_size))
    slot_pack, slot_size = slot_pack[slots], slot_size[slots]
    load = np.zeros((2, packs))
    out = np.empty(pair_a.size, dtype=np.int64)
    # Sizes largest first; within a size, slots one rank at a time (a pack's first slot of it, ...).
    pair_bounds = np.searchsorted(-pair_size, -np.arange(top, -1, -1), side="left")
    slot_bounds = np.searchsorted(-slot_size, -np.arange(top, -1, -1), side="left")
    for s in range(top):
        lo, hi = pair_bounds[s], pair_bounds[s + 1]
        if lo == hi:
            continue
        these = slot_pack[slot_bounds[s]:slot_bounds[s + 1]]
        start = np.ones(these.size, dtype=bool)
        start[1:] = these[1:] != these[:-1]
        rank = np.arange(these.size) - np.maximum.accumulate(np.where(start, np.arange(these.size), 0))
        done = lo
        for r in range(int(rank.max()) + 1):
            if done == hi:
                break
            ranked = these[rank == r]
            key = load[0, ranked] / max_input - load[1, ranked] / max_target
            ranked = ranked[np.argsort(key, kind="stable")][:hi - done]
            out[done:done + ranked.size] = ranked
            load[0, ranked] += pair_a[done:done + ranked.size]
            load[1, ranked] += pair_b[done:done + ranked.size]
            done += ranked.size
    return out, pair_a, pair_b


def _fitting(pack, a, b, limits, packs) -> np.ndarray:
    """Which pairs stay: an overflowing pack gives back its largest pair on the rows it overflows."""
    max_input, max_target, _ = limits
    keep = np.ones(pack.size, dtype=bool)
    while True:
        over_e = np.bincount(pack[keep], a[keep], packs) > max_input
        over_d = np.bincount(pack[keep], b[keep], packs) > max_target
        rows = np.flatnonzero(keep & (over_e[pack] | over_d[pack]))
        if not rows.size:
            return keep
        score = over_e[pack[rows]] * a[rows] / max_input + over_d[pack[rows]] * b[rows] / max_target
        rows = rows[np.lexsort((score, pack[rows]))]
        last = np.ones(rows.size, dtype=bool)
        last[:-1] = pack[rows[1:]] != pack[rows[:-1]]
        keep[rows[last]] = False
