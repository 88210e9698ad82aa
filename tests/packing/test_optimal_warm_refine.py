"""Finer grouped plans from the last plan's packs; a bound from their duals (issue 35, item 5).

Where `_paths.prove_down` runs (stretched long contexts), `_paths.refine`'s plans on
finer groups start from the packs of the last grouped plan's LP (`plan_up` with
``warm``), shrunk to the finer lengths (`_paths.finer_packs`): on the long-context
suite's L=16,384 depth 4 case, units of 8 took 11 rounds instead of 47 (0.23 s of CPU
instead of 0.54 s), so a finer plan fits in the budget beside the bound. The duals of
each such LP, interpolated over the real lengths, prove Farley's bound (`_lift`), which
holds for any duals: checked here against the brute-force optimum for random ones.
"""

import itertools
import math

import pytest

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from test_groups import groups_everywhere
from test_optimal import assert_valid, brute_force_packs, make_histogram
from test_optimal_long_context import narrow_instances
from tfpack.packing.algorithms import (_best_fit, _column_generation, _lift, _lp_plan, _paths,
                                       optimal)
from tfpack.packing.algorithms._budget import Budget
from tfpack.packing.algorithms._tuning import Tuning


def test_a_warm_plan_starts_from_the_last_packs_shrunk_to_its_lengths(monkeypatch):
    """Hand-checked, in units of 8 tokens on lengths 8 and 16 (units 1 and 2): the last packs
    (24, 16) and (8,) in tokens become (16, 16) and (8,), and the (8,) grows into its room
    (`_groups.shrunk`, ``fill``): (16,); units (2, 2) and (2,). The LP's own
    packs, (1, 2) in units, are kept in tokens for the next: (8, 16); its duals (1/2 at 8
    and 16 tokens) lift a bound: a 16 and an 8 share no pack of 16, the best is worth 1/2,
    so 1 / (1/2) = 2 packs."""
    calls = []

    def plan(lengths, demand, length, depth, simple, **options):
        calls.append(options)
        if "keep" in options:  # an LP whose solution is the pack (2, 1), duals 0.5 each
            options["keep"].append(_column_generation.LP(
                [(np.array([0, 1]), np.array([1, 1]))], np.array([1.0]), 1.0, 1, 1,
                duals=np.array([0.5, 0.5])))
        return {(2, 1): 1}, 1

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search({"tokens": 1})
    search.columns = [(24, 16), (8,)]
    histogram = make_histogram(16, {16: 1, 8: 1})
    starts = np.arange(1, 17, 8)
    args = (histogram, np.array([1, 2]), np.array([1, 1]), 2, None, 1, starts, 8)
    _paths.plan_up(search, *args, _paths._budget.Budget(None), warm=True)
    assert calls[-1]["seeds"] == [(2, 2), (2,)]
    assert search.columns == [(8, 16)]
    assert search.bounds["lp"] == 2
    assert search.plan == {(16, 8): 1}
    _paths.plan_up(search, *args, _paths._budget.Budget(None))  # not warm: as before
    assert "seeds" not in calls[-1] and "keep" not in calls[-1]
    assert search.columns == [(8, 16)]


def test_a_plan_keeps_its_lp_and_takes_more_seeds(monkeypatch):
    """``keep`` gets the last LP (its packs fit, its duals one a length); ``seeds`` reach
    the first LP."""
    lengths, demand = np.array([3, 4, 5, 7]), np.array([7, 5, 4, 3])
    keep = []
    packs, bound = _lp_plan.plan(lengths, demand, 12, 3, 6, keep=keep)
    (lp,) = keep
    assert lp.duals.shape == (4,) and np.all(lp.duals >= 0)
    used = [tuple(np.repeat(lengths[r], c).tolist()) for (r, c), x in zip(lp.patterns, lp.x)
            if x > 0]
    assert used and all(sum(pack) <= 12 and len(pack) <= 3 for pack in used)
    assert all(set(pack) <= set(lengths.tolist()) for pack in used)
    seen = []
    run = _column_generation.run
    monkeypatch.setattr(_column_generation, "run",
                        lambda *a, **k: (seen.append(list(a[4])), run(*a, **k))[1])
    again, bound_again = _lp_plan.plan(lengths, demand, 12, 3, 6, seeds=used)
    assert all(pack in seen[0] for pack in used)
    assert bound_again == bound and sum(again.values()) == sum(packs.values())


