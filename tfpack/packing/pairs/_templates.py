"""The ``optimal`` pair planner's main step: plan one length, then fit the other into it.

Packs planned for the input lengths alone (the one-length ``optimal``, with
its LP bound) are templates: each has slots of input lengths. Pairs of input
length ``a`` then take the slots of length ``a``, the longest targets first
into the packs with the least target tokens so far (longest processing time
first, one vectorized sort per length and slot rank), so that target tokens
spread evenly over the packs::

    templates (inputs, Le=8): [5, 3] x 2;  pairs (5, 4), (5, 1), (3, 3), (3, 2)
    length 5: targets 4, 1 -> packs 0, 1 (loads 4, 1)
    length 3: targets 3, 2 -> packs 1, 0 (loads 4, 6)

A pack whose targets overflow ``Ld`` gives back the pair with the fewest
target tokens that is enough (else its longest, and again); the pairs given
back go by first fit decreasing into the room left in all packs, then into new
packs. The same runs with the roles of inputs and targets swapped (`swapped`).

>>> import numpy as np
>>> counts = np.zeros((8, 8), dtype=np.int64)
>>> counts[4, [3, 0]] = 1; counts[2, [2, 1]] = 1
>>> placed, bound = fill(counts, (8, 8, None), time_limit=None)
>>> placed.packs, bound
(2, 2)
"""

from __future__ import annotations

import math

import numpy as np

from tfpack.packing.compiled import kernels
from tfpack.packing.pairs._first_fit import Placed, refit


def fill(counts: np.ndarray, limits, time_limit: float | None, depth="limit",
         beat: int | None = None) -> tuple[Placed | None, int | None]:
    """Pairs placed from input-length templates, and the one-length bound (module notes).

    ``depth``: the most pairs a template holds (by default the limit's); the
    bound is returned for templates at the limit only (None otherwise).
    No plan (None) where it would have ``beat`` packs or more for sure
    (`_first_fit.floor`): the repair is spared.
    """
    from tfpack.packing.plans import plan  # noqa: PLC0415  (plans imports this package)

    max_input, max_target, limit = limits
    depth = limit if depth == "limit" else depth
    templates = plan(counts.sum(axis=1), max_input, depth, "optimal", time_limit=time_limit)
    slot_pack, slot_length = _slots(templates.strategies, templates.counts)
    pack, a, b = _assign(counts, slot_pack, slot_length)
    packs = int(templates.counts.sum())
    keep = _fitting(pack, b, max_target, packs)
    placed = refit(Placed(pack, a, b, packs), keep, limits, counts.shape, beat)
    bound = templates.metrics["lower_bound_packs"]
    if depth != limit:
        return placed, None
    return placed, math.ceil(bound - 1e-6 * max(1.0, bound))


def swapped(counts: np.ndarray, limits, time_limit: float | None, depth="limit",
            beat: int | None = None) -> tuple[Placed | None, int | None]:
    """`fill` with target-length templates: the roles of inputs and targets swapped."""
    placed, bound = fill(counts.T, (limits[1], limits[0], limits[2]), time_limit, depth, beat)
    return (None if placed is None else Placed(placed.pack, placed.b, placed.a, placed.packs)), bound


def _slots(strategies, counts) -> tuple[np.ndarray, np.ndarray]:
    """One row per slot of the plan: its pack (ids by strategy) and its length."""
    packs, lengths, first = [], [], 0
    for strategy, count in zip(strategies, counts.tolist()):
        depth = len(strategy)
        packs.append(np.repeat(np.arange(first, first + count), depth))
        lengths.append(np.tile(np.asarray(strategy, dtype=np.int64), count))
        first += count
    return np.concatenate(packs), np.concatenate(lengths)


def _assign(counts: np.ndarray, slot_pack: np.ndarray, slot_length: np.ndarray):
    """Pairs into slots of their input length, longest targets to the least loaded packs.

    Input lengths of the larger mean target first; each length's targets,
    longest first, rank by rank (a pack's first slot of that length, its
    second, ...) to the packs of least target load so far (ties: the lower
    id). Compiled (``template_assign`` in `tfpack/packing/_kernels.c`; in
    numpy, a loop over lengths and ranks, 0.07-0.13 s on 1e6 pairs).
    """
    widths = np.arange(1, counts.shape[1] + 1)
    mean = (counts @ widths) / np.maximum(counts.sum(axis=1), 1)
    order = np.argsort(-mean, kind="stable")
    out = kernels.template_assign(*(np.ascontiguousarray(x, dtype=np.int64)  # buffers, not copied
                                    for x in (slot_pack, slot_length, counts, order)), int(slot_pack[-1]) + 1)
    return tuple(np.frombuffer(x, dtype=np.int64) for x in out)


def _fitting(pack: np.ndarray, b: np.ndarray, max_target: int, packs: int) -> np.ndarray:
    """Which pairs stay: an overflowing pack gives back its smallest sufficient target (module notes).

    Compiled (``template_fit`` in `tfpack/packing/_kernels.c`): a pack at a
    time (in numpy, rounds over all pairs: 0.04-0.06 s on 1e6 pairs).
    """
    keep = kernels.template_fit(np.ascontiguousarray(pack, dtype=np.int64), np.ascontiguousarray(b, dtype=np.int64),
                                max_target, packs)
    return np.frombuffer(keep, dtype=bool).copy()
