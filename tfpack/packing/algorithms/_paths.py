"""`optimal`'s search and its paths on many lengths: length groups, full packs first, quick bound.

`Search` holds the best plan and the best bounds by kind. The paths here run
before the LP over all lengths where it is slow (thousands of lengths, or a
large pricing table): `full_packs_first` (packs of exactly ``max_length``
tokens, then an LP on what is left), `quick` (a bound on a few balanced groups
rounded down, then a plan rounded up), `grouped` (a bound on groups rounded
down, a plan on groups rounded up; `refine` plans on finer groups while time
is left). ``docs/packing.md`` ("How `optimal` works") says when each runs and why.

>>> import numpy as np
>>> search = Search({"tokens": 3, "long": 4})
>>> search.offer({(6, 2): 2, (5, 3): 1, (2,): 1})
>>> search.done(), search.result().lower_bound_kind
(True, 'long')
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tfpack.packing.algorithms import (_best_fit, _bounds, _budget, _exact_fill, _groups,
                                       _lift, _lp_plan, _units, base)
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["Search", "quick", "full_packs_first", "grouped", "prove_down", "prove_then_refine",
           "few", "finer_packs",
           "refine", "plan_up", "fine_grid", "on_grid"]


class Search:
    """The best plan found and the best bounds proven so far, by kind (`_bounds`)."""

    def __init__(self, bounds: dict[str, int]) -> None:
        self.bounds = dict(bounds)
        self.plan: dict[tuple[int, ...], int] = {}
        self.packs = math.inf
        self.bfd: dict[tuple[int, ...], int] | None = None  # best fit decreasing's plan
        # CPU seconds a grouped plan leaves for what follows its LP (`plan_up`).
        self.reserve = 0.0
        # The packs (in tokens) of the last grouped plan's LP solution, where `plan_up` keeps
        # them, or of the finest rounded-down LP (`grouped`): they seed the LP on finer groups
        # (`refine`) and the LP over all lengths (`optimal._search`).
        self.columns: list[tuple[int, ...]] = []
        self.lifted = 0  # the best bound from an LP's duals (`_lift`): a rounded-down LP's
        self.plan_lifted = 0  # or a grouped plan's (`plan_up`): this one
        self.lift_seconds = 0.0  # the CPU seconds of the last lift

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
        result = _lp_plan.result(self.plan, bound)
        return dataclasses.replace(result, lower_bound_kind=kind)


def quick(search: Search, histogram, max_length, max_sequences_per_pack,
          budget: _budget.Budget) -> None:
    """A bound and a plan on balanced groups, where the LP over all lengths is slow.

    Where pricing's table is large, column generation over all lengths takes
    seconds to raise Farley's bound above the token bound, even where the LP
    is far above it (bimodal, L=2,048, depth 16: LP 8,925, tokens 8,467; 1.7 s
    of CPU), and its plan is poor until then. Rounded down within
    `Tuning.QUICK_ROWS` `_groups.balanced` groups (a relaxation: any pack stays a
    pack), the LP converges in a fraction of the time (there: 8,883 with 128
    groups, 0.2 s), with `Tuning.QUICK_SHARE` of ``budget`` (its first round not
    exempt, `_column_generation.run`); then a plan on `Tuning.QUICK_PLAN_ROWS` groups
    rounded up (8,948 with 200 groups, 0.4 s) with what is left.
    """
    for up, rows, share in ((False, Tuning.QUICK_ROWS, Tuning.QUICK_SHARE),
                            (True, Tuning.QUICK_PLAN_ROWS, 1.0)):
        starts = _groups.balanced(histogram, rows, ends=Tuning.BALANCED_ENDS if up else 0, up=up)
        rounded = _groups.rounded(histogram, starts, up=up)
        lengths = np.flatnonzero(rounded) + 1
        simple = max(_bounds.simple(rounded, max_length, max_sequences_per_pack).values())
        if up and simple >= search.packs:
            return  # rounding up costs more packs than the best plan has
        packs, bound = _lp_plan.plan(lengths, rounded[lengths - 1], max_length,
                                     max_sequences_per_pack, simple, dives=up, first_round=up,
                                     budget=budget.share(share))
        if up:
            plan = _lp_plan.result(packs, 0)
            search.offer(_groups.real_packs(plan.strategies, plan.counts, histogram, starts))
        else:
            search.prove(bound, "lp")
            if search.within(_lp_plan.slack(search.bound)):
                return


def full_packs_first(histogram, max_length, max_sequences_per_pack, simple,
                     budget: _budget.Budget | None = None,
                     heuristic=None) -> dict[tuple[int, ...], int] | None:
    """Full packs by `_exact_fill`, the rest planned by the LP; ``None`` if much is left.

    Full packs have no waste, so the plan is as far from the token bound as
    the rest's plan is from the rest's tokens: its LP stops well within
    `_lp_plan.slack` (`Tuning.REST_LP_SLACK` of it), leaving room for
    rounding. With more than `Tuning.REST_ROWS` lengths, it runs on them
    rounded up within groups (`_groups`), and the real sequences take the
    slots. Best fit alone is returned when it is within `Tuning.GOOD_ENOUGH`
    (as in `_lp_plan.plan`). Only its value matters (the bound is the token
    bound), so its pricing is not smoothed: smoothing helps the bound, and
    slows the value (80 rounds instead of 26 on docs300k d16).
    """
    lengths = np.flatnonzero(histogram) + 1
    if heuristic is None:
        heuristic = _best_fit.fill(dict(zip(lengths.tolist(), histogram[lengths - 1].tolist())),
                                   {}, max_length, max_sequences_per_pack)
    if sum(heuristic.values()) <= simple * (1 + Tuning.GOOD_ENOUGH):
        return heuristic  # as `_lp_plan.plan` does
    tokens = np.arange(1, max_length + 1)
    most_left = (int(Tuning.REST_SHARE * (tokens @ histogram)), Tuning.MANY_LENGTHS // 2)
    try:
        packs, rest = _exact_fill.fill(histogram, max_length, max_sequences_per_pack, budget,
                                       most_left=most_left)
    except (_budget.OutOfTime, _exact_fill.TooMuchLeft):
        return None
    lengths = np.flatnonzero(rest) + 1
    if len(lengths) > most_left[1] or tokens @ rest > most_left[0]:
        return None  # what the greedy leaves at the end (shortest lengths) counts too
    if len(lengths):
        starts = _groups.groups(max_length, ends=0, width=-(-len(lengths) // Tuning.REST_ROWS))
        rounded = _groups.rounded(rest, starts, up=True)
        lengths = np.flatnonzero(rounded) + 1
        demand = rounded[lengths - 1]
        rest_simple = _lp_plan.simple_bound(lengths, demand, max_length, max_sequences_per_pack)
        stop_at = rest_simple + Tuning.REST_LP_SLACK * _lp_plan.slack(simple)
        rest_plan = _lp_plan.result(*_lp_plan.plan(
            lengths, demand, max_length, max_sequences_per_pack, rest_simple, stop_at=stop_at,
            smooth=0.0, budget=budget))
        for pack, number in _groups.real_packs(rest_plan.strategies, rest_plan.counts, rest,
                                               starts).items():
            packs[pack] = packs.get(pack, 0) + number
    return packs


def grouped(search: Search, histogram, max_length, max_sequences_per_pack,
            budget: _budget.Budget) -> None:
    """A bound and a plan from length groups (`_groups`), offered to ``search``.

    Bounded on the rounded-down histogram (first: the bound is what the rest
    of the search is measured against), planned on the rounded-up one, each
    with half of ``budget``; each has at most about `Tuning.GROUP_ROWS` lengths, so
    both together take a fraction of the LP over all lengths. Rounding costs
    each pack about (depth x width / 2) tokens, so groups are as narrow as the
    rows allow. From L=12,288 (`Tuning.UNITS_FROM`, or where pricing's table, rows x depth x
    ``max_length``, would pass `Tuning.TABLE_CELLS`), when a width ``w`` divides
    ``max_length``, the groups are multiples of ``w`` and the problem is
    solved in units of ``w`` tokens (`in_units`): pricing's table shrinks
    ``w`` times, so 1,024 rows cost less at L=65,536 than 128 did (gaps
    0.9% -> 0.1-0.3% on the suite's L=32,768-65,536 log-normals). Otherwise
    groups keep lengths near the ends exact (short ones fill the last gaps;
    at L=8,192 depth 3 that plan is 0.4 pp closer than one in units).
    """
    depth = max_sequences_per_pack or 1
    tokens_bound = search.bounds["tokens"]  # the rounded-down LP below it: `fine_grid`'s ``half``
    tokens_bind = tokens_bound >= search.bounds.get("sequences", 0)
    # Below `Tuning.MANY_LENGTHS`, the LP over all lengths runs within the budget (and rounds
    # early, `Tuning.EARLY_ROWS`): the grouped plan only takes its time where it can be close.
    # Not on long contexts where pricing's table is large (`Tuning.SLOW_TABLE`): there it does not.
    few_lengths = few(histogram, max_sequences_per_pack)
    rows = table_rows = Tuning.TABLE_CELLS // ((depth + 1) * (max_length + 1))
    unit = _units.divisor(max_length, max_length // Tuning.UNIT_ROWS) \
        if max_length >= Tuning.UNITS_FROM or rows < Tuning.GROUP_ROWS else 1
    if unit > 1:
        starts = down_starts = np.arange(1, max_length + 1, unit)
        if tokens_bind:
            unit, starts = fine_grid(histogram, unit, starts, search.bounds["tokens"], depth)
    else:
        rows = max(64, min(Tuning.GROUP_ROWS, rows))
        ends = min(_groups.EXACT_ENDS, rows // 4)
        width = max(_groups.WIDTH, -(-(max_length - 2 * ends) // max(1, rows - 2 * ends)))
        down_starts = starts = _groups.groups(max_length, ends=ends, width=width)
        if tokens_bind:
            # Rounding up costs packs there: the plan's groups follow the
            # sequences (`_groups.balanced`), more of them (its LP goes first).
            plan_rows = max(64, min(Tuning.BALANCED_ROWS, table_rows))
            ends = min(Tuning.BALANCED_ENDS, plan_rows // 4)
            starts = _groups.balanced(histogram, plan_rows - 2 * ends, ends=ends)
    # Where the depth binds, the bound first: the rest of the search is measured
    # against it. Where the tokens bind, only the plan: the rounded-down LP's
    # bound was never above the simple ones there (on the suite, branches
    # planner2-planner3), and the plan gains from its time (docs/packing.md).
    # Where the best plan is far above the simple bounds (`Tuning.PROVE_ABOVE`), they may be
    # what is loose (lengths just over L / 3 pair at most, which no simple bound sees): the
    # bound first there too, with less of the time (issue 35: the worst gap of
    # benchmarks/planners_long_context.py from 17.8% to under 1%).
    proving, planned, bounded = None, 0.0, 0.0
    order = ((True, 1.0),) if tokens_bind else ((False, 0.5), (True, 1.0))
    if tokens_bind:
        long = Tuning.LONG_CONTEXT_FROM <= max_length < Tuning.LONG_PROVE_BELOW
        above = Tuning.LONG_PROVE_ABOVE if long else Tuning.PROVE_ABOVE
        if search.packs > search.bound * (1 + above):
            # The bound on groups of the lengths present (`prove_down`), finer while time lasts;
            # on long contexts, where it stays below the token bound, its packs only seed the
            # plan's LP: a finer one sooner.
            proving = prove_down(search, histogram, max_length, max_sequences_per_pack, budget.share(
                Tuning.LONG_PROVE_SHARE if long else Tuning.PROVE_SHARE),
                seeding=Tuning.LONG_PROVE_GROWTH if long else None, lifts=budget if long else None)
            if unit > 1 and starts is down_starts and search.bounds.get("lp", 0) < tokens_bound:
                unit, starts = fine_grid(histogram, unit, starts, tokens_bound, depth, half=True)
            elif long and unit > 1 and len(starts) > Tuning.DEPTH_FINE_ROWS and (
                    search.bounds.get("lp", 0) > tokens_bound and
                    _bounds.windows_alone(histogram, max_sequences_per_pack) >= tokens_bound or
                    _bounds.slots_share(histogram, max_sequences_per_pack) >= Tuning.DEPTH_NEAR):
                starts = on_grid(histogram, unit, Tuning.DEPTH_FINE_ROWS)
    warm = proving is not None and not few_lengths  # `refine` follows: `prove_then_refine`
    if warm and (_bounds.strongest(search.bounds)[1] == "lp" or
                 max_length >= Tuning.LONG_CONTEXT_FROM):
        # Where that LP proved more than the simple bounds, or on long contexts, its packs
        # seed the plan's LP (each length shrunk to the longest rounded-up one up to it,
        # `finer_packs`): L=12,288 depth 16, 610 groups: 207,414 packs in 0.48 s of CPU; cold,
        # 207,900-208,184 cut at 0.7 s. (Elsewhere, as on 3 of `tests/packing/optimal_plans.py`'s
        # cases at L=2,048-8,192, the plan is made as before.)
        search.columns = list(proving[2])
        grid = _units.divisor(max_length, max_length // Tuning.UNIT_ROWS)
        if unit == 1 and grid > 1:  # and the plan on a grid of units: its duals prove a bound
            unit, starts = grid, np.arange(1, max_length + 1, grid)  # (`_lift`)
    for up, share in order:
        rounded = _groups.rounded(histogram, starts if up else down_starts, up=up)
        if unit > 1:
            rounded, length = _units.in_units(rounded, unit, up=up), max_length // unit
        else:
            length = max_length
        lengths = np.flatnonzero(rounded) + 1
        if not len(lengths):
            continue  # every sequence shorter than a unit: no bound from here
        demand = rounded[lengths - 1]
        simple = max(_bounds.simple(rounded, length, max_sequences_per_pack).values())
        if up and simple >= search.packs:
            continue  # rounding up costs more packs than the best plan has: no better plan
        if up and few_lengths and simple > search.bound * (1 + Tuning.PROVE_GAP):
            continue  # rounding up costs more than the LP over all lengths tends to lose
        if up:
            began = budget.spent() if warm else 0.0  # (a counting clock counts each call)
            plan_up(search, histogram, lengths, demand, length, max_sequences_per_pack, simple,
                    starts, unit, budget.share(share), warm=warm)
            planned = budget.spent() - began if warm else 0.0
            continue
        # Its first round runs to its end where its size is bounded (`_column_generation.small`):
        # cut by the budget, it proved nothing above the simple bounds on long contexts
        # (stretched L=16,384 depth 4: 5.69% below the plan, 0.13% with its first round).
        began = budget.spent()
        _, bound = _lp_plan.plan(lengths, demand, length, max_sequences_per_pack, simple,
                                 dives=False, budget=budget.share(share))
        search.prove(bound, "lp")  # a relaxation: its bound bounds the real problem
        bounded = budget.spent() - began  # `finer_units` times its finer LPs by it
    if warm:
        return prove_then_refine(search, histogram, max_length, max_sequences_per_pack, starts,
                                 unit, budget, proving, planned)
    if proving is not None:  # the plan made, its time left proves the plan (finer groups);
        # the finest LP's packs seed the LP over all lengths (`optimal._search`). Not where a
        # lift proved the best bound: finer LPs, below the LP, proved less (681/19, 1,821
        # lengths at L=12,288 depth 4: 210,454 lifted at 0.12 s, 210,427 by 0.85 s, the
        # grouped plan 0.298% above; that time to the LP over all lengths, 0.009%).
        search.columns = list(proving[2] if search.lifted >= search.bound else prove_down(
            search, histogram, max_length, max_sequences_per_pack, budget, *proving)[2])
    if tokens_bind and not few_lengths:
        refine(search, histogram, max_length, max_sequences_per_pack, starts, unit, budget)
    elif unit > 1 and not few_lengths:  # where the depth binds: the bound in finer units
        _units.finer_units(search, histogram, max_length, max_sequences_per_pack, unit, budget,
                           bounded)


def prove_then_refine(search: Search, histogram, max_length, max_sequences_per_pack, starts,
                      unit, budget: _budget.Budget, proving, planned: float) -> None:
    """Finer bounds and finer plans in turn, after the first of each (`grouped`).

    Where the bound is proven first (`prove_down`) among thousands of lengths,
    `Tuning.PROVE_BEFORE_REFINE` of the time left goes on with finer bounds,
    then `refine` plans on finer groups, each LP started from the last plan's
    packs (``warm``) and only with `Tuning.PROVE_GROWTH` times the last plan's
    time (``planned`` seconds at first) left; whatever they leave goes to the
    next bound, cut by the budget or not (Farley's bound holds at any round).
    Where an LP's duals proved the best bound already (`Search.lifted`), the
    finer rounded-down bounds, which approach the LP from below, come after the
    finer plans only, and the finer plans start with any time left (`refine`'s
    `Tuning.REFINE_LEFT`): the finer bounds after them proved less there, and a
    finer plan cut by the budget still gains (`planners_long_context.py --seed 3`,
    case 7, L=16,384 depth 16: 0.3 s left after a plan of 0.29 s; the bound 204,617
    lifted; 205,112 packs, 0.242%; planned on a finer grid, 204,949, 0.162%).
    On the long-context suite's L=16,384 depth 4 case, with the bound from
    the plans' duals (`plan_up`): 190,791 packs on 190,651 (0.073%); with all
    the time to the rounded-down bounds first, as before, 190,948 on 190,552
    (0.208%).
    """
    if search.lifted < search.bound:  # else the plan's duals proved more: finer plans first
        proving = prove_down(search, histogram, max_length, max_sequences_per_pack,
                             budget.share(Tuning.PROVE_BEFORE_REFINE), *proving)
    refine(search, histogram, max_length, max_sequences_per_pack, starts, unit, budget,
           warm=True, took=planned if search.lifted < search.bound else 0.0)
    prove_down(search, histogram, max_length, max_sequences_per_pack, budget, *proving,
               growth=0.0)


def prove_down(search: Search, histogram, max_length, max_sequences_per_pack,
               budget: _budget.Budget, rows: int = 0, took: float = 0.0, coarser=(),
               last=None, growth: float = Tuning.PROVE_GROWTH, seeding: float | None = None,
               lifts=None):
    """Bounds on `_groups.present` rounded down, finer groups while ``budget`` lasts.

    Where the tokens bind and the simple bounds are loose (stretched long
    contexts, documents of about L / 3: `Tuning.PROVE_ABOVE`), what the
    rounded-down LP loses is what rounding down lets fit: three sequences
    just over L / 3 rounded to a triple that fits. Groups of equal width over
    all of ``max_length`` (about 24 tokens at L=12,288 with 512 rows) leave
    most rows empty there, lengths spanning a third of L: over the lengths
    present, `Tuning.PROVE_ROWS` groups are 3-4x narrower, and their LP
    converges in a fraction of the time (stretched L=12,288 depth 16, lengths
    2,661-7,337: 224,920 -> 226,080 with 256 groups in 0.04 s of CPU, 226,469
    with 512 in 0.08 s, 226,662 with 1,024 in 0.25 s; the plan 226,973). Each
    LP's bound is Farley's, valid at any round (docs/packing.md, "A bound from
    length groups rounded down"), so a finer one cut by the budget only proves
    less; the best is kept. The first LP's first round runs to its end
    (`_column_generation.run`), the others' do not, and a finer one starts
    only with ``growth`` times the last one's time left (0: with any time
    left, where nothing else would use it). A finer
    LP starts from the last one's columns (`finer_packs`: 490 groups took 11
    rounds instead of 16). Twice the groups each time up to `Tuning.PROVE_SPLIT_FROM`,
    then the last LP's groups with `Tuning.PROVE_SPLITS` of them split where its duals
    rise most (`_groups.split`: long-context 429/7, 206,034 on 561 groups in 0.24 s of
    CPU, as much as 820 groups of equal width proved in 0.29 s). Returns ``(rows, took,
    coarser, last)``, to resume with more time (``rows`` 0: from the first; ``last``, the
    unit and the rows of the last LP, for its split). With ``seeding``, that growth instead
    wherever the best LP bound is below the token bound (its packs then only seed a plan).
    With ``lifts`` (`grouped`, on long contexts), the first lift of an LP's duals (`_lift.prove`)
    runs on that budget, past this one's end: cut, it proves nothing (session 19's slower CPU,
    554/35: 0.18 s of its 0.2 s lost, 0.685% above the bound; run to its end, 0.14%).
    """
    first = not rows
    rows = rows or Tuning.PROVE_ROWS
    spike = _bounds.windows_alone(histogram, max_sequences_per_pack) >= \
        search.bounds.get("tokens", 0)  # the depth binds beside the tokens: `_groups.present`

    def grows():  # the growth for the next finer LP
        below = search.bounds.get("lp", 0) < search.bounds.get("tokens", 0)
        return seeding if seeding is not None and below else growth

    while rows <= Tuning.PROVE_MOST_ROWS and budget.left() > grows() * took and \
            not search.done():
        began = budget.spent()
        if last is not None and rows > Tuning.PROVE_SPLIT_FROM:  # the last LP's groups, split
            unit, bound, gained, *rows_of_last = last
            if search.bounds.get("tokens", 0) <= bound and bound + gained <= search.bound:
                break  # gaining what the last one gained, it would prove no more than the best
            starts = _groups.split(*rows_of_last, Tuning.PROVE_SPLITS, unit)
            if len(starts) == len(rows_of_last[0]):
                break  # none to split: finer groups prove no more
            rounded = _groups.rounded(histogram, starts, up=False)
            scaled = _units.in_units(rounded, unit, up=True)
        else:
            for unit in (_units.of_groups(histogram, rows), 1):  # each group's start a multiple
                starts = _groups.present(histogram, rows, Tuning.PROVE_ENDS, spike, unit)
                rounded = _groups.rounded(histogram, starts, up=False)
                scaled = _units.in_units(rounded, unit, up=True)  # the multiples, in units
                if scaled.any():
                    break  # (else every length under the unit: in tokens)
        lengths = (np.flatnonzero(scaled) + 1) * unit  # in tokens
        lp = _units.rounded_down_lp(search, scaled, max_sequences_per_pack,
                                    [tuple(v // unit for v in pack) for
                                     pack in finer_packs(coarser, lengths)], first, budget)
        if lp is None:
            break
        coarser = [tuple(np.repeat(lengths[r], c).tolist()) for (r, c), x in
                   zip(lp.patterns, lp.x) if x > 0]
        if lp.duals is not None and lp.lower_bound >= search.bounds.get("tokens", 0):
            # Where it reaches the token bound, its duals over the real lengths may prove more
            # (below it, rounding down lost too many tokens: `_lift.prove`).
            _lift.prove(search, histogram, max_sequences_per_pack, lengths, lp.duals,
                        lifts if lifts is not None and not search.lift_seconds else budget)
        if np.array_equal(rounded, histogram):
            break  # every length its own group: finer groups prove no more
        if lp.duals is not None:
            gained = lp.lower_bound - (last[1] if last is not None else 0)
            last = (unit, lp.lower_bound, gained, starts, lengths, scaled[lengths // unit - 1],
                    lp.duals)
        rows = rows + Tuning.PROVE_SPLITS if rows >= Tuning.PROVE_SPLIT_FROM else 2 * rows
        first, took = False, budget.spent() - began
    return rows, took, coarser, last


def few(histogram, max_sequences_per_pack) -> bool:
    """Whether the LP over all lengths runs within the budget (`grouped` plans only where close).

    Below `Tuning.MANY_LENGTHS` lengths it does, except on long contexts
    (`Tuning.LONG_CONTEXT_FROM`) where pricing's table (lengths x (depth + 1) x
    (L + 1)) passes `Tuning.SLOW_TABLE`: stretched documents of about L / 4 at
    L=12,288 depth 12 (`planners_long_context.py --seed 4`, case 25, 1,758 lengths),
    its LP took 2.9 s of CPU to its plan (168,764 packs); with 1 s, cut, the plan
    on units of 12 stood (169,408 on 168,583, 0.49%); planned as among many lengths
    (finer plans, `refine`, and the lift), 168,791 on 168,652 (0.08%).

    >>> few(np.ones(8192, dtype=np.int64), 16), few(np.ones(12288, dtype=np.int64), 16)
    (False, False)
    >>> h = np.zeros(12288, dtype=np.int64); h[:1000] = 1
    >>> few(h, 4), few(h, 12)
    (True, False)
    """
    lengths, max_length = np.count_nonzero(histogram), len(histogram)
    cells = lengths * ((max_sequences_per_pack or 1) + 1) * (max_length + 1)
    return bool(lengths < Tuning.MANY_LENGTHS and not (
        max_length >= Tuning.LONG_CONTEXT_FROM and cells > Tuning.SLOW_TABLE))


def finer_packs(packs, lengths: np.ndarray, fill: int = 0) -> list[tuple[int, ...]]:
    """Packs of coarser rounded-down lengths, each length the longest of ``lengths`` up to it;
    with ``fill`` (`plan_up`'s seeds), then grown into their room (`_groups.shrunk`).

    Lengths only shrink, so each pack still fits; one with none up to it leaves the pack
    (a pack of fewer sequences fits too).

    >>> finer_packs([(9, 5), (4,)], np.array([5, 8]))
    [(8, 5)]
    """
    return _groups.shrunk(packs, lengths, fill)


def refine(search: Search, histogram, max_length, max_sequences_per_pack, starts, unit,
           budget: _budget.Budget, warm: bool = False, took: float = 0.0) -> None:
    """Plans on twice the groups while the last one converged with time left.

    Where the tokens bind, what rounding up within groups loses is most of
    the gap, and a plan on a few hundred groups often converges in a
    fraction of the budget (bimodal L=8,192 depth 32, 496 groups: 0.24 s,
    5,610 packs; 1,792 groups: 5,604, within 0.2%). So while more than
    `Tuning.REFINE_LEFT` of the budget is left and the plan is not within
    `_lp_plan.slack`, the groups are split in two (balanced again, or half
    the unit of tokens) and planned again on the time left; each plan is one
    more candidate. On a grid of units, twice the groups balanced on it only where
    that gives `Tuning.REFINE_MORE_ROWS` times as many (else the grid is nearly all
    used, and half the unit: long-context 447/1 planned 554, 576, 581 and 582 rows
    in units of 6 for 4 packs, 0.218%; now 554, then 1,661 in units of 3, 0.189%).
    With ``warm``, each LP starts from the last one's packs
    (`plan_up`), and starts only with `Tuning.PROVE_GROWTH` times the last
    plan's time left (``took``, then each one's own): a plan cut by the budget
    gains little, and its time proves the bound instead (`grouped`).
    """
    ends = min(Tuning.BALANCED_ENDS, len(starts) // 4)
    took = took if warm else 0.0
    while budget.left() > max(Tuning.REFINE_LEFT, warm * Tuning.REFINE_GROWTH * took) and \
            not search.within(_lp_plan.slack(search.bound)):
        finer = on_grid(histogram, unit, 2 * len(starts)) \
            if unit > 1 and len(starts) < max_length // unit else starts
        if len(finer) >= Tuning.REFINE_MORE_ROWS * len(starts):  # balanced on a grid: more rows
            starts = finer
        elif unit > 1:  # (nearly) a group for each length of the grid already: half the unit
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
            rounded, length = _units.in_units(rounded, unit, up=True), max_length // unit
        lengths = np.flatnonzero(rounded) + 1
        simple = max(_bounds.simple(rounded, length, max_sequences_per_pack).values())
        if simple >= search.packs:
            return  # rounding up costs more packs than the best plan has
        began = budget.spent() if warm else 0.0
        plan_up(search, histogram, lengths, rounded[lengths - 1], length, max_sequences_per_pack,
                simple, starts, unit, budget, first_round=False, warm=warm)
        took = budget.spent() - began if warm else 0.0


def plan_up(search: Search, histogram, lengths, demand, length, max_sequences_per_pack, simple,
            starts, unit, budget: _budget.Budget, first_round=True, warm=False) -> None:
    """The plan on rounded-up groups (in ``unit`` tokens), its real packs offered to ``search``.

    What follows the LP (its last rounding, `_groups.real_packs`: 0.05 s at
    L=65,536) runs after the budget ends; the LP gets ``budget`` less
    ``search.reserve`` seconds for it, best fit's time at first, then the
    most a plan ran past its own budget (spikes L=65,536 depth 24 ended at
    1.13 s of a second without it).
    With ``warm``, its LP starts from the packs of the last one kept in
    ``search.columns`` (`finer_packs`: lengths shrink, then grow into the pack's
    room, so they fit: grown, they start the LP closer), and keeps its own there
    for the next; on a grid of units (``unit`` > 1) its duals, interpolated over
    the real lengths, prove a bound (`_lift`), with `Tuning.LIFT_SHARE` of
    ``budget`` kept from the LP for it where an LP bound is the best and no lift
    proved it yet; where a rounded-down LP's lift
    (`prove_down`) proved it but no plan's lift proved anything yet
    (`Search.plan_lifted`), the time that lift took (one pricing over the same
    lengths): the plan's may prove more (`planners_long_context.py --seed 1`,
    case 5: 377,823 from the rounded-down LP's, 378,360 from the plan's, on
    378,900 packs), and a whole share cost the plans there elsewhere (seed 3
    case 35: 229,848 -> 229,881 packs); once a plan's lift proved it, on long
    contexts where the best plan is past the 0.2% target above it,
    `Tuning.LIFT_AGAIN` times the last lift's time: a finer plan's may prove more.
    """
    lift = 0.0  # the lift's share (`Tuning.LIFT_SHARE`), until a lift proves the best bound
    if warm and unit > 1 and budget.limited and \
            _bounds.strongest(search.bounds)[1] in Tuning.LIFT_KINDS:
        if search.lifted < search.bound or not search.plan_lifted:
            lift = Tuning.LIFT_SHARE * budget.left()
            if search.lifted >= search.bound:  # a rounded-down LP's lift did: its time, measured
                lift = min(lift, search.lift_seconds)
        elif len(histogram) >= Tuning.LONG_CONTEXT_FROM and \
                search.packs > search.bound * (1 + Tuning.LONG_PROVE_ABOVE):
            lift = Tuning.LIFT_AGAIN * search.lift_seconds  # a finer plan's duals may prove more
    inner = budget.less(search.reserve + lift)
    repair = Tuning.REPAIR_SHARE if simple < Tuning.REPAIR_PACKS_PER_ROW * len(lengths) else 0.0
    warm_start = {}
    if warm:  # the last plan's packs on these lengths, grown into their room: they fit
        warm_start = dict(keep=[], seeds=[tuple(v // unit for v in pack) for pack in finer_packs(
            search.columns, lengths * unit, fill=length * unit)])
    # Not dived on long contexts (`Tuning.DIVE_GAP`'s notes): a few packs for up to 0.5 s.
    dives = not Tuning.LONG_CONTEXT_FROM <= len(histogram) < Tuning.LONG_PROVE_BELOW
    packs, _ = _lp_plan.plan(lengths, demand, length, max_sequences_per_pack, simple, dives=dives,
                             budget=inner, first_round=first_round, repair=repair, **warm_start)
    for lp in warm_start.get("keep", ()):
        search.columns = [tuple((unit * np.repeat(lengths[rows], copies)).tolist())
                          for (rows, copies), x in zip(lp.patterns, lp.x) if x > 0]
        # Its duals, over the real lengths, prove a bound (`_lift`: Farley's, valid for any).
        # On groups of a grid of units only: on `_groups.balanced` ones (L=12,288 depth 16,
        # 610 groups) they proved 206,302, 0.27% below the rounded-down LP's 206,877 on 256
        # groups, for 0.05 s (groups of equal width over the lengths present: 207,042).
        if unit > 1:
            search.plan_lifted = max(search.plan_lifted, _lift.prove(
                search, histogram, max_sequences_per_pack, lengths * unit, lp.duals, budget,
                sum(packs.values()) if packs else math.inf))
    if packs:
        plan = _lp_plan.result(packs, 0)
        strategies = [tuple(unit * v for v in strategy) for strategy in plan.strategies]
        search.offer(_groups.real_packs(strategies, plan.counts, histogram, starts))
    search.reserve = max(search.reserve, inner.past())


def fine_grid(histogram, unit, starts, tokens_bound, depth, half=False):
    """The unit and groups of the plan where the tokens bind: ``unit`` unless it loses too much.

    Rounding every length up to a multiple of ``unit`` costs tokens no plan on it
    gets back. Past `Tuning.GRID_LOSS` of the token bound's tokens (log-normal
    L=32,768 depth 16: 0.35% in units of 32), the plan is on `Tuning.UNIT_ROWS`
    balanced groups (`on_grid`) on a grid of ``max_length / Tuning.FINE_ROWS``
    tokens (8 there: 61,422 -> 61,301 packs on 61,207), where pricing's table stays
    within `Tuning.TABLE_CELLS`. (Not more groups on long contexts: 2,048 lost 0.04 pp less
    where their LP ended in the time, and gave no plan where it did not: session 19's
    slower CPU, 559/32 5.83% -> 0.17%; `refine` goes finer with the time left.) With ``half``
    (`grouped`: the rounded-down LP lost the tokens, so the plan is loose, not
    the bound) past `Tuning.HALF_GRID_LOSS`,
    on half the unit (long-context seed 0 case 26, 0.171% lost in units of 16:
    175,150 packs; 175,122 on a grid of 4, 175,082 of 8; the lift needs the unit's
    grid: case 5 0.078% -> 0.306% on 8). Elsewhere the finer table did worse
    (bimodal L=8,192 depth 32: 5,604 packs in units of 8 then 4, 5,606-5,608 on
    grids of 2 or 4; spikes L=32,768: 14,973 in units of 32, 15,040 finer).
    """
    max_length = len(histogram)
    # float64: tokens lost may pass 2**63 where the tokens do not (2**59 ones, units of 32)
    loss = _budget.dot(-np.arange(1, max_length + 1) % unit, histogram)
    if loss <= (Tuning.HALF_GRID_LOSS if half else Tuning.GRID_LOSS) * tokens_bound * max_length:
        return unit, starts
    half = loss <= Tuning.GRID_LOSS * tokens_bound * max_length
    fine = _units.divisor(max_length, unit // 2 if half else max_length // Tuning.FINE_ROWS)
    cells = Tuning.UNIT_ROWS * (depth + 1) * (max_length // fine + 1)
    if fine >= unit or cells > Tuning.TABLE_CELLS:
        return unit, starts
    return fine, on_grid(histogram, fine, Tuning.UNIT_ROWS)


def on_grid(histogram, unit, rows):
    """About ``rows`` balanced groups (`_groups.balanced`) whose first lengths are ``k unit + 1``.

    Each group ends at a multiple of ``unit``, so rounding up within groups
    gives lengths in units (`in_units`). Nine 4s and a 12, in units of 4:
    groups 1-4 and 5-12, both keep their lengths.

    >>> on_grid(np.array([0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1]), 4, 2).tolist()
    [1, 5]
    """
    grid = np.arange(1, len(histogram) + 1, unit)
    units = _units.in_units(_groups.rounded(histogram, grid, up=True), unit, up=True)
    ends = min(Tuning.BALANCED_ENDS, rows // 4)
    return (_groups.balanced(units, rows - 2 * ends, ends=ends) - 1) * unit + 1