def pack_proving_first(histogram, max_length, depth):
    """`optimal` with groups on every histogram and the bound proven first (`PROVE_ABOVE`
    0): the result, and ``warm`` of each grouped plan (`plan_up`)."""
    warm = []
    plan_up = _paths.plan_up
    with pytest.MonkeyPatch.context() as patch:
        groups_everywhere(patch)
        patch.setattr(Tuning, "PROVE_ABOVE", 0.0)
        patch.setattr(_paths, "plan_up", lambda *a, **k: (warm.append(k.get("warm")),
                                                         plan_up(*a, **k))[1])
        result = optimal.pack(histogram, max_length, depth, seed=0, time_limit=None)
    return result, warm


@settings(max_examples=40, deadline=None)
@given(narrow_instances())
def test_warm_finer_plans_are_valid_and_the_bound_holds(instance):
    """Groups on every histogram, the bound proven first, so `refine` plans warm: every
    plan is valid, and bound <= optimum <= plan."""
    histogram, max_length, depth = instance
    result, warm = pack_proving_first(histogram, max_length, depth)
    assert_valid(result, histogram, max_length, depth)
    best = brute_force_packs(histogram, max_length, depth)
    assert result.lower_bound_packs <= best <= result.counts.sum()
    if np.count_nonzero(histogram) >= 2:  # `refine` follows (MANY_LENGTHS 2): warm plans
        assert all(warm)


def test_the_warm_path_is_taken_by_hand():
    """Five 7s and a 1 in packs of 20 (depth 4), groups everywhere: the grouped plan is
    warm, and it and the bound are the optimum, 3 (no three 7s fit)."""
    result, warm = pack_proving_first(make_histogram(20, {7: 5, 1: 1}), 20, 4)
    assert warm == [True]
    assert (int(result.counts.sum()), result.lower_bound_packs) == (3, 3)


def test_the_lifted_bound_by_hand():
    """Five 3s and three 5s in packs of 10, duals 1/3 at 3 and 1/2 at 5: the best packs
    (3, 3, 3) and (5, 5) are worth 1, so ceil(5/3 + 3/2) = 4 (tokens: 3); 4 packs do it.
    Interpolated from duals at 2 and 6 (0.25 and 0.55: 0.325 at 3, 0.475 at 5), the best
    pack, (3, 3, 3), is worth 0.975: (1.625 + 1.425) / 0.975 = 3.13, so 4 again."""
    histogram = make_histogram(10, {3: 5, 5: 3})
    assert _lift.lifted(histogram, 10, None, np.array([3, 5]), np.array([1 / 3, 1 / 2])) == 4
    assert _lift.lifted(histogram, 10, None, np.array([2, 6]), np.array([0.25, 0.55])) == 4
    assert brute_force_packs(histogram, 10, None) == 4


