"""`optimal`: near-optimal histogram packing by column generation, with a proven bound.

Packing a length histogram ``h`` into packs of at most ``max_length`` tokens and
``max_sequences_per_pack`` sequences is the cutting-stock problem. Its LP relaxation::

    minimize    sum_j x_j
    subject to  sum_j a_ij x_j >= h_i   for every length i
                x_j >= 0

has one column ``a_j`` per feasible pack ("strategy": ``a_ij`` sequences of
length ``i``, ``sum_i i a_ij <= max_length``, ``sum_i a_ij <= max_sequences_per_pack``,
``a_ij <= h_i``). There are far too many columns to list, so they are generated:
solve the LP over a few columns with HiGHS, read the duals ``y``, and ask a
knapsack dynamic program (`_knapsack.price`) for packs worth more than 1 under
``y``; repeat until none is. Then round down, drop slots nobody needs, and put
the few sequences left without a slot into free space with best fit
(`_best_fit.fill`).

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms.optimal import pack
>>> histogram = np.zeros(8, dtype=np.int64)
>>> histogram[[1, 2, 4, 5]] = [3, 1, 1, 2]  # lengths 2, 2, 2, 3, 5, 6, 6
>>> result = pack(histogram, 8, 3, seed=0)
>>> result.strategies, result.counts.tolist(), result.lower_bound_packs
([(6, 2), (5, 3), (2,)], [2, 1, 1], 4)

Notes:
    *Depth 1 and 2.* One sequence a pack is the only plan; with at most two a
    pack, packing is a matching that a greedy solves exactly (`_pairs`: the
    longest with the shortest that fits): its plan is returned, with its
    count as the bound (kind ``"pairs"``), without an LP. (Spikes at L=8,192,
    depth 2: 14,307,799 packs, all the other bounds 12,096,392, 18% below.)

    *Time limit and candidates.* `pack` runs best fit decreasing first (and
    first fit, up to 2,048 lengths): their plans are candidates, so no plan is
    worse. ``time_limit`` (CPU seconds, `_budget`) counts from the call, best
    fit included; the paths below run under it: every LP solve, pricing,
    dive, the exact fill and the group paths check it, and when it ends the
    best plan and the best bound so far are returned (`_Search`). What must
    follow a phase is kept out of its time: the search ends best fit's time
    early (the result is built and checked after it, a pass over the packs
    like best fit), and a grouped plan's LP ends that much, or the most a
    plan ran past its budget, before the plan must (`_plan_up`: its last
    rounding and `real_packs`), so that a plan call with ``time_limit=1``
    takes about a second of CPU at L=65,536 too (1.24 s before). Column
    generation's first round runs to its end where its size is bounded
    (`_small`), except on LPs that only give a bound (`_grouped`, `_quick`),
    whose first round stops with the budget too. The bound reported is the largest of
    the cheap ones (`_bounds`: tokens, sequences, Martello-Toth's L2 "long")
    and the LP's ("lp", also from lengths rounded down within groups), with
    its kind.

    *The bound.* For any ``y >= 0`` whose best pack is worth ``v``, ``y / v`` is
    feasible for the dual of the LP over *all* packs, so ``h.y / v`` bounds the LP
    optimum, and so the number of packs of any plan, from below (Farley's
    bound). It holds at every iteration, converged or not. ``h.y`` is summed
    with `math.fsum` and ``v`` is a sum of at most (sequences per pack) doubles, so
    the computed quotient is within ~1e-12 relative of the exact one; the
    reported ``lower_bound_packs`` is ``ceil(q - 1e-9 * q)``, rounding down
    values within that margin above an integer, so it stays a valid integer
    bound. The trivial bounds ``ceil(tokens / max_length)`` and
    ``ceil(sequences / max_sequences_per_pack)`` are combined with it (max).
    Pricing may see values *above* the duals (made non-decreasing and rounded
    up to plateaus, `_plateaus`, then up to float32 in `_knapsack`) and reports
    an upper bound on the best value under those; both only make ``v`` larger,
    so ``h.y / v`` (with the true ``y`` above the line) stays a valid bound,
    at most 2e-5 (relative) weaker. Where that margin could cost a whole
    pack, the duals of the best bound are priced once more exactly (float64).
    The bound is computed at whatever ``y`` is priced, smoothed or not.

    *Dual-optimal inequalities.* A slot of length ``i`` can always hold a
    shorter sequence, so the LP gets zero-cost columns moving supply from each
    length to the next shorter one. They leave the optimum unchanged and force
    duals to grow with length, which cuts the number of rounds severalfold.

    *Seeds and smoothing.* The first LP gets the best fit plan's packs and the
    best packs per longest length under a few affine values (`_seed_patterns`);
    with a few hundred lengths those are priced on lengths rounded up to a
    grid of at most 4,096 tokens (feasible, and 2-4x cheaper at 8,192).
    Each round prices at ``0.5 y_best + 0.5 y_lp``, ``y_best`` the duals of the
    best bound so far, scaled to be worth 1 (Wentges smoothing); packs found
    there are kept if they improve the LP, and if none does the LP duals are
    priced in the same round, so the LP still ends optimal.

    *Stopping.* Column generation stops when no pack is worth more than 1
    (the LP is optimal), when the rounded-up bound meets the rounded-up LP
    value or a plan, or after a work budget of rounds x lengths (a round
    costs about one pass over the lengths). Past a fortieth of that budget,
    also when a plan meets the rounded-up LP value within one pack of the
    bound (more rounds could only prove that pack, and rarely do before the
    LP converges); past a tenth of that budget, also when the LP
    value is within 1e-4 (relative: 0.01 percentage point of efficiency) of
    the bound, as more rounds could not gain more. Best fit alone is
    returned, without an LP, when it is within 1e-5 of the token bound. All
    of these keep the result deterministic and the bound valid.

    *Many lengths.* With thousands of distinct lengths (``_MANY_LENGTHS``) the
    LP over all of them takes seconds a solve. When the token bound is the
    simple bound (the sequences do not need more packs) and packs hold fewer
    than ``_FULL_FIRST_BELOW`` tokens (its greedy scans up to L lengths a
    join in Python: from L=32,768 it gave up after 0.65-1.8 s on every suite
    case, so it is not started there), `_exact_fill` first
    builds packs of exactly ``max_length`` tokens, greedily, a group of
    identical packs at a time. When it leaves little (``_REST_SHARE`` of the
    tokens, at most 1,024 lengths), the rest goes through the column
    generation (unsmoothed: only its value matters) and rounding below, on
    its lengths rounded up within groups of neighbours where it has more
    than ``_REST_ROWS`` (`_groups`: the slots hold the real sequences, a few
    tokens lost a sequence, for an LP a fraction as slow), stopping once
    that LP is within ``_REST_LP_SLACK`` of ``_slack`` of the rest's token
    bound (full packs waste nothing, so the whole plan is then as close,
    plus what rounding and the rounded-up lengths lose). docs300k d16
    leaves 678 lengths: in 237 groups the whole plan takes 0.5 s, 5 packs
    above the bound; on all 678, 1.9 s and 3 packs (340 groups: 0.8 s, 3).
    The plan is returned with the token
    bound when it is within ``_slack`` (0.01 pp of efficiency, or the couple
    of packs rounding loses) of it, the tolerance the LP over all lengths
    stops at; else that LP runs as before and this plan is one more
    candidate. The bound stays valid: it is the token bound. The greedy is
    a heuristic: it leaves ~2% of the tokens on the lognormal and document
    histograms of the benchmarks, but 9-23% on narrower lognormals (sigma
    0.8, or L=4,096), which then cost the LP over all lengths as before.
    It gives up as soon as the lengths it could not pack pass those limits
    (`_exact_fill.TooMuchLeft`; spikes L=32,768 depth 16: after 0.03 s
    instead of its whole 0.4 s share, the same plans where it succeeds).

    *Length groups.* With thousands of lengths (the LP's first solve alone
    takes seconds) and a depth limit that binds (more packs for the
    sequences than for the tokens), neighbouring lengths are grouped
    (`_groups`): the plan comes from the histogram with every length rounded
    up within its group (its slots hold the real sequences), the bound from
    the one rounded down (a relaxation). Each has a few hundred lengths. The
    pair is kept when the plan is within ``_slack`` of that bound, where
    column generation on all lengths stops too; otherwise the planner goes on
    with all lengths. They get ``_GROUPED_SHARE`` (85%) of the budget, so
    the bound's LP ends within it (Zipf at L=2,048, depth 32: 0.3 s of CPU;
    at 60% it was cut, and the bound fell back to the depth bound, 6.6%
    below). Where the tokens bind, only the plan runs, on ``_BALANCED_ROWS``
    (896) groups whose widths follow the sequences (`_groups.balanced`: a
    group's width goes as one over the square root of the sequences per
    length, which minimizes what rounding up loses; at L=8,192 log-normal
    depth 3, 0.55% -> 0.25% above the bound in 1 s): the rounded-down LP's
    bound was never above the simple ones there on the suite. From
    ``_MANY_LENGTHS`` lengths it gets ``_TOKENS_GROUPED_SHARE`` (97%) of the
    time: the LP over all lengths cannot converge in what is left, and the
    plan gains from it (log-normal L=8,192 depth 3: 124,200 -> 124,114 packs,
    with 896 groups instead of 768; spikes L=8,192: 2,635 -> 2,634, spikes
    L=32,768: 14,987 -> 14,973; with 80% of 85% and the rounded-down LP after
    it before). From L=16,384 those groups are multiples of a unit (32 tokens
    at L=32,768, `_grouped`); where rounding up to the unit alone loses more
    than `_GRID_LOSS` (0.2%) of the token bound's tokens, the plan is made on
    balanced groups on a finer grid instead (`_fine_grid`: log-normal
    L=32,768 depth 16, 0.351% -> 0.154% above the bound). A rounded-up
    histogram whose token bound is not below the best plan is not planned
    (its time goes to the LP over all lengths); below ``_MANY_LENGTHS`` neither
    is one more than ``_PROVE_GAP`` above the bound: the LP over all lengths
    follows within the budget and does better there (L=2,048 log-normal
    depth 32).

    *Quick bound.* With fewer lengths (``_QUICK_PLAN_ROWS`` to
    ``_GROUPED_LENGTHS``) where the tokens bind and pricing's table is large
    (``_SLOW_TABLE``), the LP over all lengths may take seconds to prove
    anything above the token bound: `_quick` first proves an LP bound on
    ``_QUICK_ROWS`` balanced groups rounded down, then plans on
    ``_QUICK_PLAN_ROWS`` rounded up. Since pricing is compiled
    (``tfpack/packing/_kernels.c``), only on tables above 2**27 cells: below,
    the LP over all lengths converges within the budget (bimodal L=2,048
    depth 16, 25.7 million cells: 8,926 packs on an LP bound of 8,925 in
    0.7 s; through `_quick` 8,948 on 8,884).

    *Rounding.* Flooring ``x`` leaves at most (basic columns) x (depth)
    sequences without a slot. Packs are then rounded up, most fractional
    first, where slots still needed hold enough of their tokens (a few
    thresholds are tried, the best plan kept); surplus slots serve shorter
    sequences; the rest go into free space by best fit (`_rounding`). If the
    best fit decreasing plan used to seed the LP has fewer packs, it is
    returned. With up to 2,048 lengths (a rounding costs milliseconds), every
    LP within a pack of the bound is also rounded during column generation,
    and the best such plan competes too: different LP solutions round
    differently. There, when the best plan is two or more packs above the
    bound, the final LP is also rounded by diving (`_diving.dive`: fix whole
    packs, re-solve the warm master on what they leave, repeat; a few
    milliseconds a step); the first dive that beats the plan competes with
    the other roundings (so no plan is worse than without dives). The rest's
    LP of full packs first dives too (1-3 packs fewer on the long histograms,
    +0.03-0.2 s). Only plans change: the bound and the LP are those of column
    generation.

    *Repair.* Rounding puts what the LP's whole packs leave into free space
    by best fit, in packs no LP priced. Where the tokens bind there is little
    free space, and in a plan of a few thousand packs on hundreds of rows that
    loss is a visible share: C headers at L=8,192 depth 4 (2,696 full windows
    beside 7,295 remainders over 3,006 lengths), 840 groups: the LP at 4,787.6
    when the time ends, its rounding 4,800 on the token bound 4,784 (0.2%
    allows 4,793). So a grouped plan where the tokens bind (`_plan_up`) with
    fewer than `_REPAIR_PACKS_PER_ROW` packs a row keeps `_REPAIR_SHARE` of
    its time from column generation for `_repair`: the LP's whole packs
    (`_rounding.cover`: spare slots serve shorter sequences, as in
    rounding), and a plan of their own (`_plan`: column generation and
    rounding on the histogram of what is left; best fit if the time ends
    first) for the ~600 sequences they leave: 4,789 there. It is one more
    candidate, so no plan is worse for it; the LP's shorter time is the cost,
    and with more packs a row (log-normal L=32,768 depth 16, 60; L=8,192
    depth 3, 138) that cost outweighed it (61,303 -> 61,307-61,316 packs;
    124,103 -> 124,122), so no repair there.

References:
    P. C. Gilmore, R. E. Gomory, "A linear programming approach to the
    cutting-stock problem", Operations Research 9 (1961).
    A. A. Farley, "A note on bounding a class of linear programming problems,
    including cutting stock problems", Operations Research 38 (1990).
    H. Ben Amor, J. Desrosiers, J. M. Valerio de Carvalho, "Dual-optimal
    inequalities for stabilized column generation", Operations Research 54 (2006).
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import scipy.sparse

from tfpack.packing.algorithms import (_best_fit, _bounds, _budget, _diving, _exact_fill,
                                       _fit_decreasing, _groups, _knapsack, _lp, _pairs,
                                       _rounding, base)

__all__ = ["pack"]

_MAX_ROUNDS = 200  # column generation rounds; the bound is valid at any round
_ROW_ROUNDS = 100_000  # and at most this many rounds x lengths (a round costs ~ lengths)
_LP_GAP = 1e-4  # stop when the LP value is this close (relative) to the bound: 0.01 pp
_SEED_DEPTH_WEIGHTS = (0.1, 0.0, 0.2, 0.3)  # see `_column_generation`
_SEED_COLUMNS = 1024  # first-LP pricing sets: as many as keep them under this many columns
_GOOD_ENOUGH = 1e-5  # skip the LP when best fit is this close (relative) to the token bound
_COLUMNS_PER_ROUND = 64  # candidate packs per round (one per longest length), or n / 8 if more
# Round a pack up when slots still needed hold this share of its tokens; one
# rounding per value, the best kept (0.6 was best or tied on every histogram tried).
_ROUND_UP_FILLS = (1.0, 0.8, 0.6)
_MANY_LENGTHS = 2048  # from this many lengths, full packs first (`_full_packs_first`)
# Full packs first gives up when more tokens than this are left: the rest's LP
# would be slow, its plan poor (1.8-2.4% left where it succeeds, 9-23% where not).
_REST_SHARE = 0.04
_ROUNDING_PACKS = 2  # rounding an LP solution loses about this many packs; see `_slack`
# The rest's LP stops this share of `_slack` above its token bound: its rounding
# loses a few packs more (docs300k d16: gap 10 at a quarter, 6 here, ~1.5x the time).
_REST_LP_SLACK = 1 / 16
# The rest's LP runs on at most about this many lengths: more are rounded up
# within groups of neighbours (`_groups`), a few tokens lost a sequence.
_REST_ROWS = 256
_IMPROVES = 1e-9  # a pack improves the LP if worth more than 1 + this
_BOUND_MARGIN = 1e-9  # relative margin when rounding the LP bound up to an integer
_DUAL_BITS = 40  # pricing sees the duals rounded up to multiples of 2**-40 (`_plateaus`)
_SEED_TOKENS = 4096  # seed pricing on lengths rounded up to fit a table this wide
_SMOOTHING = 0.5  # price at this mix of the best duals so far and the LP's (Wentges)
_EARLY_ROWS = 2048  # round every LP within a pack of the bound, up to this many lengths
_EARLY_FILL = 0.6  # with this round-up fill (see `_rounding.round_lp`)
# Up to _EARLY_ROWS lengths, dive (`_diving.dive`) with these in turn until a dive
# gives a better plan, when the plan is at least _DIVE_GAP packs above the bound.
_DIVE_UP_FROM = (0.6, 0.9)
_DIVE_GAP = 2
# Where the tokens bind, with more than _QUICK_PLAN_ROWS lengths (fewer than
# _GROUPED_LENGTHS) and a pricing table over _SLOW_TABLE cells (`_quick`): with
# _QUICK_PLAN_SHARE of the budget, an LP bound on _QUICK_ROWS balanced groups
# rounded down (_QUICK_SHARE of that), then a plan on _QUICK_PLAN_ROWS rounded up.
_QUICK_ROWS = 128
_SLOW_TABLE = 2 ** 27  # cells (lengths x (depth + 1) x (L + 1)); 2**24 before the compiled pricing
_QUICK_SHARE = 0.5
_QUICK_PLAN_ROWS = 200
_QUICK_PLAN_SHARE = 0.9
_FFD_LENGTHS = 2048  # first fit decreasing competes up to this many lengths (O(L x groups))
_FULL_FIRST_SHARE = 0.4  # of the time limit, for full packs first
# and only below this max_length: from L=32,768 its greedy (Python, a scan of up to L
# lengths a join) ran 0.65-1.8 s to give up on the 5 suite cases there (seeds 0-1), and
# never succeeded; with its 0.4 s share cut off, it only took that time from the plan.
_FULL_FIRST_BELOW = 16384
_GROUPED_LENGTHS = 1024  # from this many lengths, length groups (`_grouped`) first
_GROUPED_SHARE = 0.85  # of the time left, for them
# Of the time left, for them where the tokens bind and there are _MANY_LENGTHS or more
# (the plan alone runs there): 0.85 x 0.8 before (with the rounded-down LP after it).
_TOKENS_GROUPED_SHARE = 0.97
_REFINE_LEFT = 0.2  # seconds left, at least, for a plan on twice the groups (`_refine`)
# Groups of the plan where the tokens bind: 896 did better than 768 on every such suite case
# once pricing was compiled (log-normal L=8,192 depth 3: 124,162 -> 124,140; 640: 124,176).
_BALANCED_ROWS = 896
_REPAIR_SHARE = 0.15  # of a grouped plan's time (`_plan_up`), kept for `_repair`
# where it has fewer packs than this a row. Rounding loses about a pack per 70 rows (C
# headers, L=8,192 depth 4: 12 on 840), so below 32 packs a row more than a quarter of
# the 0.2% target: there the repair pays for the LP's shorter time. With more, the LP's
# time counts more (log-normal L=32,768 depth 16, 60 a row: 61,303 packs without a
# repair, 61,307-61,316 with it; L=8,192 depth 3, 138 a row: 124,103 and 124,122).
_REPAIR_PACKS_PER_ROW = 32
_BALANCED_ENDS = 16  # exact shortest and longest lengths of `_groups.balanced` groups
_PROVE_GAP = 1e-3  # below _MANY_LENGTHS, no grouped plan this far above the bound
_GROUP_ROWS = 512  # lengths (groups) of their LPs at most
_TABLE_CELLS = 2 ** 27  # and pricing's table (rows x (depth + 1) x (L + 1)) at most
_UNIT_ROWS = 1024  # rows in units of tokens (`_in_units`): pricing stays cheap
_UNITS_FROM = 16384  # max lengths from which groups are in units (or where the table is too big)
_GRID_LOSS = 2e-3  # rounding up to the unit loses more (of the token bound's tokens): `_fine_grid`
_FINE_ROWS = 4096  # the finer grid's unit: max_length / this tokens
# The LP over all lengths, after the other paths, is skipped with less time left than
# _LAST_LP_SECONDS where there are more than _LAST_LP_LENGTHS lengths: its seeds and
# first solve ran to their end past the budget (L=65,536 log-normal depth 4: started
# 0.01 s before the end of 1 s, ended at 2.0 s with no better plan; 0.07 s before: 1.7
# s). With fewer (log-normal L=2,048, 1,995 lengths) it improves the plan in that time.
# Once the other paths were compiled and faster, it started with 0.3-0.7 s left on the
# nine suite cases above 8,192 lengths and never improved a plan there (it is stopped by
# the budget now): 1 s, so the default budget never starts it (uniform L=32,768 depth 2:
# 1.02 -> 0.25 s CPU, windows L=32,768: 1.06 -> 0.43 s, same plans).
_LAST_LP_SECONDS = 1.0
_LAST_LP_LENGTHS = 4 * _MANY_LENGTHS


@base.register("optimal", time_limit=True)
def pack(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *,
         seed: int, time_limit: float | None = None) -> base.AlgorithmResult:
    """Near-optimal packing strategies for ``histogram`` and a proven lower bound.

    Args:
        histogram: int64 ``[max_length]``, ``histogram[i]`` sequences of length
            ``i + 1``; validated by the caller, not all zero.
        max_length: tokens per pack.
        max_sequences_per_pack: sequences per pack, or ``None`` for no limit.
        seed: unused; the algorithm is deterministic (without a time limit).
        time_limit: seconds (CPU time of this process, `_budget`) from the
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
    search = _Search(_bounds.simple(histogram, max_length, max_sequences_per_pack))
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
    if len(lengths) <= _FFD_LENGTHS:
        search.offer(_fit_decreasing.packs(histogram, max_length, max_sequences_per_pack,
                                           best_fit=False))
    try:
        # The result (strategies sorted, counts) and the caller's checks of it come after
        # the budget, each a pass over the plan's packs like best fit: their time is kept.
        _search(search, histogram, lengths, demand, max_length, max_sequences_per_pack,
                budget.less(search.reserve))
    except _budget.OutOfTime:
        pass  # the best plan and bound so far stand
    return search.result()


