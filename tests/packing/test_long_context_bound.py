"""The time of `optimal`'s long-context path: the lift's share, finer plans first (issue 35, item 5).

Where the best bound is an LP bound (the simple bounds are loose: stretched long
contexts), a grouped plan on a grid (`_paths.plan_up`, ``warm``) keeps
`Tuning.LIFT_SHARE` of its time from its LP for the bound from its duals (`_lift`,
one pricing over the real lengths, 0.1-0.2 s of CPU on 12,000 lengths at L=16,384):
cut by the budget, it proved nothing before. Once such a bound is the best, the
finer rounded-down bounds do not run before the finer plans (`prove_then_refine`),
and a warm finer plan starts with as much time left as the last one took
(`Tuning.REFINE_GROWTH`). From `Tuning.LONG_CONTEXT_FROM`, the rounded-down LP runs
first wherever the best plan is past the 0.2% target above the simple bounds
(`Tuning.LONG_PROVE_ABOVE`; 1% below it). Each is checked here on a clock that only
moves when told, or none.
"""

import types

import numpy as np

from test_optimal import make_histogram
from tfpack.packing.algorithms import _budget, _column_generation, _lp_plan, _paths
from tfpack.packing.algorithms._tuning import Tuning


class Clock:
    """CPU seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


DIVES = []  # `_lp_plan.plan`'s ``dives`` in each `plan_up_budget`


def plan_up_budget(monkeypatch, bounds, lifted=0, unit=8, warm=True, limit=1.0, plan_lifted=0,
                   lift_seconds=0.0, max_length=16, packs=None):
    """Seconds left to the LP of one `plan_up` of ``limit`` s on a still clock, and the search
    (lengths ``max_length`` and half of it, ``unit`` half of it where it is not 16)."""
    seen = []

    def plan(lengths, demand, length, depth, simple, *, budget, **options):
        seen.append(budget.left())
        DIVES.append(options["dives"])
        if "keep" in options:  # its duals: 1/2 at 8 and 16 tokens
            options["keep"].append(_column_generation.LP(
                [(np.array([0, 1]), np.array([1, 1]))], np.array([1.0]), 1.0, 1, 1,
                duals=np.array([0.5, 0.5])))
        return {}, 1  # no plan: only the time and the bound are checked

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search(bounds)
    search.lifted, search.plan_lifted, search.lift_seconds = lifted, plan_lifted, lift_seconds
    search.packs = search.packs if packs is None else packs
    histogram = make_histogram(max_length, {max_length: 1, max_length // 2: 1})
    unit = unit if max_length == 16 else max_length // 2
    budget = _budget.Budget(limit, Clock())
    _paths.plan_up(search, histogram, np.array([1, 2]), np.array([1, 1]), 2, None, 1,
                   np.arange(1, max_length + 1, max_length // 2), unit, budget, warm=warm)
    return seen[0], search


def test_the_lift_keeps_its_share_where_an_lp_bound_is_the_best(monkeypatch):
    """Bounds tokens 1, lp 2: the LP gets 1 - LIFT_SHARE (0.3) of the second; the lift
    proves 2 (a 16 and an 8 share no pack of 16: the best is worth 1/2, 1 / (1/2) = 2) and
    is kept as `Search.lifted` and `Search.plan_lifted`. So where Martello-Toth's bound is
    the best (`LIFT_KINDS`). Where only a rounded-down LP's lift (`prove_down`) proved the
    best bound and no plan's lift proved anything, the time that lift took (0.1 s: seed 1
    case 5, 377,823 from it, 378,360 from the plan's). Where the token bound is the best
    (the plan is what is loose), where a lift proved the best bound and a plan's lift
    proved something, off a grid (``unit`` 1: no lift), not warm, or without a limit: no
    share."""
    left, search = plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2})
    assert Tuning.LIFT_SHARE == 0.3 and left == 0.7
    assert search.lifted == 2 and search.bounds["lp"] == 2
    left, search = plan_up_budget(monkeypatch, {"tokens": 1, "long": 2})
    assert left == 0.7 and search.lifted == 2
    assert plan_up_budget(monkeypatch, {"tokens": 2, "lp": 1})[0] == 1.0
    left, search = plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, lifted=2, lift_seconds=0.1)
    assert left == 0.9 and search.plan_lifted == 2
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, lifted=2, plan_lifted=1)[0] == 1.0
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, lifted=1, plan_lifted=1)[0] == 0.7
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, unit=1)[0] == 1.0
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, warm=False)[0] == 1.0
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, limit=None)[0] == np.inf


def test_a_finer_plan_keeps_time_for_its_own_lift_past_the_target(monkeypatch):
    """Once a plan's lift proved the best bound (2), a finer plan on a long context keeps
    LIFT_AGAIN (2) times the last lift's 0.1 s from its LP, where the best plan (3 packs) is
    past the 0.2% target above it: the finer plan's duals may prove more (seed 12 case 21:
    218,669 -> 218,831 on 219,113 packs; cut by the budget, its lift never ran). Within the
    target (2 packs), or below LONG_CONTEXT_FROM (L=16), none."""
    long = Tuning.LONG_CONTEXT_FROM
    assert Tuning.LIFT_AGAIN == 2.0
    done = dict(lifted=2, plan_lifted=2, lift_seconds=0.1)
    left, search = plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, **done, max_length=long,
                                  packs=3)
    assert left == 0.8 and search.lifted == 2
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, **done, max_length=long,
                          packs=2)[0] == 1.0
    assert plan_up_budget(monkeypatch, {"tokens": 1, "lp": 2}, **done, packs=3)[0] == 1.0
    assert plan_up_budget(monkeypatch, {"tokens": 2, "lp": 1}, **done, max_length=long,
                          packs=3)[0] == 1.0  # the token bound the best: the plan is loose


def test_no_dives_for_the_grouped_plans_of_long_contexts(monkeypatch):
    """From LONG_CONTEXT_FROM to LONG_PROVE_BELOW a grouped plan is not dived: on the
    long-context suite's seed 12 (71 dives, 140,733-693,962 packs) a dive gained 1-5 packs
    (0.002% at most) and took up to 0.52 s of CPU, the finer plans' time (fresh 306/35: the
    first plan's dives 0.15 s, 0.145% -> 0.214%). Elsewhere (L=16 here, or 32,768) as before."""
    DIVES.clear()
    plan_up_budget(monkeypatch, {"tokens": 1}, max_length=Tuning.LONG_CONTEXT_FROM)
    plan_up_budget(monkeypatch, {"tokens": 1}, max_length=Tuning.LONG_PROVE_BELOW)
    plan_up_budget(monkeypatch, {"tokens": 1})
    assert DIVES == [False, True, True]