def test_the_lift_goes_a_quarter_of_the_way_to_the_duals_below(monkeypatch):
    """Three 4s and four 8s in packs of 10, duals 1/4 at 2 and 1 at 6. Interpolated, a 4 is
    worth 5/8 and an 8 is worth 1 (past the last group: its dual): the best pack, (4, 4), is
    worth 5/4, and (15/8 + 4) / (5/4) = 4.7, so 5 (tokens and Martello-Toth: 5).
    `Tuning.LIFT_TOWARD_BELOW` (1/4) of the way toward the duals at or below each length
    (1/4 at 2 for a 4, 1 at 6 for an 8), a 4 is worth 17/32: (4, 4) is worth 17/16 there,
    so the bound there is at most (51/32 + 4) / (17/16) = 5.26, which may prove 6: priced,
    (4, 4) is the best, so 6, the optimum (each 8 alone, the 4s in two packs). Not priced
    where that cannot pass what is proven (``above`` 6, or ``None``), nor where the duals
    sit at the lengths themselves (1/3 at 3, 1/2 at 5: nothing moves). With the share 0,
    the interpolated bound, 5."""
    histogram = make_histogram(10, {4: 3, 8: 4})
    pricings = []
    price = _lift._knapsack.price
    monkeypatch.setattr(_lift._knapsack, "price",
                        lambda *a, **k: (pricings.append(a[2].tolist()), price(*a, **k))[1])
    at, duals = np.array([2, 6]), np.array([0.25, 1.0])
    assert _lift.lifted(histogram, 10, None, at, duals) == 6
    assert pricings == [[0.625, 1.0], [17 / 32, 1.0]]
    assert brute_force_packs(histogram, 10, None) == 6
    pricings.clear()
    assert _lift.lifted(make_histogram(10, {3: 5, 5: 3}), 10, None, np.array([3, 5]),
                        np.array([1 / 3, 1 / 2])) == 4
    assert len(pricings) == 1
    for above in (6, None):
        pricings.clear()
        assert _lift.lifted(histogram, 10, None, at, duals, above=above) == 5
        assert len(pricings) == 1
    monkeypatch.setattr(Tuning, "LIFT_TOWARD_BELOW", 0.0)
    assert _lift.lifted(histogram, 10, None, at, duals) == 5


def test_the_lift_prices_toward_below_only_where_that_may_bring_the_plan_within(monkeypatch):
    """The case above through `_lift.prove`, the tokens' 5 proven: with a best plan of 6 (in
    ``search``, or the new plan's ``packs``), a bound of 6 would bring it within 0.2%, and
    the second pricing may prove 6 (at most 5.26 rounded up): priced, 6. With 7 the bound
    that would do is 6.99, which it cannot reach: one pricing, 5; with 5 the plan is within
    already: one pricing. With no plan yet, wherever it may prove more: 6."""
    histogram = make_histogram(10, {4: 3, 8: 4})
    pricings = []
    price = _lift._knapsack.price
    monkeypatch.setattr(_lift._knapsack, "price",
                        lambda *a, **k: (pricings.append(1), price(*a, **k))[1])
    for in_search, packs, lifted, priced in ((6, math.inf, 6, 2), (7, 6, 6, 2),
                                             (7, math.inf, 5, 1), (5, math.inf, 5, 1),
                                             (math.inf, math.inf, 6, 2)):
        search = _paths.Search({"tokens": 5})
        search.packs = in_search
        pricings.clear()
        assert _lift.prove(search, histogram, None, np.array([2, 6]), np.array([0.25, 1.0]),
                           Budget(None), packs) == lifted
        assert (len(pricings), search.bound) == (priced, lifted)


@settings(max_examples=80, deadline=None)
@given(narrow_instances(), st.lists(st.tuples(st.integers(1, 24), st.floats(0.0, 1.0)),
                                    min_size=1, max_size=6), st.sampled_from([0.25, 0.5, 1.0]))
def test_a_lift_toward_the_duals_below_never_exceeds_the_optimum(instance, points, share):
    """Farley's bound at the values part of the way toward the duals below holds too: any
    share, random duals at random lengths (the lift keeps the better of the two bounds)."""
    histogram, max_length, depth = instance
    points = sorted(dict(points).items())
    group_lengths = np.array([p[0] for p in points])
    duals = np.array([p[1] for p in points])
    kept = Tuning.LIFT_TOWARD_BELOW
    try:
        Tuning.LIFT_TOWARD_BELOW = share
        bound = _lift.lifted(histogram, max_length, depth, group_lengths, duals)
    finally:
        Tuning.LIFT_TOWARD_BELOW = kept
    assert bound <= brute_force_packs(histogram, max_length, depth)