def _search(search: _Search, histogram, lengths, demand, max_length, max_sequences_per_pack,
            budget: _budget.Budget) -> None:
    """The paths of the module notes, each offering its plans and bounds to ``search``."""
    if search.done():
        return
    simple = search.bound
    tokens_bound = search.bounds["tokens"]
    if len(lengths) >= _MANY_LENGTHS and simple == tokens_bound and \
            max_length < _FULL_FIRST_BELOW:
        full_first = _full_packs_first(histogram, max_length, max_sequences_per_pack, simple,
                                       budget.share(_FULL_FIRST_SHARE), heuristic=search.bfd)
        if full_first is not None:
            search.offer(full_first)
            if search.packs <= simple + _slack(simple):
                return  # the LP over all lengths could not do better
    cells = len(lengths) * ((max_sequences_per_pack or 1) + 1) * (max_length + 1)
    if _QUICK_PLAN_ROWS < len(lengths) < _GROUPED_LENGTHS and cells > _SLOW_TABLE and \
            tokens_bound >= search.bounds.get("sequences", 0):
        _quick(search, histogram, max_length, max_sequences_per_pack,
               budget.share(_QUICK_PLAN_SHARE))
        if search.within(_slack(search.bound)):
            return
    if len(lengths) >= _GROUPED_LENGTHS:  # plan on length groups: a bound and a plan
        # Where the tokens bind among thousands of lengths, the grouped plan is the
        # plan (the LP over all lengths cannot converge in the time): nearly all of it.
        share = _TOKENS_GROUPED_SHARE if len(lengths) >= _MANY_LENGTHS and \
            tokens_bound >= search.bounds.get("sequences", 0) else _GROUPED_SHARE
        _grouped(search, histogram, max_length, max_sequences_per_pack, budget.share(share))
        if search.within(_slack(search.bound)):
            return
    if budget.expired() or budget.left() < _LAST_LP_SECONDS and len(lengths) > _LAST_LP_LENGTHS:
        return  # its first round's seeds and solve would not end in the time left
    packs, bound = _plan(lengths, demand, max_length, max_sequences_per_pack, search.bound,
                         heuristic=search.bfd, others=[search.plan], budget=budget)
    search.offer(packs, ties=True)  # the LP's plan, as without the other paths
    search.prove(bound, "lp")