def calls_of_prove_then_refine(monkeypatch, lifted):
    calls = []
    monkeypatch.setattr(_paths, "prove_down", lambda *a, **k: (calls.append("prove"),
                                                               (512, 0.1, []))[1])
    monkeypatch.setattr(_paths, "refine", lambda *a, **k: calls.append(("refine", k["took"])))
    search = _paths.Search({"tokens": 1, "lp": 3})
    search.lifted = lifted
    _paths.prove_then_refine(search, make_histogram(16, {16: 1}), 16, None, np.arange(1, 17, 8),
                             8, _budget.Budget(1.0, Clock()), (512, 0.1, []), 0.3)
    return calls


def test_finer_plans_first_once_the_plans_duals_proved_the_bound(monkeypatch):
    """The lift at the best bound (3): refine, with any time left (``took`` 0, not the last
    plan's 0.3 s: seed 3 case 7, 0.242% -> 0.162%), then the rounded-down bounds on what is
    left; below it (2), the rounded-down bounds first, and refine by the last plan's time,
    as before."""
    assert calls_of_prove_then_refine(monkeypatch, 3) == [("refine", 0.0), "prove"]
    assert calls_of_prove_then_refine(monkeypatch, 2) == ["prove", ("refine", 0.3), "prove"]


def test_a_warm_finer_plan_starts_with_as_much_time_left_as_the_last_took(monkeypatch):
    """The last plan took 0.6 s, 0.7 s are left: a finer plan starts (REFINE_GROWTH 1), where
    twice that time (PROVE_GROWTH, as before) would have stopped it; with 0.5 s left, not."""
    assert Tuning.REFINE_GROWTH == 1.0
    for spent, plans in ((0.3, 1), (0.5, 0)):
        clock, started = Clock(), []

        def plan_up(*a, **k):
            started.append(k.get("warm"))
            clock.now += 1.0  # the plan takes the rest

        monkeypatch.setattr(_paths, "plan_up", plan_up)
        budget = _budget.Budget(1.0, clock)
        clock.now = spent  # 1 - spent left
        search = _paths.Search({"tokens": 1})
        search.packs = 10
        histogram = make_histogram(16, {13: 1, 14: 1, 15: 1, 16: 1})
        _paths.refine(search, histogram, 16, None, np.arange(1, 17, 8), 8, budget, warm=True,
                      took=0.6)
        assert started == [True] * plans, spent



