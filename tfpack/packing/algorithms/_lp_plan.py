"""`optimal`'s plans from an LP: column generation, rounding, dives and repair.

`plan` runs column generation (`_column_generation.run`) on a histogram (of
lengths or of length groups) and rounds its LP every way that pays
(``docs/packing.md``, "Rounding" and "Repair"): rounded up most fractional
first at a few fills (`_rounding.round_lp`), by diving (`dive`), and by
`repaired` (the LP's whole packs, and a plan of their own for what they leave).
Best fit and the other candidates compete; the plan with fewest packs wins.

>>> import numpy as np
>>> lengths, demand = np.array([2, 3, 5, 6]), np.array([3, 1, 1, 2])
>>> packs, bound = plan(lengths, demand, 8, 3, 4)
>>> sum(packs.values()), bound
(4, 4)
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import (_best_fit, _budget, _column_generation, _diving,
                                       _rounding, base)
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["plan", "repaired", "dive", "fewest", "result", "simple_bound", "slack"]

Plan = dict[tuple[int, ...], int]  # pack (lengths, longest first) -> how many


def plan(lengths, demand, max_length, max_sequences_per_pack, simple, *, stop_at=0.0,
         smooth=Tuning.SMOOTHING, others=(), dives=True, heuristic=None, first_round=True,
         repair=0.0, seeds=(), keep: list | None = None,
         budget: _budget.Budget | None = None) -> tuple[Plan, int]:
    """Column generation and rounding: the best plan found and the proven bound.

    ``stop_at``: column generation may stop once the LP value is this low.
    ``smooth``: the pricing mix of `_column_generation.run` (0: the LP duals only).
    ``others``: more candidate plans; the one with fewest packs is returned.
    ``dives``: also round by diving (`dive`), up to EARLY_ROWS lengths.
    ``heuristic``: a best fit plan (computed here if not given), to seed the LP.
    ``first_round``: column generation's first round may run past ``budget``
    (`_column_generation.run`); ``False``: it stops there too.
    ``repair``: column generation gets this share less of ``budget``, kept
    for the repair (the LP rounded down, what that leaves planned on its own).
    ``seeds``: more packs (tuples of ``lengths``) for the first LP.
    ``keep``: if given, the last LP (`_column_generation.LP`) is appended:
    its packs seed a finer LP and its duals lift a bound (`_paths.plan_up`).
    ``budget``: column generation stops when it ends, with its last LP (or,
    before the first LP is solved, the best fit plan and ``simple``); one
    rounding is always made, the others only within the budget.
    """
    budget = budget or _budget.Budget(None)
    if heuristic is None:
        counts = dict(zip(lengths.tolist(), demand.tolist()))
        heuristic = _best_fit.fill(counts, {}, max_length, max_sequences_per_pack)
    if sum(heuristic.values()) <= simple * (1 + Tuning.GOOD_ENOUGH):
        return heuristic, simple  # no LP can say much more
    try:
        lp = _column_generation.run(lengths, demand, max_length, max_sequences_per_pack,
                                    [*heuristic, *seeds], simple, stop_at=stop_at, smooth=smooth,
                                    budget=budget.share(1.0 - repair) if repair else budget,
                                    first_round=first_round)
    except _budget.OutOfTime:  # before the first LP: no columns to round
        return fewest([heuristic, *[o for o in others if o]]), simple
    if keep is not None:
        keep.append(lp)

    def rounding(fill):
        return _rounding.round_lp(lp.patterns, lp.x, lengths, demand, max_length,
                                  max_sequences_per_pack, fill)

    # Column generation may have rounded this LP at EARLY_FILL already.
    plans = ([] if lp.rounded else [rounding(Tuning.EARLY_FILL)]) + \
        [heuristic, *[o for o in others if o]] + ([lp.plan] if lp.plan else [])
    if repair and not budget.expired():
        plans.append(repaired(lp, lengths, demand, max_length, max_sequences_per_pack, budget))
    best = fewest(plans)
    if dives and len(lengths) <= Tuning.EARLY_ROWS and lp.master is not None and \
            lp.master.incremental and not budget.expired():
        dived = dive(lp, lengths, demand, max_length, max_sequences_per_pack,
                     sum(best.values()), budget)
        if dived is not None:
            best = dived
    rest = [rounding(fill) for fill in Tuning.ROUND_UP_FILLS
            if fill != Tuning.EARLY_FILL and not budget.expired()]
    return fewest(rest + [best]), lp.lower_bound


def repaired(lp: _column_generation.LP, lengths, demand, max_length, max_sequences_per_pack,
           budget: _budget.Budget) -> Plan:
    """The LP's whole packs, and a plan of their own for the sequences they leave.

    Rounding (`_rounding.round_lp`) puts what the LP's packs rounded down
    leave into free space by best fit, packs the LP never priced: where the
    tokens bind there is little free space, and those few hundred sequences
    cost packs (C headers, L=8,192 depth 4, 840 groups: the LP 4,787.6, its
    rounding 4,800). Here they get a plan of their own (`plan`: column
    generation and rounding on their histogram, its first round within
    ``budget`` too; best fit when it ends first): 600 sequences, 164 packs'
    tokens, 165-168 packs in 0.05-0.13 s, so 4,789-4,792 in all.
    """
    whole = np.floor(lp.x + 1e-6).astype(np.int64)
    packs, missing = _rounding.cover(lp.patterns, whole, lengths, demand)
    if not missing:
        return packs
    rest = np.array(sorted(missing), dtype=np.int64)
    need = np.array([missing[v] for v in rest.tolist()], dtype=np.int64)
    simple = simple_bound(rest, need, max_length, max_sequences_per_pack)
    rest_plan, _ = plan(rest, need, max_length, max_sequences_per_pack, simple,
                        first_round=False, budget=budget)
    for pack, number in rest_plan.items():
        packs[pack] = packs.get(pack, 0) + number
    return packs


def dive(lp: _column_generation.LP, lengths, demand, max_length, max_sequences_per_pack,
         packs: int, budget: _budget.Budget) -> Plan | None:
    """The first dive's plan with fewer than ``packs`` packs, if any.

    No dive when ``packs`` is within `Tuning.DIVE_GAP` of the bound: there dives
    rarely gained the last pack, and cost up to 0.15 s on 500 lengths.
    """
    if packs < lp.lower_bound + Tuning.DIVE_GAP:
        return None
    for up_from in Tuning.DIVE_UP_FROM:
        try:
            whole = _diving.dive(lp.master, lp.x, lp.value, at_most=packs, up_from=up_from,
                                 budget=budget)
        except RuntimeError:  # pragma: no cover - HiGHS not optimal on a feasible LP
            return None  # a dive only offers a plan; the others stand
        if whole is not None:
            dived = _rounding.settle(lp.patterns, whole, lengths, demand, max_length,
                                     max_sequences_per_pack)
            if sum(dived.values()) < packs:
                return dived
    return None


def fewest(plans: list[Plan]) -> Plan:
    """The plan with fewest packs (the first of equals).

    >>> fewest([{(3,): 2}, {(3, 1): 1, (2,): 1}, {(4,): 2}])
    {(3,): 2}
    """
    return min(plans, key=lambda packs: sum(packs.values()))


def result(packs: Plan, lower_bound: int) -> base.AlgorithmResult:
    """``packs`` as an `AlgorithmResult`: strategies longest first, int64 counts.

    >>> result({(2,): 1, (6, 2): 2}, 3).strategies
    [(6, 2), (2,)]
    """
    strategies = sorted((p for p, c in packs.items() if c > 0 and p), reverse=True)
    counts = np.array([packs[p] for p in strategies], dtype=np.int64)
    return base.AlgorithmResult(strategies, counts, int(lower_bound))


def simple_bound(lengths, demand, max_length, max_sequences_per_pack) -> int:
    """``ceil(tokens / max_length)``, and ``ceil(sequences / max_sequences_per_pack)``.

    >>> simple_bound(np.array([2, 6]), np.array([3, 2]), 8, 2)
    3
    """
    simple = -(-int(lengths @ demand) // max_length)
    if max_sequences_per_pack is not None:
        simple = max(simple, -(-int(demand.sum()) // max_sequences_per_pack))
    return simple


def slack(simple: int) -> float:
    """Packs above ``simple`` that a plan may have without the LP over all lengths.

    >>> slack(100), slack(100_000)
    (2, 10.0)
    """
    return max(Tuning.LP_GAP * simple, Tuning.ROUNDING_PACKS)