def _quick(search: _Search, histogram, max_length, max_sequences_per_pack,
           budget: _budget.Budget) -> None:
    """A bound and a plan on balanced groups, where the LP over all lengths is slow.

    Where pricing's table is large, column generation over all lengths takes
    seconds to raise Farley's bound above the token bound, even where the LP
    is far above it (bimodal, L=2,048, depth 16: LP 8,925, tokens 8,467; 1.7 s
    of CPU), and its plan is poor until then. Rounded down within
    `_QUICK_ROWS` `_groups.balanced` groups (a relaxation: any pack stays a
    pack), the LP converges in a fraction of the time (there: 8,883 with 128
    groups, 0.2 s), with `_QUICK_SHARE` of ``budget`` (its first round not
    exempt, `_column_generation`); then a plan on `_QUICK_PLAN_ROWS` groups
    rounded up (8,948 with 200 groups, 0.4 s) with what is left.
    """
    for up, rows, share in ((False, _QUICK_ROWS, _QUICK_SHARE), (True, _QUICK_PLAN_ROWS, 1.0)):
        starts = _groups.balanced(histogram, rows, ends=_BALANCED_ENDS if up else 0, up=up)
        rounded = _groups.rounded(histogram, starts, up=up)
        lengths = np.flatnonzero(rounded) + 1
        simple = max(_bounds.simple(rounded, max_length, max_sequences_per_pack).values())
        if up and simple >= search.packs:
            return  # rounding up costs more packs than the best plan has
        packs, bound = _plan(lengths, rounded[lengths - 1], max_length, max_sequences_per_pack,
                             simple, dives=up, first_round=up, budget=budget.share(share))
        if up:
            plan = _result(packs, 0)
            search.offer(_groups.real_packs(plan.strategies, plan.counts, histogram, starts))
        else:
            search.prove(bound, "lp")
            if search.within(_slack(search.bound)):
                return