def test_the_lift_prices_without_the_depth_unless_it_binds(monkeypatch):
    """Three 3s and three 2s in packs of 10, duals 1/3 at 3 and 1/4 at 2 (h.y = 7/4).
    Without the depth the best pack is (3, 3, 2, 2), worth 7/6: ceil(3/2) = 2. At depth 2
    it holds too many, so the pricing with the depth follows: (3, 3), worth 2/3, so
    ceil(21/8) = 3, the optimum; if the budget ends before it, the relaxed value stands (2:
    still a bound). At depth 3 with 1/10 at 2, the relaxed best, (3, 3, 3) worth 1, fits the
    depth: one pricing, ceil(13/10) = 2."""
    histogram = make_histogram(10, {3: 3, 2: 3})
    at = np.array([2, 3])
    depths = []
    price = _lift._knapsack.price
    monkeypatch.setattr(_lift._knapsack, "price", lambda *a, **k: (depths.append(a[4]),
                                                                   price(*a, **k))[1])
    assert _lift.lifted(histogram, 10, None, at, np.array([1 / 4, 1 / 3])) == 2
    assert depths == [None]
    assert _lift.lifted(histogram, 10, 2, at, np.array([1 / 4, 1 / 3])) == 3
    assert depths == [None, None, 2]
    assert brute_force_packs(histogram, 10, 2) == 3
    assert _lift.lifted(histogram, 10, 3, at, np.array([1 / 10, 1 / 3])) == 2
    assert depths == [None, None, 2, None]

    def out_of_time(*args, **kwargs):
        if args[4] is not None:
            raise _lift._budget.OutOfTime
        return price(*args, **kwargs)

    monkeypatch.setattr(_lift._knapsack, "price", out_of_time)
    assert _lift.lifted(histogram, 10, 2, at, np.array([1 / 4, 1 / 3])) == 2


@settings(max_examples=80, deadline=None)
@given(narrow_instances(), st.lists(st.tuples(st.integers(1, 24), st.floats(0.0, 1.0)),
                                    min_size=1, max_size=6))
def test_a_lifted_bound_never_exceeds_the_optimum_whatever_the_duals(instance, points):
    """Farley's bound holds for any values: duals drawn at random, at any lengths."""
    histogram, max_length, depth = instance
    points = sorted(dict(points).items())
    group_lengths = np.array([p[0] for p in points])
    duals = np.array([p[1] for p in points])
    assert _lift.lifted(histogram, max_length, depth, group_lengths, duals) <= \
        brute_force_packs(histogram, max_length, depth)


def best_pack_value(histogram, max_length, depth, values):
    """The most any pack of the histogram's sequences is worth, by enumeration."""
    lengths = np.flatnonzero(histogram) + 1
    best = 0.0
    for size in range(1, min(depth or max_length, int(histogram.sum())) + 1):
        for pack in itertools.combinations_with_replacement(range(len(lengths)), size):
            copies = np.bincount(pack, minlength=len(lengths))
            if lengths @ copies <= max_length and np.all(copies <= histogram[lengths - 1]):
                best = max(best, float(copies @ values))
    return best


