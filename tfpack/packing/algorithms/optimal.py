"""`optimal`: near-optimal histogram packing by column generation, with a proven bound.

Packing a length histogram ``h`` into packs of at most ``max_length`` tokens and
``max_sequences_per_pack`` sequences is the cutting-stock problem. Its LP
relaxation has one column per feasible pack; column generation
(`_column_generation`) solves it with HiGHS and a knapsack for pricing, and
proves Farley's lower bound at every round; its solution is rounded into a plan
(`_lp_plan`). Where there are thousands of lengths, the search first plans on
length groups, full packs or a quick grouped bound (`_paths`; a grouped
plan's duals also prove a bound over the real lengths, `_lift`). The tuning
constants, each with the measurement that chose it, are in `_tuning.Tuning`;
how and why it all works is in ``docs/packing.md`` ("How `optimal` works").

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms.optimal import pack
>>> histogram = np.zeros(8, dtype=np.int64)
>>> histogram[[1, 2, 4, 5]] = [3, 1, 1, 2]  # lengths 2, 2, 2, 3, 5, 6, 6
>>> result = pack(histogram, 8, 3, seed=0)
>>> result.strategies, result.counts.tolist(), result.lower_bound_packs
([(6, 2), (5, 3), (2,)], [2, 1, 1], 4)

References:
    P. C. Gilmore, R. E. Gomory, "A linear programming approach to the
    cutting-stock problem", Operations Research 9 (1961).
    A. A. Farley, "A note on bounding a class of linear programming problems,
    including cutting stock problems", Operations Research 38 (1990).
    H. Ben Amor, J. Desrosiers, J. M. Valerio de Carvalho, "Dual-optimal
    inequalities for stabilized column generation", Operations Research 54 (2006).
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import (_bounds, _budget, _class_fill, _fit_decreasing, _lp_plan,
                                       _pairs, _paths, _spread_fill, _spread_settle, _units, base)
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["pack"]


@base.register("optimal", time_limit=True)
@_budget.collector_paused()
def pack(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *,
         seed: int, time_limit: float | None = None) -> base.AlgorithmResult:
    """Near-optimal packing strategies for ``histogram`` and a proven lower bound.

    Args:
        histogram: int64 ``[max_length]``, ``histogram[i]`` sequences of length
            ``i + 1``; validated by the caller, not all zero.
        max_length: tokens per pack.
        max_sequences_per_pack: sequences per pack, or ``None`` for no limit.
        seed: unused; the algorithm is deterministic (without a time limit).
        time_limit: seconds (CPU time of the calling thread, `_budget`) from the
            call, best fit decreasing included, or ``None`` for no limit; when it
            ends, the best plan found so far is returned with the best bound
            proven so far.

    Returns:
        `AlgorithmResult` with strategies (longest first), int64 counts,
        ``lower_bound_packs``, an integer no plan can beat, and its kind.
    """
    del seed
    budget = _budget.Budget(time_limit)
    histogram = np.asarray(histogram, dtype=np.int64)
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    search = _paths.Search(_bounds.simple(histogram, max_length, max_sequences_per_pack))
    if max_sequences_per_pack == 1:
        search.offer({(int(n),): int(c) for n, c in zip(lengths, demand)})
        return search.result()
    if max_sequences_per_pack == 2:  # a matching: the greedy's plan is the optimum
        plan = _pairs.pairs(histogram, max_length)
        search.offer(plan)
        search.prove(search.packs, "pairs")
        return search.result()
    # Best fit decreasing (and first fit, where it is cheap) first: never worse than them.
    search.bfd = _fit_decreasing.packs(histogram, max_length, max_sequences_per_pack,
                                       best_fit=True)
    search.reserve = budget.spent()  # what follows a grouped plan costs about a best fit
    search.offer(search.bfd)
    if len(lengths) <= Tuning.FFD_LENGTHS:
        search.offer(_fit_decreasing.packs(histogram, max_length, max_sequences_per_pack,
                                           best_fit=False))
    windows = _bounds.windows_alone(histogram, max_sequences_per_pack)
    spread = _spread_pays(histogram, max_sequences_per_pack)
    if spread:
        cheap = max(search.bound, windows)
        whole = _spread_tier(max_sequences_per_pack)[2]  # else one try as it is, no more
        counts = _spread_fill.pool(histogram, max_length)
        unit = _units.divisor(max_length, max_length // Tuning.SPREAD_CLASS_UNITS)

        def classes(spread):  # the class fill (`_class_fill`), after a first try not close
            return _class_fill.rows(counts, max_length, max_sequences_per_pack,
                                    Tuning.SPREAD_CLASSES, Tuning.SPREAD_BATCH, spread, unit)

        def settle(rows, spread, enough, last):  # the least-filled packs settled (`_spread_settle`)
            return _spread_settle.settled(rows, max_length, max_sequences_per_pack, spread,
                                          Tuning.SPREAD_SETTLE_LAST if last else
                                          Tuning.SPREAD_SETTLE, enough)

        search.offer(_spread_fill.best(
            histogram, max_length, max_sequences_per_pack, cheap,
            budget.share(Tuning.SPREAD_SHARE), Tuning.SPREAD_SCALES[:None if whole else 1],
            Tuning.SPREAD_BATCH, Tuning.SPREAD_GAP, Tuning.SPREAD_TAIL if whole else 0.0,
            Tuning.SPREAD_TAILS, classes if Tuning.SPREAD_CLASSES and whole else None,
            Tuning.SPREAD_CLASS_TAIL, Tuning.SPREAD_CLASS_AFTER,
            settle=settle if Tuning.SPREAD_SETTLE and whole else None))
    settles, keep, sequences = _settle_pays(histogram, max_sequences_per_pack), 0.0, demand.sum()
    if settles and budget.limited and search.bounds["tokens"] >= search.bound and \
            _fillers(histogram, max_sequences_per_pack) >= Tuning.SETTLE_FILLERS:
        # Where the tokens bind, time for settling the plan is kept from the search.
        keep = min((Tuning.SPREAD_PLAN_SETTLE_SHARE if spread else Tuning.PLAN_SETTLE_SHARE)
                   * budget.left(), Tuning.PLAN_SETTLE_PER_SEQUENCE * float(sequences))
    rest = budget.less(search.reserve + keep)
    try:
        # The result (strategies sorted, counts) and the caller's checks of it come after
        # the budget, each a pass over the plan's packs like best fit: their time is kept.
        # Not where too little is left for its first LP (`Tuning.SEARCH_LEAST`).
        if not (settles and rest.limited and rest.left() < Tuning.SEARCH_LEAST):
            _search(search, histogram, lengths, demand, max_length, max_sequences_per_pack, rest)
    except _budget.OutOfTime:
        pass  # the best plan and bound so far stand
    if settles and not search.done():  # the best plan settled (`Tuning.PLAN_SETTLE`)
        after = search.reserve + Tuning.SETTLE_AFTER_SECONDS * float(sequences)
        if budget.left() > after:  # (the plan built again from the moved sequences after it)
            search.offer(_spread_settle.settled_plan(
                search.plan, max_length, max_sequences_per_pack, budget.less(after),
                Tuning.PLAN_SETTLE, Tuning.PLAN_SETTLE_MOVES,
                _sample(histogram, max_sequences_per_pack)))
    # Proven after the paths, which choose by `_bounds.simple`'s bounds (as they were tuned).
    search.prove(windows, "windows")
    return search.result()


def _search(search: _paths.Search, histogram, lengths, demand, max_length,
            max_sequences_per_pack, budget: _budget.Budget) -> None:
    """The paths of docs/packing.md, each offering its plans and bounds to ``search``."""
    if search.done():
        return
    simple = search.bound
    tokens_bound = search.bounds["tokens"]
    tokens_bind = tokens_bound >= search.bounds.get("sequences", 0)
    if len(lengths) >= Tuning.MANY_LENGTHS and simple == tokens_bound and \
            max_length < Tuning.FULL_FIRST_BELOW and _full_windows_pay(histogram):
        full_first = _paths.full_packs_first(histogram, max_length, max_sequences_per_pack,
                                             simple, budget.share(Tuning.FULL_FIRST_SHARE),
                                             heuristic=search.bfd)
        if full_first is not None:
            search.offer(full_first)
            if search.packs <= simple + _lp_plan.slack(simple):
                return  # the LP over all lengths could not do better
    cells = len(lengths) * ((max_sequences_per_pack or 1) + 1) * (max_length + 1)
    if Tuning.QUICK_PLAN_ROWS < len(lengths) < Tuning.GROUPED_LENGTHS and \
            cells > Tuning.SLOW_TABLE and tokens_bind:
        _paths.quick(search, histogram, max_length, max_sequences_per_pack,
                     budget.share(Tuning.QUICK_PLAN_SHARE))
        if search.within(_lp_plan.slack(search.bound)):
            return
    if len(lengths) >= Tuning.GROUPED_LENGTHS:  # plan on length groups: a bound and a plan
        # Where the tokens bind among thousands of lengths, the grouped plan is the
        # plan (the LP over all lengths cannot converge in the time): nearly all of it.
        share = Tuning.TOKENS_GROUPED_SHARE if len(lengths) >= Tuning.MANY_LENGTHS and \
            tokens_bind else Tuning.GROUPED_SHARE
        _paths.grouped(search, histogram, max_length, max_sequences_per_pack,
                       budget.share(share))
        if search.within(_lp_plan.slack(search.bound)):
            return
    if budget.expired() or budget.left() < Tuning.LAST_LP_SECONDS and \
            len(lengths) > Tuning.LAST_LP_LENGTHS:
        return  # its first round's seeds and solve would not end in the time left
    # Seeded with the packs of the last grouped LP (`Search.columns`), shrunk to these lengths
    # and grown into their room: on 1,308 lengths at L=12,288 depth 6 (long-context seed 335
    # case 31) the LP over all lengths needs 3.4 s cold; from the 1,024-group rounded-down LP's
    # packs it ends within the second: 169,138 -> 168,513 packs on 168,490.
    packs, bound = _lp_plan.plan(lengths, demand, max_length, max_sequences_per_pack,
                                 search.bound, heuristic=search.bfd, others=[search.plan],
                                 seeds=_paths.finer_packs(search.columns, lengths,
                                                          fill=max_length),
                                 budget=budget)
    search.offer(packs, ties=True)  # the LP's plan, as without the other paths
    search.prove(bound, "lp")


def _settle_pays(histogram: np.ndarray, max_sequences_per_pack: int | None) -> bool:
    """Whether the best plan is settled at the end (`_spread_settle.settled_plan`): on long
    contexts (`Tuning.LONG_CONTEXT_FROM`), with a depth (the kernel's places).

    >>> [_settle_pays(np.ones(length, dtype=np.int64), 4) for length in (12288, 8192)]
    [True, False]
    """
    return len(histogram) >= Tuning.LONG_CONTEXT_FROM and max_sequences_per_pack is not None


def _sample(histogram: np.ndarray, depth: int) -> float:
    """The share of packs the plan's settling dissolves besides the least filled
    (`Tuning.PLAN_SETTLE_SAMPLE`): where the depth nearly binds (`_bounds.slots_share`, from
    `Tuning.SAMPLE_SLOTS_FROM`, at a depth of `Tuning.SAMPLE_DEPTH_FROM` or more), else 0.

    >>> h = np.zeros(12288, dtype=np.int64); h[1535] = 720  # 1,536s: 90 packs of 8
    >>> _sample(h, 8), _sample(h, 24), _sample(h, 4)  # the slots: 1.0, 0.33 and 2.0
    (0.03, 0.0, 0.0)
    """
    if depth < Tuning.SAMPLE_DEPTH_FROM or \
            _bounds.slots_share(histogram, depth) < Tuning.SAMPLE_SLOTS_FROM:
        return 0.0
    return Tuning.PLAN_SETTLE_SAMPLE


def _fillers(histogram: np.ndarray, depth: int) -> float:
    """The share of the tokens in sequences of at most ``max_length / (2 depth)`` tokens:
    where there are few, settling is slow (`Tuning.SETTLE_FILLERS`).

    >>> _fillers(np.array([3, 0, 0, 0, 0, 0, 0, 1]), 2)  # L=8: 3 of 11 tokens in lengths 1-2
    0.2727272727272727
    """
    short = len(histogram) // (2 * depth)
    tokens = np.arange(1, len(histogram) + 1)
    return _budget.dot(tokens[:short], histogram[:short]) / _budget.dot(tokens, histogram)


def _spread_pays(histogram: np.ndarray, max_sequences_per_pack: int | None) -> bool:
    """Whether the spread fill (`_spread_fill`) may pay: on long contexts
    (`Tuning.LONG_CONTEXT_FROM`) at a depth of `Tuning.SPREAD_TIERS`, where the sequences
    shorter than ``max_length`` need from the tier's share under to `Tuning.SPREAD_BAND` over
    the slots of the packs their tokens need (`_bounds.slots_share`: the depth binds beside
    the tokens, or nearly: nearly every pack full, with nearly ``depth`` sequences).

    >>> h = np.zeros(12288, dtype=np.int64); h[[1535, 12287]] = [800, 10]  # 8 a pack, and 10 full
    >>> _spread_pays(h, 8), _spread_pays(h, 10), _spread_pays(h, 16)  # slots 800, 1,000, 1,600
    (True, True, False)
    >>> at_6 = np.zeros(12288, dtype=np.int64); at_6[1999] = 100  # 2,000s: 12,288 / (depth * 2,000)
    >>> [_spread_pays(at_6, depth) for depth in (5, 6, 7, 8, 12)]  # -, 1.024, 0.878, 0.768, 0.512
    [False, True, False, False, False]
    """
    tier = _spread_tier(max_sequences_per_pack)
    if len(histogram) < Tuning.LONG_CONTEXT_FROM or tier is None:
        return False
    share = _bounds.slots_share(histogram, max_sequences_per_pack)
    return 1 - tier[1] <= share <= 1 + Tuning.SPREAD_BAND


def _spread_tier(max_sequences_per_pack: int | None) -> tuple | None:
    """The row of `Tuning.SPREAD_TIERS` for this depth (the first it reaches), or ``None``
    (below them all, or no depth limit: the depth never binds).

    >>> _spread_tier(16)[0], _spread_tier(11)[0], _spread_tier(7)[0], _spread_tier(5), _spread_tier(None)
    (12, 8, 6, None, None)
    """
    if max_sequences_per_pack is None:
        return None
    return next((tier for tier in Tuning.SPREAD_TIERS if max_sequences_per_pack >= tier[0]), None)


def _full_windows_pay(histogram: np.ndarray) -> bool:
    """Whether full packs first (`_paths.full_packs_first`) may pay: below
    `Tuning.LONG_CONTEXT_FROM` always; on long contexts only where sequences of
    ``max_length`` hold `Tuning.FULL_FIRST_SPIKE` of the tokens or more.

    Among the long-context suite's cases at L=12,288 (seeds 1, 5, 6) it succeeded only
    where they held 38-69% (seed 1 case 30: 331,235 packs on 331,189 in 0.41 s; without it
    331,355); under 30% it gave up on all 23 after 0.02-0.24 s, taken from the plan
    that followed (seed 5 case 18: 0.209% with it, 0.171% without).

    >>> _full_windows_pay(np.array([0, 0, 0, 5]))  # L=4: below long contexts
    True
    """
    max_length = len(histogram)
    if max_length < Tuning.LONG_CONTEXT_FROM:
        return True
    tokens = _budget.dot(np.arange(1, max_length + 1), histogram)
    return bool(histogram[-1] * float(max_length) >= Tuning.FULL_FIRST_SPIKE * tokens)