def test_a_finer_plan_goes_to_half_the_unit_where_the_grid_is_nearly_all_used(monkeypatch):
    """Seven lengths at L=64 in units of 4: 8 balanced groups, then 13 (of the grid's 16);
    twice 13 asked gives 14, under `Tuning.REFINE_MORE_ROWS` (1.25) times 13: the next plan
    is on the grid of 2, then of 1. (Before, a plan on those 14 groups, the same 6 lengths
    in units, came first: long-context 447/1 planned 554, 576, 581 and 582 rows in units of
    6 for 4 packs, 0.218%; now 554 then 1,661 in units of 3, 0.189%.)"""
    calls = []

    def plan_up(search, histogram, lengths, demand, length, depth, simple, starts, unit, *a, **k):
        calls.append((unit, len(starts), len(lengths)))

    monkeypatch.setattr(_paths, "plan_up", plan_up)
    histogram = make_histogram(64, {7: 4, 8: 9, 19: 3, 22: 5, 30: 2, 41: 6, 50: 1})
    search = _paths.Search({"tokens": 1})
    search.packs = 10 ** 6
    _paths.refine(search, histogram, 64, None, _paths.on_grid(histogram, 4, 8), 4,
                  _budget.Budget(None))
    assert len(_paths.on_grid(histogram, 4, 26)) == 14
    assert calls == [(4, 13, 6), (2, 32, 6), (1, 64, 7)]


class Proving(Exception):
    """`prove_down` was called."""


def proves_first(monkeypatch, long_context_from: int) -> bool:
    """Whether `grouped` proves first at L=16 with the best plan 0.5% above the token bound."""
    def prove_down(*args, **kwargs):
        raise Proving

    monkeypatch.setattr(Tuning, "LONG_CONTEXT_FROM", long_context_from)
    monkeypatch.setattr(_paths, "prove_down", prove_down)
    monkeypatch.setattr(_paths, "plan_up", lambda *a, **k: None)
    monkeypatch.setattr(_paths, "refine", lambda *a, **k: None)
    search = _paths.Search({"tokens": 1000})
    search.packs = 1005
    try:
        _paths.grouped(search, make_histogram(16, {5: 3000, 6: 200}), 16, 4,
                       _budget.Budget(None))
    except Proving:
        return True
    return False


def test_long_contexts_prove_first_from_the_target_gap(monkeypatch):
    """0.5% above the bound: past LONG_PROVE_ABOVE (0.2%) from LONG_CONTEXT_FROM, the
    rounded-down LP runs first; below it, not (PROVE_ABOVE, 1%, as before)."""
    assert (Tuning.PROVE_ABOVE, Tuning.LONG_PROVE_ABOVE) == (0.01, 0.002)
    assert proves_first(monkeypatch, 16)
    assert not proves_first(monkeypatch, 32)


def first_proof(monkeypatch, long_context_from: int) -> tuple[float | None, float]:
    """The ``seeding`` growth and the seconds of 1 s `grouped`'s first `prove_down` gets at
    L=16 (the plan 0.5% above the bound)."""
    def prove_down(*args, **kwargs):
        raise Proving(kwargs.get("seeding"), args[4].left())

    monkeypatch.setattr(Tuning, "LONG_CONTEXT_FROM", long_context_from)
    monkeypatch.setattr(Tuning, "PROVE_ABOVE", 0.001)  # proves first either way
    monkeypatch.setattr(_paths, "prove_down", prove_down)
    search = _paths.Search({"tokens": 1000})
    search.packs = 1005
    try:
        _paths.grouped(search, make_histogram(16, {5: 3000, 6: 200}), 16, 4,
                       _budget.Budget(1.0, Clock()))
    except Proving as proving:
        return proving.args
    raise AssertionError("prove_down was not called")


def rounded_down_lps(monkeypatch, lp_bound: int, seeding: float | None) -> int:
    """How many rounded-down LPs `prove_down` runs in 1 s where each takes 0.4 s and
    proves ``lp_bound`` (the token bound 100)."""
    clock, runs = Clock(), []

    def rounded_down_lp(search, *args):
        runs.append(clock.now)
        clock.now += 0.4
        search.prove(lp_bound, "lp")
        return types.SimpleNamespace(patterns=[], x=np.zeros(0), duals=None)

    monkeypatch.setattr(_paths._units, "rounded_down_lp", rounded_down_lp)
    search = _paths.Search({"tokens": 100})
    histogram = make_histogram(1024, {n: 1 for n in range(1, 1025)})
    _paths.prove_down(search, histogram, 1024, 8, _budget.Budget(1.0, clock), seeding=seeding)
    return len(runs)