class _Search:
    """The best plan found and the best bounds proven so far, by kind (`_bounds`)."""

    def __init__(self, bounds: dict[str, int]) -> None:
        self.bounds = dict(bounds)
        self.plan: dict[tuple[int, ...], int] = {}
        self.packs = math.inf
        self.bfd: dict[tuple[int, ...], int] | None = None  # best fit decreasing's plan
        # CPU seconds a grouped plan leaves for what follows its LP (`_plan_up`).
        self.reserve = 0.0

    @property
    def bound(self) -> int:
        return max(self.bounds.values())

    def offer(self, packs: dict[tuple[int, ...], int] | None, *, ties: bool = False) -> None:
        """Keep ``packs`` if it has fewer packs (or as many, with ``ties``)."""
        if packs is not None and (sum(packs.values()) < self.packs
                                  or ties and sum(packs.values()) == self.packs):
            self.plan, self.packs = packs, sum(packs.values())

    def prove(self, bound: int, kind: str) -> None:
        self.bounds[kind] = max(self.bounds.get(kind, 0), int(bound))

    def within(self, slack: float) -> bool:
        return self.packs <= self.bound + slack

    def done(self) -> bool:
        return self.packs <= self.bound

    def result(self) -> base.AlgorithmResult:
        bound, kind = _bounds.strongest(self.bounds)
        result = _result(self.plan, bound)
        return dataclasses.replace(result, lower_bound_kind=kind)