@settings(max_examples=80, deadline=None)
@given(narrow_instances(), st.data())
def test_known_packs_bettered_are_never_worth_more_than_the_best_pack(instance, data):
    """`_lift._worth` only moves sequences within packs that stay packs (room, copies, depth):
    best fit's packs bettered are never worth more than the best pack, by enumeration, for
    any values growing with length."""
    histogram, max_length, depth = instance
    lengths = np.flatnonzero(histogram) + 1
    steps = data.draw(st.lists(st.floats(0.0, 1.0), min_size=len(lengths),
                               max_size=len(lengths)))
    values = np.cumsum(steps)
    demand = histogram[lengths - 1]
    bounds = np.minimum(demand, max_length // lengths)
    known = _lift.padded(_best_fit_plan(histogram, max_length, depth))
    worth = _lift._worth(known, lengths, bounds, values, max_length, depth)
    assert worth <= best_pack_value(histogram, max_length, depth, values) + 1e-9


def _best_fit_plan(histogram, max_length, depth):
    lengths = np.flatnonzero(histogram) + 1
    return _best_fit.fill(dict(zip(lengths.tolist(), histogram[lengths - 1].tolist())), {},
                          max_length, depth)


def test_known_packs_skip_a_lift_that_cannot_prove_more(monkeypatch):
    """Five 3s and three 5s in packs of 10, duals 1/3 at 3 and 1/2 at 5: the bound is
    ceil(5/3 + 3/2) = 4 (`test_the_lifted_bound_by_hand`). A plan's packs (3, 3, 3) and
    (5, 5) are worth 1, so no pack is worth less and the bound is at most 4: with 4 proven
    (``useful``), not priced (``None``); with 3 proven, priced: 4. A plan of (3, 3) and
    (5,) alone is worth 2/3 and 1/2: a (3, 3) bettered by one move, (5, 3), is worth 5/6,
    then (5, 5) is worth 1: skipped too after the moves, priced without them."""
    histogram = make_histogram(10, {3: 5, 5: 3})
    pricings = []
    price = _lift._knapsack.price
    monkeypatch.setattr(_lift._knapsack, "price",
                        lambda *a, **k: (pricings.append(1), price(*a, **k))[1])
    at, duals = np.array([3, 5]), np.array([1 / 3, 1 / 2])
    plan = _lift.padded({(3, 3, 3): 1, (5, 5): 1, (3, 3): 1, (5,): 1})
    assert _lift.lifted(histogram, 10, None, at, duals, known=plan, useful=4) is None
    assert pricings == []
    assert _lift.lifted(histogram, 10, None, at, duals, known=plan, useful=3) == 4
    assert pricings
    poor = _lift.padded({(3, 3): 2, (5,): 3})
    pricings.clear()
    assert _lift.lifted(histogram, 10, None, at, duals, known=poor, useful=4) is None
    assert pricings == []
    monkeypatch.setattr(Tuning, "LIFT_MOVES", 0)
    assert _lift.lifted(histogram, 10, None, at, duals, known=poor, useful=4) == 4
    assert pricings


@settings(max_examples=80, deadline=None)
@given(narrow_instances(), st.lists(st.tuples(st.integers(1, 24), st.floats(0.0, 1.0)),
                                    min_size=1, max_size=6), st.integers(0, 8),
       st.sampled_from([0, None]))
def test_a_lift_is_skipped_only_where_it_could_not_prove_more(instance, points, useful, above):
    """With a plan's packs known, `_lift.lifted` skips its pricing (``None``) only where,
    priced, it would prove no more than ``useful``: random duals, any bound proven."""
    histogram, max_length, depth = instance
    points = sorted(dict(points).items())
    group_lengths = np.array([p[0] for p in points])
    duals = np.array([p[1] for p in points])
    known = _lift.padded(_best_fit_plan(histogram, max_length, depth))
    skipped = _lift.lifted(histogram, max_length, depth, group_lengths, duals, above=above,
                           known=known, useful=useful)
    priced = _lift.lifted(histogram, max_length, depth, group_lengths, duals, above=above)
    assert skipped == priced or skipped is None and priced <= useful


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 99), min_size=1, max_size=6).map(tuple), max_size=20))
def test_padded_packs_are_their_lengths_then_zeros(packs):
    rows = _lift.padded(dict.fromkeys(packs, 1))
    width = max(map(len, packs), default=0) + 1
    assert rows.shape == (len(set(packs)), width)
    assert [tuple(int(v) for v in row if v) for row in rows] == list(dict.fromkeys(packs))