def test_long_contexts_go_on_to_finer_rounded_down_groups_sooner(monkeypatch):
    """On long contexts, where the rounded-down LP stays below the token bound, its packs
    only seed the plan's LP, and 512 groups' seed it far better than 256's (seed 5 case
    18: its first LP 116,715 instead of 116,938): 512 start with LONG_PROVE_GROWTH (1)
    times the first LP's time left (0.6 s after 0.4 s), not PROVE_GROWTH (2) as where it
    reaches the token bound (there seed 3 case 11 lost 0.149% -> 0.245%) or elsewhere."""
    assert (Tuning.LONG_PROVE_GROWTH, Tuning.PROVE_GROWTH) == (1.0, 2.0)
    assert rounded_down_lps(monkeypatch, 99, seeding=1.0) == 2
    assert rounded_down_lps(monkeypatch, 100, seeding=1.0) == 1
    assert rounded_down_lps(monkeypatch, 99, seeding=None) == 1
    assert first_proof(monkeypatch, 16)[0] == 1.0  # (replaces prove_down: last)
    assert first_proof(monkeypatch, 32)[0] is None


def test_long_contexts_give_the_first_bound_more_of_the_time(monkeypatch):
    """On long contexts the rounded-down LPs get LONG_PROVE_SHARE of the grouped path's time
    (narrow documents need 1,024 groups: 402/21 0.352% -> 0.209%), elsewhere PROVE_SHARE
    (half cost the suite's log-normal L=8,192 depth 3 its target)."""
    assert (Tuning.LONG_PROVE_SHARE, Tuning.PROVE_SHARE) == (0.4, 0.33)
    assert first_proof(monkeypatch, 16)[1] == 0.4
    assert first_proof(monkeypatch, 32)[1] == 0.33


def full_packs_first_calls(monkeypatch, spike: int, long_context_from: int) -> int:
    """How often `optimal` starts full packs first at L=64 (lengths 5-40 three times each,
    and ``spike`` sequences of 64: the tokens bind, best fit a pack above them), with long
    contexts from ``long_context_from``."""
    from tfpack.packing.algorithms import optimal

    calls = []
    monkeypatch.setattr(Tuning, "LONG_CONTEXT_FROM", long_context_from)
    monkeypatch.setattr(Tuning, "MANY_LENGTHS", 4)
    monkeypatch.setattr(_paths, "full_packs_first", lambda *a, **k: calls.append(1))
    histogram = make_histogram(64, {n: 3 for n in range(5, 41)})
    histogram[-1] = spike
    optimal.pack(histogram, 64, None, seed=0, time_limit=0.05)
    return len(calls)


def test_long_contexts_start_full_packs_first_only_where_full_windows_hold_a_share(monkeypatch):
    """From LONG_CONTEXT_FROM, full packs first only where sequences of L hold
    FULL_FIRST_SPIKE (30%) of the tokens or more: at L=12,288 it succeeded only at 38-69%
    (seed 1 case 30) and gave up elsewhere after up to 0.24 s the plan needed (seed 5
    case 18: 0.209% -> 0.171%). Lengths 5-40 three times: 2,430 tokens; 20 of 64 are 34.5%
    of all, 17 30.9%, 16 29.6%."""
    assert Tuning.FULL_FIRST_SPIKE == 0.3
    assert [full_packs_first_calls(monkeypatch, s, 64) for s in (20, 17, 16)] == [1, 1, 0]
    assert full_packs_first_calls(monkeypatch, 16, 65) == 1  # below long contexts: always


def prove_downs(monkeypatch, lifted: bool) -> tuple[int, list]:
    """How often 1 s `grouped` runs `prove_down` among few lengths (the plan 2% above the
    token bound; the LP over all lengths follows it), where the first one's lift proved the
    best bound or not; and the packs left to seed that LP."""
    calls = []

    def prove_down(search, *args, **kwargs):
        calls.append(kwargs)
        search.prove(1010, "lp")
        search.lifted = 1010 if lifted else 0
        return 256, 0.1, [(5, 5, 6)] if len(calls) == 1 else [(6, 5, 5)], None

    monkeypatch.setattr(_paths, "prove_down", prove_down)
    monkeypatch.setattr(_paths, "plan_up", lambda *args, **kwargs: None)
    search = _paths.Search({"tokens": 1000})
    search.packs = 1020
    histogram = make_histogram(16, {5: 3000, 6: 200})
    assert _paths.few(histogram, 4)
    _paths.grouped(search, histogram, 16, 4, _budget.Budget(1.0, Clock()))
    return len(calls), search.columns


def test_among_few_lengths_a_lifted_bound_leaves_the_time_to_the_lp_over_all_lengths(monkeypatch):
    """Where the first rounded-down LP's lift proved the best bound, no finer rounded-down
    LPs follow the plan (they approach the LP from below): long-context 681/19 0.298% ->
    0.009%, the LP over all lengths given their time, seeded by the first one's packs.
    Otherwise they still run, resumed where the first stopped."""
    assert prove_downs(monkeypatch, lifted=True) == (1, [(5, 5, 6)])
    assert prove_downs(monkeypatch, lifted=False) == (2, [(6, 5, 5)])
