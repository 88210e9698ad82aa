"""Diving: round the master LP by fixing packs and re-solving what is left.

Rounding an LP solution once (`_rounding.round_lp`) decides every pack at the
same time. A dive decides some, re-solves the LP over the same columns on the
demand those packs leave, and goes on: each re-solve sees what the packs
fixed so far cover, and spreads the rest anew. The master keeps HiGHS's basis,
so a re-solve is a few dual simplex iterations::

    whole = dive(master, x, value, at_most=78, up_from=0.9)
    # whole[j]: copies of column j; they cover the demand (None: no plan under 78)

Only plans change; the LP's columns, its value and any bound stay as they are.
"""

from __future__ import annotations

import math

import numpy as np

from tfpack.packing.algorithms import _budget, _lp

_WHOLE = 1e-6  # x within this of an integer counts as that integer


def dive(master: _lp.Master, x: np.ndarray, value: float, *, at_most: int,
         up_from: float, budget: _budget.Budget | None = None) -> np.ndarray | None:
    """Whole copies of each column that cover ``master``'s demand, by diving.

    Args:
        master: an incremental (HiGHS) master, solved; its last solution is
            ``x`` (float64 ``[columns]``) worth ``value``. It is left as found.
        at_most: give up once the dive cannot end below this many packs.
        up_from: each step takes every column's whole copies, plus one copy of
            each column whose fraction is at least this (or, if none is, of
            the most fractional column, if any is fractional).
        budget: the dive gives up (``None``) when it ends.

    Returns:
        int64 ``[columns]``: packs whose slots, shorter sequences taking
        longer slots where needed, hold the demand; ``None`` when the packs
        fixed so far plus the LP on what is left reach ``at_most`` (the LP
        bounds every completion over these columns, so the dive cannot win),
        or when ``budget`` ends.
    """
    demand, basis = master.demand, master.basis()
    supply = _lp._sparse(master.columns, master.n)
    fixed = np.zeros(len(x), dtype=np.int64)
    try:
        while value > _WHOLE:
            if int(fixed.sum()) + math.ceil(value - _WHOLE) >= at_most:
                return None
            if budget is not None and budget.expired():
                return None
            whole = np.floor(x + _WHOLE).astype(np.int64)
            fraction = x - whole
            up = fraction >= up_from
            if not up.any() and (fraction.max() > _WHOLE or not whole.any()):
                up[int(np.argmax(fraction))] = True  # a pack a step at least: dives end
            fixed += whole + up
            master.set_demand(demand - supply @ fixed)
            try:
                value, x, _ = master.solve(budget)
            except _budget.OutOfTime:
                return None
    finally:
        master.set_demand(demand)
        master.set_basis(basis)
    return fixed