def _simple_bound(lengths, demand, max_length, max_sequences_per_pack) -> int:
    """``ceil(tokens / max_length)``, and ``ceil(sequences / max_sequences_per_pack)``."""
    simple = -(-int(lengths @ demand) // max_length)
    if max_sequences_per_pack is not None:
        simple = max(simple, -(-int(demand.sum()) // max_sequences_per_pack))
    return simple


def _slack(simple: int) -> float:
    """Packs above ``simple`` that a plan may have without the LP over all lengths."""
    return max(_LP_GAP * simple, _ROUNDING_PACKS)


def _plan(lengths, demand, max_length, max_sequences_per_pack, simple, *, stop_at=0.0,
          smooth=_SMOOTHING, others=(), dives=True, heuristic=None, first_round=True,
          repair=0.0,
          budget: _budget.Budget | None = None) -> tuple[dict[tuple[int, ...], int], int]:
    """Column generation and rounding: the best plan found and the proven bound.

    ``stop_at``: column generation may stop once the LP value is this low.
    ``smooth``: the pricing mix of `_column_generation` (0: the LP duals only).
    ``others``: more candidate plans; the one with fewest packs is returned.
    ``dives``: also round by diving (`_dive`), up to _EARLY_ROWS lengths.
    ``heuristic``: a best fit plan (computed here if not given), to seed the LP.
    ``first_round``: column generation's first round may run past ``budget``
    (`_column_generation`); ``False``: it stops there too.
    ``repair``: column generation gets this share less of ``budget``, kept
    for `_repair` (the LP rounded down, what that leaves planned on its own).
    ``budget``: column generation stops when it ends, with its last LP (or,
    before the first LP is solved, the best fit plan and ``simple``); one
    rounding is always made, the others only within the budget.
    """
    budget = budget or _budget.Budget(None)
    if heuristic is None:
        counts = dict(zip(lengths.tolist(), demand.tolist()))
        heuristic = _best_fit.fill(counts, {}, max_length, max_sequences_per_pack)
    if sum(heuristic.values()) <= simple * (1 + _GOOD_ENOUGH):
        return heuristic, simple  # no LP can say much more
    try:
        lp = _column_generation(lengths, demand, max_length, max_sequences_per_pack, heuristic,
                                simple, stop_at=stop_at, smooth=smooth,
                                budget=budget.share(1.0 - repair) if repair else budget,
                                first_round=first_round)
    except _budget.OutOfTime:  # before the first LP: no columns to round
        return _fewest([heuristic, *[o for o in others if o]]), simple

    def rounding(fill):
        return _rounding.round_lp(lp.patterns, lp.x, lengths, demand, max_length,
                                 max_sequences_per_pack, fill)

    # Column generation may have rounded this LP at _EARLY_FILL already.
    plans = ([] if lp.rounded else [rounding(_EARLY_FILL)]) + \
        [heuristic, *[o for o in others if o]] + ([lp.plan] if lp.plan else [])
    if repair and not budget.expired():
        plans.append(_repair(lp, lengths, demand, max_length, max_sequences_per_pack, budget))
    best = _fewest(plans)
    if dives and len(lengths) <= _EARLY_ROWS and lp.master is not None and \
            lp.master.incremental and not budget.expired():
        dived = _dive(lp, lengths, demand, max_length, max_sequences_per_pack,
                      sum(best.values()), budget)
        if dived is not None:
            best = dived
    rest = [rounding(fill) for fill in _ROUND_UP_FILLS
            if fill != _EARLY_FILL and not budget.expired()]
    return _fewest(rest + [best]), lp.lower_bound


def _repair(lp: _LP, lengths, demand, max_length, max_sequences_per_pack,
            budget: _budget.Budget) -> dict[tuple[int, ...], int]:
    """The LP's whole packs, and a plan of their own for the sequences they leave.

    Rounding (`_rounding.round_lp`) puts what the LP's packs rounded down
    leave into free space by best fit, packs the LP never priced: where the
    tokens bind there is little free space, and those few hundred sequences
    cost packs (C headers, L=8,192 depth 4, 840 groups: the LP 4,787.6, its
    rounding 4,800). Here they get a plan of their own (`_plan`: column
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
    simple = _simple_bound(rest, need, max_length, max_sequences_per_pack)
    plan, _ = _plan(rest, need, max_length, max_sequences_per_pack, simple, first_round=False,
                    budget=budget)
    for pack, number in plan.items():
        packs[pack] = packs.get(pack, 0) + number
    return packs


def _full_packs_first(histogram, max_length, max_sequences_per_pack, simple,
                      budget: _budget.Budget | None = None,
                      heuristic=None) -> dict[tuple[int, ...], int] | None:
    """Full packs by `_exact_fill`, the rest planned by the LP; ``None`` if much is left.

    Full packs have no waste, so the plan is as far from the token bound as
    the rest's plan is from the rest's tokens: its LP stops well within
    ``_slack`` (``_REST_LP_SLACK`` of it), leaving room for rounding. With
    more than ``_REST_ROWS`` lengths, it runs on them rounded up within
    groups (`_groups`), and the real sequences take the slots. Best fit
    alone is returned when it is within ``_GOOD_ENOUGH`` (as in `_plan`). Only its
    value matters (the bound is the token bound), so its pricing is not
    smoothed: smoothing helps the bound, and slows the value (80 rounds
    instead of 26 on docs300k d16).
    """
    lengths = np.flatnonzero(histogram) + 1
    if heuristic is None:
        heuristic = _best_fit.fill(dict(zip(lengths.tolist(), histogram[lengths - 1].tolist())),
                                   {}, max_length, max_sequences_per_pack)
    if sum(heuristic.values()) <= simple * (1 + _GOOD_ENOUGH):
        return heuristic  # as `_plan` does
    tokens = np.arange(1, max_length + 1)
    most_left = (int(_REST_SHARE * (tokens @ histogram)), _MANY_LENGTHS // 2)
    try:
        packs, rest = _exact_fill.fill(histogram, max_length, max_sequences_per_pack, budget,
                                       most_left=most_left)
    except (_budget.OutOfTime, _exact_fill.TooMuchLeft):
        return None
    lengths = np.flatnonzero(rest) + 1
    if len(lengths) > most_left[1] or tokens @ rest > most_left[0]:
        return None  # what the greedy leaves at the end (shortest lengths) counts too
    if len(lengths):
        starts = _groups.groups(max_length, ends=0, width=-(-len(lengths) // _REST_ROWS))
        rounded = _groups.rounded(rest, starts, up=True)
        lengths = np.flatnonzero(rounded) + 1
        demand = rounded[lengths - 1]
        rest_simple = _simple_bound(lengths, demand, max_length, max_sequences_per_pack)
        stop_at = rest_simple + _REST_LP_SLACK * _slack(simple)
        rest_plan = _result(*_plan(lengths, demand, max_length, max_sequences_per_pack,
                                   rest_simple, stop_at=stop_at, smooth=0.0, budget=budget))
        for pack, number in _groups.real_packs(rest_plan.strategies, rest_plan.counts, rest,
                                               starts).items():
            packs[pack] = packs.get(pack, 0) + number
    return packs


def _grouped(search: _Search, histogram, max_length, max_sequences_per_pack,
             budget: _budget.Budget) -> None:
    """A bound and a plan from length groups (`_groups`), offered to ``search``.

    Bounded on the rounded-down histogram (first: the bound is what the rest
    of the search is measured against), planned on the rounded-up one, each
    with half of ``budget``; each has at most about `_GROUP_ROWS` lengths, so
    both together take a fraction of the LP over all lengths. Rounding costs
    each pack about (depth x width / 2) tokens, so groups are as narrow as the
    rows allow. From L=16,384 (or where pricing's table, rows x depth x
    ``max_length``, would pass `_TABLE_CELLS`), when a width ``w`` divides
    ``max_length``, the groups are multiples of ``w`` and the problem is
    solved in units of ``w`` tokens (`_in_units`): pricing's table shrinks
    ``w`` times, so 1,024 rows cost less at L=65,536 than 128 did (gaps
    0.9% -> 0.1-0.3% on the suite's L=32,768-65,536 log-normals). Otherwise
    groups keep lengths near the ends exact (short ones fill the last gaps;
    at L=8,192 depth 3 that plan is 0.4 pp closer than one in units).
    """
    depth = max_sequences_per_pack or 1
    tokens_bind = search.bounds["tokens"] >= search.bounds.get("sequences", 0)
    # Below `_MANY_LENGTHS`, the LP over all lengths runs within the budget (and rounds
    # early, `_EARLY_ROWS`): the grouped plan only takes its time where it can be close.
    few_lengths = np.count_nonzero(histogram) < _MANY_LENGTHS
    rows = _TABLE_CELLS // ((depth + 1) * (max_length + 1))
    unit = _unit(max_length, max_length // _UNIT_ROWS) \
        if max_length >= _UNITS_FROM or rows < _GROUP_ROWS else 1
    if unit > 1:
        starts = down_starts = np.arange(1, max_length + 1, unit)
        if tokens_bind:
            unit, starts = _fine_grid(histogram, unit, starts, search.bounds["tokens"], depth)
    else:
        rows = max(64, min(_GROUP_ROWS, rows))
        ends = min(_groups.EXACT_ENDS, rows // 4)
        width = max(_groups.WIDTH, -(-(max_length - 2 * ends) // max(1, rows - 2 * ends)))
        down_starts = starts = _groups.groups(max_length, ends=ends, width=width)
        if tokens_bind:
            # Rounding up costs packs there: the plan's groups follow the
            # sequences (`_groups.balanced`), more of them (its LP goes first).
            table_rows = _TABLE_CELLS // ((depth + 1) * (max_length + 1))
            plan_rows = max(64, min(_BALANCED_ROWS, table_rows))
            ends = min(_BALANCED_ENDS, plan_rows // 4)
            starts = _groups.balanced(histogram, plan_rows - 2 * ends, ends=ends)
    # Where the depth binds, the bound first: the rest of the search is measured
    # against it. Where the tokens bind, only the plan: the rounded-down LP's
    # bound was never above the simple ones there (on the suite, branches
    # planner2-planner3), and the plan gains from its time (module notes).
    order = ((True, 1.0),) if tokens_bind else ((False, 0.5), (True, 1.0))
    for up, share in order:
        rounded = _groups.rounded(histogram, starts if up else down_starts, up=up)
        if unit > 1:
            rounded, length = _in_units(rounded, unit, up=up), max_length // unit
        else:
            length = max_length
        lengths = np.flatnonzero(rounded) + 1
        if not len(lengths):
            continue  # every sequence shorter than a unit: no bound from here
        demand = rounded[lengths - 1]
        simple = max(_bounds.simple(rounded, length, max_sequences_per_pack).values())
        if up and simple >= search.packs:
            continue  # rounding up costs more packs than the best plan has: no better plan
        if up and few_lengths and simple > search.bound * (1 + _PROVE_GAP):
            continue  # rounding up costs more than the LP over all lengths tends to lose
        if up:
            _plan_up(search, histogram, lengths, demand, length, max_sequences_per_pack, simple,
                     starts, unit, budget.share(share))
            continue
        _, bound = _plan(lengths, demand, length, max_sequences_per_pack, simple, dives=False,
                         budget=budget.share(share), first_round=not tokens_bind)
        search.prove(bound, "lp")  # a relaxation: its bound bounds the real problem
    if tokens_bind and not few_lengths:
        _refine(search, histogram, max_length, max_sequences_per_pack, starts, unit, budget)


def _refine(search: _Search, histogram, max_length, max_sequences_per_pack, starts, unit,
            budget: _budget.Budget) -> None:
    """Plans on twice the groups while the last one converged with time left.

    Where the tokens bind, what rounding up within groups loses is most of
    the gap, and a plan on a few hundred groups often converges in a
    fraction of the budget (bimodal L=8,192 depth 32, 496 groups: 0.24 s,
    5,610 packs; 1,792 groups: 5,604, within 0.2%). So while more than
    `_REFINE_LEFT` of the budget is left and the plan is not within
    ``_slack``, the groups are split in two (balanced again, or half the
    unit of tokens) and planned again on the time left; each plan is one
    more candidate.
    """
    ends = min(_BALANCED_ENDS, len(starts) // 4)
    while budget.left() > _REFINE_LEFT and not search.within(_slack(search.bound)):
        if unit > 1 and len(starts) < max_length // unit:  # balanced on a grid: twice the rows
            finer = _on_grid(histogram, unit, 2 * len(starts))
            if len(finer) <= len(starts):
                return  # a group for each length of the grid already
            starts = finer
        elif unit > 1:
            if unit % 2:
                return
            unit //= 2
            starts = np.arange(1, max_length + 1, unit)
        else:
            rows = 2 * len(starts)
            if rows >= np.count_nonzero(histogram):
                return
            starts = _groups.balanced(histogram, rows - 2 * ends, ends=ends)
        rounded = _groups.rounded(histogram, starts, up=True)
        length = max_length
        if unit > 1:
            rounded, length = _in_units(rounded, unit, up=True), max_length // unit
        lengths = np.flatnonzero(rounded) + 1
        simple = max(_bounds.simple(rounded, length, max_sequences_per_pack).values())
        if simple >= search.packs:
            return  # rounding up costs more packs than the best plan has
        _plan_up(search, histogram, lengths, rounded[lengths - 1], length, max_sequences_per_pack,
                 simple, starts, unit, budget, first_round=False)


def _plan_up(search: _Search, histogram, lengths, demand, length, max_sequences_per_pack, simple,
             starts, unit, budget: _budget.Budget, first_round=True) -> None:
    """The plan on rounded-up groups (in ``unit`` tokens), its real packs offered to ``search``.

    What follows the LP (its last rounding, `_groups.real_packs`: 0.05 s at
    L=65,536) runs after the budget ends; the LP gets ``budget`` less
    ``search.reserve`` seconds for it, best fit's time at first, then the
    most a plan ran past its own budget (spikes L=65,536 depth 24 ended at
    1.13 s of a second without it).
    """
    inner = budget.less(search.reserve)
    repair = _REPAIR_SHARE if simple < _REPAIR_PACKS_PER_ROW * len(lengths) else 0.0
    packs, _ = _plan(lengths, demand, length, max_sequences_per_pack, simple, budget=inner,
                     first_round=first_round, repair=repair)
    if packs:
        plan = _result(packs, 0)
        strategies = [tuple(unit * v for v in strategy) for strategy in plan.strategies]
        search.offer(_groups.real_packs(strategies, plan.counts, histogram, starts))
    search.reserve = max(search.reserve, inner.past())


def _fine_grid(histogram, unit, starts, tokens_bound, depth):
    """The unit and groups of the plan where the tokens bind: ``unit`` unless it loses too much.

    Rounding every length up to a multiple of ``unit`` costs tokens that no
    plan on it gets back. Past `_GRID_LOSS` of the token bound's tokens
    (log-normal L=32,768 depth 16: 0.35% in units of 32, so no plan within
    0.2%), the plan is made on `_UNIT_ROWS` balanced groups (`_on_grid`) on
    a grid of ``max_length / _FINE_ROWS`` tokens (8 there: 0.13%; 61,422 ->
    61,301 packs on a bound of 61,207), where pricing's table stays within
    `_TABLE_CELLS`. Elsewhere ``unit`` stays: the finer table is slower, and
    with the 4x wider table at depth 32 (bimodal L=8,192, suite seed 1:
    5,604 packs in units of 8 then 4 by `_refine`, 5,606-5,608 on grids of 2
    or 4), or on a grid that loses little already (spikes L=32,768: 14,973
    in units of 32, 15,040 on the finer grid), it did worse.
    """
    max_length = len(histogram)
    fine = _unit(max_length, max_length // _FINE_ROWS)
    cells = _UNIT_ROWS * (depth + 1) * (max_length // fine + 1)
    # float64: tokens lost may pass 2**63 where the tokens do not (2**59 ones, units of 32)
    loss = (-np.arange(1, max_length + 1) % unit).astype(np.float64) @ histogram
    if fine >= unit or cells > _TABLE_CELLS or loss <= _GRID_LOSS * tokens_bound * max_length:
        return unit, starts
    return fine, _on_grid(histogram, fine, _UNIT_ROWS)


def _on_grid(histogram, unit, rows):
    """About ``rows`` balanced groups (`_groups.balanced`) whose first lengths are ``k unit + 1``.

    Each group ends at a multiple of ``unit``, so rounding up within groups
    gives lengths in units (`_in_units`). Nine 4s and a 12, in units of 4:
    groups 1-4 and 5-12, both keep their lengths.

    >>> _on_grid(np.array([0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1]), 4, 2).tolist()
    [1, 5]
    """
    grid = np.arange(1, len(histogram) + 1, unit)
    in_units = _in_units(_groups.rounded(histogram, grid, up=True), unit, up=True)
    ends = min(_BALANCED_ENDS, rows // 4)
    return (_groups.balanced(in_units, rows - 2 * ends, ends=ends) - 1) * unit + 1


def _unit(max_length: int, most: int) -> int:
    """The largest divisor of ``max_length`` up to ``most`` (1 if none is larger)."""
    return max((d for d in range(1, max(1, most) + 1) if max_length % d == 0), default=1)


def _in_units(rounded: np.ndarray, unit: int, *, up: bool) -> np.ndarray:
    """A histogram rounded to multiples of ``unit`` (`_groups.rounded`), in those units.

    Up, every length is a multiple of ``unit`` already. Down, lengths are group
    starts ``k unit + 1``: in units, ``k`` (at most ``unit`` tokens less), and
    sequences shorter than a unit are dropped: fewer sequences need no more
    packs, so the bound stays valid.

    >>> _in_units(np.array([0, 0, 0, 2, 0, 0, 0, 1]), 4, up=True).tolist()
    [2, 1]
    >>> _in_units(np.array([3, 0, 0, 0, 2, 0, 0, 0]), 4, up=False).tolist()
    [2, 0]
    """
    if up:
        return rounded[unit - 1:: unit].copy()
    scaled = rounded[unit:: unit].copy()  # lengths unit + 1, 2 unit + 1, ...: k = 1, 2, ...
    return np.concatenate([scaled, np.zeros(len(rounded) // unit - len(scaled), dtype=np.int64)])


def _fewest(plans: list[dict[tuple[int, ...], int]]) -> dict[tuple[int, ...], int]:
    return min(plans, key=lambda packs: sum(packs.values()))  # first of equals


def _dive(lp: _LP, lengths, demand, max_length, max_sequences_per_pack,
          packs: int, budget: _budget.Budget) -> dict[tuple[int, ...], int] | None:
    """The first dive's plan with fewer than ``packs`` packs, if any.

    No dive when ``packs`` is within `_DIVE_GAP` of the bound: there dives
    rarely gained the last pack, and cost up to 0.15 s on 500 lengths.
    """
    if packs < lp.lower_bound + _DIVE_GAP:
        return None
    for up_from in _DIVE_UP_FROM:
        try:
            whole = _diving.dive(lp.master, lp.x, lp.value, at_most=packs, up_from=up_from,
                                 budget=budget)
        except RuntimeError:  # pragma: no cover - HiGHS not optimal on a feasible LP
            return None  # a dive only offers a plan; the others stand
        if whole is not None:
            plan = _rounding.settle(lp.patterns, whole, lengths, demand, max_length,
                           max_sequences_per_pack)
            if sum(plan.values()) < packs:
                return plan
    return None


def _result(packs: dict[tuple[int, ...], int], lower_bound: int) -> base.AlgorithmResult:
    strategies = sorted((p for p, c in packs.items() if c > 0 and p), reverse=True)
    counts = np.array([packs[p] for p in strategies], dtype=np.int64)
    return base.AlgorithmResult(strategies, counts, int(lower_bound))


@dataclasses.dataclass(frozen=True)
class _LP:
    patterns: list[tuple[np.ndarray, np.ndarray]]  # columns: (rows, copies)
    x: np.ndarray  # float64 [columns]: LP solution
    value: float  # LP objective of the last solve
    lower_bound: int  # proven bound on packs (see the module notes)
    rounds: int
    plan: dict[tuple[int, ...], int] | None = None  # the best rounding of an earlier LP
    master: _lp.Master | None = None  # solved last at ``x``, for `_diving.dive`
    rounded: bool = False  # ``plan`` includes this LP's rounding at _EARLY_FILL


def _column_generation(lengths, demand, max_length, max_sequences_per_pack, seed_packs, simple, *,
                       stop_at=0.0, smooth=_SMOOTHING, first_round=True,
                       budget: _budget.Budget | None = None) -> _LP:
    """Column generation (module notes) until it stops or ``budget`` ends.

    The first round (seeds, the first LP, its pricing) runs to its end,
    whatever the budget, where its cost is bounded (`_small`): a plan rounded
    from a first LP is far better than best fit alone (at depth 3 on
    Wikipedia-512: 0.1% above the bound instead of 11%). With
    ``first_round=False`` (an LP only for a bound, `_grouped`) it does not.

    Raises:
        OutOfTime: ``budget`` ended before the first LP was solved.
    """
    n = len(lengths)
    full_budget = budget
    if budget is not None and first_round and _small(n, max_sequences_per_pack, max_length):
        budget = None  # until the first round ends
    bounds = np.minimum(demand, max_length // lengths)
    if max_sequences_per_pack is not None:
        bounds = np.minimum(bounds, max_sequences_per_pack)
    depth = _knapsack.effective_depth(lengths, bounds, max_length, max_sequences_per_pack)

    # Dual-optimal inequalities: supply of length r + 1 may serve length r.
    shift = scipy.sparse.diags_array([np.ones(n - 1), -np.ones(n - 1)], offsets=[0, -1],
                                     shape=(n, n - 1))
    master = _lp.Master(demand, shift)
    seen: set[bytes] = set()

    def add(patterns) -> int:
        fresh = []
        for rows, copies in patterns:
            key = rows.tobytes() + b"/" + copies.tobytes()
            if key not in seen:
                seen.add(key)
                fresh.append((rows, copies))
        master.add(fresh)
        return len(fresh)

    # First columns: the best fit plan's packs and `_seed_patterns`.
    add(_columns(seed_packs, lengths))
    add(_seed_patterns(lengths, bounds, max_length, depth, budget))
    covered = np.zeros(n, dtype=bool)
    for rows, _ in master.columns:
        covered[rows] = True
    # As many copies of one length as fit, where nothing else holds it: the LP is feasible.
    add([(np.array([r]), bounds[r: r + 1]) for r in np.flatnonzero(~covered)])

    def farley(y, value):
        return math.fsum((demand * y).tolist()) / value if value > 0.0 else 0.0

    per_round = max(_COLUMNS_PER_ROUND, n // 8)
    best_bound, best_y, rounds = 0.0, None, 0
    plan, plan_packs = None, math.inf
    last = None
    while True:
        rounds += 1
        try:
            value, x, duals = master.solve(budget)
        except _budget.OutOfTime:
            if last is None:
                raise
            # The last LP solved, over the columns it had (the newer ones at zero).
            value, x = last
            x = np.concatenate([x, np.zeros(len(master.columns) - len(x))])
            return _LP(master.columns, x, value, max(simple, _ceil(best_bound)), rounds, plan,
                       None, False)
        last = value, x
        near = n <= _EARLY_ROWS and _ceil(value) <= max(simple, _ceil(best_bound)) + 1
        if near:
            # Within a pack of the bound: this LP's rounding may meet it already.
            rounded = _rounding.round_lp(master.columns, x, lengths, demand, max_length,
                                         max_sequences_per_pack, _EARLY_FILL)
            if sum(rounded.values()) < plan_packs:
                plan, plan_packs = rounded, sum(rounded.values())
        # Price at a mix of the LP duals and the duals of the best bound so far;
        # when no pack found there improves the LP (mispricing), at the LP duals.
        smoothing = smooth if best_y is not None else 0.0
        while True:
            y = duals if not smoothing else smoothing * best_y + (1 - smoothing) * duals
            try:
                pricing = _knapsack.price(lengths, bounds, _plateaus(y), max_length, depth,
                                          min_value=1.0 + _IMPROVES, max_patterns=per_round,
                                          budget=budget)
            except _budget.OutOfTime:
                pricing = None
                break
            if farley(y, pricing.best_value) > best_bound:
                best_bound = farley(y, pricing.best_value)
                best_y = y / pricing.best_value  # worth at most 1 in any pack
            fresh = [(rows, copies) for rows, copies in pricing.patterns
                     if copies @ duals[rows] > 1.0 + _IMPROVES]
            if fresh or not smoothing:
                break
            smoothing = 0.0
        lower_bound = max(simple, _ceil(best_bound))
        budget = full_budget
        if pricing is None:  # out of time while pricing: this LP is the last
            return _LP(master.columns, x, value, lower_bound, rounds, plan, master, near)
        done = (lower_bound >= min(_ceil(value), plan_packs) or value <= stop_at
                or (budget is not None and budget.expired())
                or (plan_packs <= _ceil(value) <= lower_bound + 1
                    and rounds * n >= _ROW_ROUNDS // 40)
                or (value - lower_bound <= _LP_GAP * lower_bound
                    and rounds * n >= _ROW_ROUNDS // 10)
                or rounds >= min(_MAX_ROUNDS, _ROW_ROUNDS // n))
        if done or not add(fresh):
            if best_y is not None and (budget is None or not budget.expired()) and \
                    _ceil(best_bound * (1 + _knapsack.OVERSTATES)) > lower_bound:
                # Float32 pricing overstates the best value by up to OVERSTATES,
                # which can cost the bound a pack: price those duals exactly.
                exact = _knapsack.price(lengths, bounds, _plateaus(best_y), max_length, depth,
                                        min_value=math.inf, max_patterns=0, exact=True)
                lower_bound = max(lower_bound, _ceil(farley(best_y, exact.best_value)))
            return _LP(master.columns, x, value, lower_bound, rounds, plan, master, near)


def _columns(packs, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packs (tuples of lengths, each in ``lengths``) as LP columns ``(rows, copies)``, rows ascending.

    One sort over all their sequences (a best fit plan has up to ~90,000 packs
    at L=65,536; `np.unique` a pack took ~0.8 s there).

    >>> [(r.tolist(), c.tolist()) for r, c in _columns([(5, 2, 2), (2,)], np.array([2, 5]))]
    [([0, 1], [2, 1]), ([0], [1])]
    """
    packs = list(packs)
    if not packs:
        return []
    sizes = np.fromiter(map(len, packs), dtype=np.int64, count=len(packs))
    flat = np.fromiter(itertools.chain.from_iterable(packs), dtype=np.int64,
                       count=int(sizes.sum()))
    rows = np.searchsorted(lengths, flat)
    pack = np.repeat(np.arange(len(packs)), sizes)
    order = np.lexsort((rows, pack))
    rows, pack = rows[order], pack[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (pack[1:] != pack[:-1])
    starts = np.flatnonzero(first)
    copies = np.diff(np.append(starts, len(rows)))
    rows, pack = rows[starts], pack[starts]
    bounds = np.searchsorted(pack, np.arange(len(packs) + 1)).tolist()
    return [(rows[a:b], copies[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def _small(n: int, max_sequences_per_pack: int | None, max_length: int) -> bool:
    """Whether a round of column generation has a bounded cost (rows, pricing's table)."""
    depth = max_sequences_per_pack or 1
    return n <= _GROUPED_LENGTHS and n * (depth + 1) * (max_length + 1) <= _TABLE_CELLS * 4


def _seed_patterns(lengths, bounds, max_length, depth,
                   budget=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packs for the first LP: the best for each longest length under affine values.

    A sequence is worth its share of tokens plus a share of the depth (the LP
    duals lie between these extremes). A cold LP solve grows with columns x
    rows, so with many lengths fewer of these sets. When there are several,
    lengths are rounded up to multiples of ``grain`` tokens, so that the
    pricing table is at most `_SEED_TOKENS` wide: ``grain * ceil(l / grain) >= l``,
    so the packs fit. (A single set, for thousands of lengths, stays exact: the
    first LP over them is the one that counts.)
    """
    weights = _SEED_DEPTH_WEIGHTS[: max(1, _SEED_COLUMNS // len(lengths))]
    grain = -(-max_length // _SEED_TOKENS) if len(weights) > 1 else 1
    coarse = -(-lengths // grain)
    per_item = 1.0 / (depth or max(1, max_length // int(lengths.min())))
    patterns = []
    for weight in weights:
        values = (1 - weight) * lengths / max_length + weight * per_item
        patterns += _knapsack.price(coarse, bounds, values, max_length // grain, depth,
                                    min_value=0.0, max_patterns=len(lengths),
                                    budget=budget).patterns
    return patterns


def _plateaus(duals: np.ndarray) -> np.ndarray:
    """Duals made non-decreasing and rounded up to multiples of ``2**-40``.

    The dual-optimal inequalities make the duals grow with length in plateaus
    of equal values, up to float noise; rounded up, equal values are equal and
    pricing skips most of a plateau (`_knapsack._dominated`). The values only
    grow, so the best pack under them is worth at least the best under the
    duals, and Farley's bound with it stays valid.
    """
    return np.ldexp(np.ceil(np.ldexp(np.maximum.accumulate(duals), _DUAL_BITS)), -_DUAL_BITS)


def _ceil(value: float) -> int:
    return math.ceil(value - _BOUND_MARGIN * max(1.0, abs(value)))
