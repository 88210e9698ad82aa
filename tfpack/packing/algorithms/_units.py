"""Lengths in units of tokens, and bounds in finer units where the depth binds.

From L=12,288 (`Tuning.UNITS_FROM`) `_paths.grouped` plans and bounds on
lengths rounded to multiples of a unit of tokens, solved in those units
(`in_units`): pricing's table shrinks by the unit. Rounded down, a histogram in
units is a relaxation (every pack stays a pack), so its LP's bound bounds the
real problem (`rounded_down_lp`); where the depth binds, `finer_units` proves
it on finer units with the time the plan leaves.

>>> divisor(12288, 12), divisor(16384, 12)
(12, 8)
>>> finer_unit(12288, 12, took=0.1, left=0.5)  # 3: 4 x 0.1 x 1.2 = 0.48 s, it fits
3
>>> finer_unit(12288, 12, took=0.1, left=0.4)  # 4: 0.36 s
4
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import (_best_fit, _bounds, _budget, _column_generation, _groups,
                                       _lp_plan)
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["divisor", "in_units", "of_groups", "rounded_down_lp", "finer_units", "finer_unit"]


def divisor(max_length: int, most: int) -> int:
    """The largest divisor of ``max_length`` up to ``most`` (1 if none is larger)."""
    return max((d for d in range(1, max(1, most) + 1) if max_length % d == 0), default=1)


def in_units(rounded: np.ndarray, unit: int, *, up: bool) -> np.ndarray:
    """A histogram rounded to multiples of ``unit`` (`_groups.rounded`), in those units.

    Up, the lengths that are multiples of ``unit`` (``k unit`` -> ``k``), the others
    dropped: every length is one where rounded up, and where rounded down to one or
    to 1 (`_groups.present` with ``unit``, `_paths.prove_down`) dropping the 1s is a
    relaxation too (fewer sequences, each pack's lengths only shrink). Down, lengths are group
    starts ``k unit + 1``: in units, ``k`` (at most ``unit`` tokens less), and
    sequences shorter than a unit are dropped: fewer sequences need no more
    packs, so the bound stays valid.

    >>> in_units(np.array([0, 0, 0, 2, 0, 0, 0, 1]), 4, up=True).tolist()
    [2, 1]
    >>> in_units(np.array([1, 0, 0, 2, 0, 0, 0, 3]), 4, up=True).tolist()  # the 1 dropped
    [2, 3]
    >>> in_units(np.array([3, 0, 0, 0, 2, 0, 0, 0]), 4, up=False).tolist()
    [2, 0]
    """
    if up:
        return rounded[unit - 1:: unit].copy()
    scaled = rounded[unit:: unit].copy()  # lengths unit + 1, 2 unit + 1, ...: k = 1, 2, ...
    return np.concatenate([scaled, np.zeros(len(rounded) // unit - len(scaled), dtype=np.int64)])


def of_groups(histogram: np.ndarray, rows: int) -> int:
    """The unit of ``rows`` groups over the lengths present (`_groups.present`) rounded down:
    from L=12,288 (`Tuning.UNITS_FROM`), the largest divisor of L up to their width over
    `Tuning.PROVE_UNIT` and up to `Tuning.PROVE_UNIT_MOST`; 1 below.

    >>> h = np.zeros(16384, dtype=np.int64); h[[999, 5999, 16383]] = 1
    >>> of_groups(h, 256), of_groups(h, 4096), of_groups(h[:8192], 256)  # widths 60, 3; L=8,192
    (2, 1, 1)
    """
    max_length = len(histogram)
    if max_length < Tuning.UNITS_FROM:
        return 1
    present = np.flatnonzero(histogram)
    width = (int(present[-1]) - int(present[0]) + 1) // rows
    return divisor(max_length, min(Tuning.PROVE_UNIT_MOST, width // Tuning.PROVE_UNIT))


def rounded_down_lp(search, rounded, max_sequences_per_pack, more_seeds, first, budget):
    """The LP on ``rounded`` (lengths rounded down: a relaxation, so its bound bounds the
    real problem), proven in ``search`` (`_paths.Search`); None where ``budget`` ran out
    before a bound.

    Seeded with best fit's packs (as `_lp_plan.plan`; without them, 490 rows took 86
    rounds instead of 16) and ``more_seeds``; the bound only: no plan rounded from it.
    """
    lengths = np.flatnonzero(rounded) + 1
    demand = rounded[lengths - 1]
    simple = max(_bounds.simple(rounded, len(rounded), max_sequences_per_pack).values())
    seeds = list(_best_fit.fill(dict(zip(lengths.tolist(), demand.tolist())), {}, len(rounded),
                                max_sequences_per_pack))
    try:
        lp = _column_generation.run(lengths, demand, len(rounded), max_sequences_per_pack,
                                    seeds + more_seeds, simple, first_round=first, budget=budget)
    except _budget.OutOfTime:
        return None
    search.prove(lp.lower_bound, "lp")
    return lp


def finer_unit(max_length: int, unit: int, took: float, left: float) -> int:
    """The finest divisor of ``max_length`` below ``unit`` whose LP fits in ``left`` seconds.

    An LP in units of ``d`` has about ``unit / d`` times the rows of the last one (in
    ``unit``, ``took`` seconds), and took about as many times longer, times
    `Tuning.FINER_GROWTH`; 1 where none fits (or none is finer than ``unit`` but 1).
    """
    finer = [d for d in range(unit - 1, 1, -1) if max_length % d == 0]
    fits = [d for d in finer if Tuning.FINER_GROWTH * took * unit / d <= left]
    return fits[-1] if fits else 1


def finer_units(search, histogram, max_length, max_sequences_per_pack, unit,
                budget: _budget.Budget, took: float = 0.0) -> None:
    """Where the depth binds, bounds on lengths rounded down to finer units while time lasts.

    The grouped plan there (`_paths.grouped`) converges in a round or two and
    leaves most of the budget, while the bound on lengths rounded down to units
    (`in_units`) is what is loose: it drops the sequences shorter than a unit (a
    pack's slot each, where the depth binds) and shortens the others by up to a
    unit. Each finer unit is a relaxation too, its LP seeded with best fit's
    packs: the finest whose LP, at the time per row of the last one (``took``
    seconds in ``unit``), fits in the time left (`finer_unit`), until none does.
    Without a time limit, the LP over all lengths follows instead. Stretched
    short documents at L=12,288 depth 8 (`planners_long_context.py --seed 3`
    case 10: 69,714 packs; the optimum is 69,705): 69,372 proven in units of 12
    (0.49%); halving the unit, 69,527 in units of 6 (0.27%), and units of 3 cut
    by the budget; the finest that fits, 69,638 in units of 4 (0.11%).
    """
    while budget.limited and budget.left() > Tuning.REFINE_LEFT and \
            not search.within(_lp_plan.slack(search.bound)):
        unit = finer_unit(max_length, unit, took, budget.left())
        if unit < 2:
            return  # the LP over all lengths follows
        rounded = in_units(_groups.rounded(histogram, np.arange(1, max_length + 1, unit),
                                           up=False), unit, up=False)
        if not rounded.any():
            continue  # every sequence shorter than this unit
        began = budget.spent()
        if rounded_down_lp(search, rounded, max_sequences_per_pack, [], False, budget) is None:
            return
        took = budget.spent() - began
