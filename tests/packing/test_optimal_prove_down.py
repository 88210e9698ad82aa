"""`_paths.prove_down`: the rounded-down bound on groups of the lengths present (issue 35, item 5).

Proven bounds only: every bound it reports is checked against the exact optimum
(brute force over subsets, or the integer program over every pack solved by
HiGHS) on tiny histograms, and against the plan on a long-context one.
"""

import itertools

import pytest

import numpy as np
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from test_optimal import brute_force_packs, make_histogram
from test_optimal_long_context import narrow_instances, stretched
from tfpack.packing.algorithms import _bounds, _budget, _groups, _paths, _units, optimal
from tfpack.packing.algorithms._tuning import Tuning


def exact_packs(histogram, max_length, depth):
    """Fewest packs: the integer program over every pack (cutting stock), solved by HiGHS."""
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    patterns = []
    for size in range(1, (depth or max_length) + 1):
        for pack in itertools.combinations_with_replacement(range(len(lengths)), size):
            counts = np.bincount(pack, minlength=len(lengths))
            if lengths @ counts <= max_length and np.all(counts <= demand):
                patterns.append(counts)
    a = np.array(patterns).T
    result = scipy.optimize.milp(np.ones(a.shape[1]), integrality=np.ones(a.shape[1]),
                                 constraints=scipy.optimize.LinearConstraint(a, lb=demand))
    assert result.success
    return round(result.fun)


def proven(histogram, max_length, depth, rows):
    search = _paths.Search(_bounds.simple(histogram, max_length, depth))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_paths.Search, "done", lambda self: False)
        patch.setattr(Tuning, "PROVE_ROWS", rows)
        _paths.prove_down(search, histogram, max_length, depth, _budget.Budget(None))
    return search.bounds.get("lp", 0)


def test_present_groups_keep_the_ends_and_cut_the_rest_evenly():
    """Lengths 40-47 and 100 of 100, one exact at each end, two groups between: 41-44 and
    45-99 (rounded down to 41 and 45); 1-39 a group with nothing in it."""
    histogram = np.zeros(100, dtype=np.int64)
    histogram[[39, 40, 41, 42, 43, 44, 45, 46, 99]] = 1
    assert _groups.present(histogram, 2, ends=1).tolist() == [1, 40, 41, 45, 100]
    assert _groups.present(histogram, 100, ends=1).tolist() == \
        [1, 40, 41, 42, 43, 44, 45, 46, 47, 100]


def test_present_groups_in_units_start_at_multiples_of_the_unit():
    """The same lengths in units of 4: the width (31) up to a multiple (32), each start down to
    one: 40-71 and 72-100 (40 and 72), rounded down to 40 and 72 tokens, 10 and 18 units. A
    length below the first multiple rounds to 1 and leaves the problem in units."""
    histogram = np.zeros(100, dtype=np.int64)
    histogram[[39, 40, 41, 42, 43, 44, 45, 46, 99]] = 1
    starts = _groups.present(histogram, 2, ends=0, unit=4)
    assert starts.tolist() == [1, 40, 72]
    units = _units.in_units(_groups.rounded(histogram, starts, up=False), 4, up=True)
    assert np.flatnonzero(units).tolist() == [9, 17] and units[[9, 17]].tolist() == [8, 1]
    histogram[2] = 1  # a 3: rounded down to 1, dropped in units
    assert _groups.present(histogram, 2, ends=0, unit=4).tolist() == [1, 52]
    rounded = _groups.rounded(histogram, np.array([1, 52]), up=False)
    assert _units.in_units(rounded, 4, up=True).sum() == 1


def test_the_unit_of_the_groups_is_a_quarter_of_their_width_from_long_contexts(monkeypatch):
    """Lengths 1,000-16,384 (widths 60, 30, 15, 3): units up to 2 (`Tuning.PROVE_UNIT_MOST`);
    without that cap, the largest divisors of 16,384 up to a quarter of the width."""
    histogram = np.zeros(16384, dtype=np.int64)
    histogram[[999, 5999, 16383]] = 1
    assert [_units.of_groups(histogram, rows) for rows in (256, 512, 1024, 4096)] == [2, 2, 2, 1]
    assert _units.of_groups(histogram[:8192], 256) == 1  # below `Tuning.UNITS_FROM`
    monkeypatch.setattr(Tuning, "PROVE_UNIT_MOST", 64)
    assert [_units.of_groups(histogram, rows) for rows in (256, 512, 1024, 4096)] == [8, 4, 2, 1]


def test_finer_packs_only_shrink():
    assert _paths.finer_packs([(9, 5), (4,), (6, 6)], np.array([5, 8])) == [(8, 5), (5, 5)]


def test_three_just_over_a_third_prove_three_packs():
    """Hand-checked: five 7s and one 1 in packs of 20: 36 tokens -> 2 by the token bound, but
    no three 7s fit, so 3. One group per length (exact) proves 3; one group for 1-7 (all
    rounded down to 1) proves only what the depth allows."""
    histogram = make_histogram(20, {7: 5, 1: 1})
    assert max(_bounds.simple(histogram, 20, 4).values()) == 2
    assert proven(histogram, 20, 4, rows=8) == 3
    assert proven(histogram, 20, 4, rows=1) <= 3


@settings(max_examples=80, deadline=None)
@given(narrow_instances(), st.sampled_from([1, 2, 4, 64]), st.sampled_from([1, 2]))
def test_bound_never_exceeds_the_optimum_nor_the_plan(instance, rows, share):
    """Any number of groups, any rung, in units or not (`Tuning.UNITS_FROM` at 1: units of
    the largest divisor of L up to the groups' width, or half of it): the bound is at most
    the exact optimum (brute force and HiGHS's integer program agree on it) and at most
    the packs of `optimal`'s plan."""
    histogram, max_length, depth = instance
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "UNITS_FROM", 1)
        patch.setattr(Tuning, "PROVE_UNIT", share)
        patch.setattr(Tuning, "PROVE_UNIT_MOST", max_length)
        bound = proven(histogram, max_length, depth, rows)
    best = brute_force_packs(histogram, max_length, depth)
    assert bound <= best
    if histogram.sum() <= 6:
        assert exact_packs(histogram, max_length, depth) == best
    assert bound <= optimal.pack(histogram, max_length, depth, seed=0).counts.sum()


def test_long_context_bound_within_0_2_percent_where_equal_groups_were_1_percent_below():
    """Stretched documents of about 0.37 L at L=12,288 depth 16 (lengths 2,7xx-7,xxx): the
    plan has 2,170 packs (2,171 before its 1,6xx lengths were planned as many where
    pricing's table is large, `_paths.few`; 2,170 before its groups were in units at
    L=12,288, `Tuning.UNITS_FROM`). Groups of equal width over all of L proved 2,147 (1.07% below:
    before this path); groups over the lengths present prove 2,167 (0.18%), and their LP's
    duals over the real lengths (`_lift.prove`) 2,168 (0.14%)."""
    histogram = stretched(12288, 5000, 0.37, 0.11, seed=0)
    result = optimal.pack(histogram, 12288, 16, seed=0, time_limit=None)
    assert (int(result.counts.sum()), result.lower_bound_packs, result.lower_bound_kind) == \
        (2170, 2168, "lp")


def test_the_rounded_down_lps_duals_lift_a_bound_over_the_real_lengths(monkeypatch):
    """Two 4s, two 5s and a 6 in packs of 12 (tokens: 2 packs). In one group rounded down to
    4, five 4s fit three a pack: the LP is 5/3, so 2. Its dual, 1/3 for a 4, holds for every
    real length (`_lift`); over the real lengths no three fit in 12 (4 + 4 + 5 > 12, and
    only two 4s), so the best pack is worth 2/3 and the bound is (5/3) / (2/3) = 2.5, so 3:
    the optimum. Without the lift, 2 (one group only: finer ones would prove 3 too)."""
    monkeypatch.setattr(Tuning, "PROVE_MOST_ROWS", 1)
    histogram = make_histogram(12, {4: 2, 5: 2, 6: 1})
    assert proven(histogram, 12, None, 1) == 3 == brute_force_packs(histogram, 12, None)
    monkeypatch.setattr(_paths._lift, "prove", lambda *args, **kwargs: None)
    assert proven(histogram, 12, None, 1) == 2


def test_a_lift_does_not_start_with_less_time_left_than_the_last_took(monkeypatch):
    calls = []
    monkeypatch.setattr(_paths._lift, "lifted", lambda *args, **kwargs: calls.append(args) or 7)
    search = _paths.Search({"tokens": 1})
    search.lift_seconds = 0.5
    budget = _budget.Budget(0.4, clock=lambda: 0.0)
    histogram = make_histogram(12, {4: 2})
    _paths._lift.prove(search, histogram, None, np.array([4]), np.array([0.5]), budget)
    assert calls == [] and "lp" not in search.bounds
    _paths._lift.prove(search, histogram, None, np.array([4]), np.array([0.5]),
                       _budget.Budget(0.6, clock=lambda: 0.0))
    assert len(calls) == 1 and search.bounds["lp"] == 7 == search.lifted


def test_the_first_lift_runs_on_the_lifts_budget(monkeypatch):
    """With ``lifts`` (`grouped` on long contexts), the first lift of a rounded-down LP's duals
    gets that budget, which runs past `prove_down`'s own (cut, a lift proves nothing); the
    next ones, whose time the first measured, get `prove_down`'s."""
    given_to = []

    def prove(search, histogram, depth, lengths, duals, budget, *args):
        given_to.append(budget)
        search.lift_seconds = 0.1  # measured: the next lift is timed by it
        return 0

    monkeypatch.setattr(_paths._lift, "prove", prove)
    monkeypatch.setattr(_paths.Search, "done", lambda self: False)
    monkeypatch.setattr(Tuning, "PROVE_ROWS", 1)
    histogram = make_histogram(12, {4: 2, 5: 2, 6: 1})
    own, lifts = _budget.Budget(None), _budget.Budget(None)
    search = _paths.Search(_bounds.simple(histogram, 12, None))
    _paths.prove_down(search, histogram, 12, None, own, lifts=lifts)
    assert len(given_to) >= 2 and given_to[0] is lifts and all(b is own for b in given_to[1:])
    given_to.clear()
    _paths.prove_down(_paths.Search(_bounds.simple(histogram, 12, None)), histogram, 12, None, own)
    assert given_to and all(b is own for b in given_to)


def test_the_spike_at_max_length_is_a_group_of_its_own():
    """Windows of L never share a pack; rounded down with shorter lengths they would. Four
    20s and eight 2s in packs of 20, depth 4: 6 packs (the 20s alone, the 2s four a pack).
    On one group over 2-19 and the 20s their own, the LP proves 6; with the 20s rounded down
    to 2 as well, only the depth bound, 3. Hand-checked."""
    histogram = make_histogram(20, {20: 4, 2: 8})
    assert _groups.present(histogram, 1, ends=0, spike=True).tolist() == [1, 2, 20]
    assert _groups.present(histogram, 1, ends=0).tolist() == [1, 2]
    assert max(_bounds.simple(histogram, 20, 4).values()) == 5
    assert proven(histogram, 20, 4, rows=1) == 6 == exact_packs(histogram, 20, 4)


def test_where_the_depth_binds_too_the_plan_has_fewer_groups(monkeypatch):
    """Short documents at L=12,288: `fine_grid` plans on up to `Tuning.UNIT_ROWS` groups, but on
    `Tuning.DEPTH_FINE_ROWS` (512 here) where the depth binds beside the tokens: `prove_down`'s LP
    above the token bound and `_bounds.windows_alone` at least that bound (depth 8 here, not
    12: 36,858 and 28,525 on a token bound of 36,100); and where the sequences are
    `Tuning.DEPTH_NEAR` (0.85) of the slots their tokens need or more, whatever that LP proved
    (long48: seed 15 case 4, 0.891 of the slots at depth 6, 0.204% -> 0.176%): 1.03 at depth
    8 here, 0.69 at depth 12 (fewer groups there only with DEPTH_NEAR at 0.69)."""
    from test_optimal_long_context import stretched

    histogram = stretched(12288, 200_000, 0.05, 1.6, seed=0)
    monkeypatch.setattr(Tuning, "DEPTH_FINE_ROWS", 512)
    seen = {}

    def prove_down(search, *args, **kwargs):
        if seen["lp_above"]:
            search.prove(search.bounds["tokens"] + 1, "lp")
        return 256, 0.0, []

    def plan_up(search, histogram, lengths, demand, length, depth, simple, starts, *a, **k):
        seen["groups"] = len(starts)

    monkeypatch.setattr(_paths, "prove_down", prove_down)
    monkeypatch.setattr(_paths, "plan_up", plan_up)
    monkeypatch.setattr(_paths, "prove_then_refine", lambda *a, **k: None)

    def groups(depth, lp_above):
        seen["lp_above"] = lp_above
        search = _paths.Search(_bounds.simple(histogram, 12288, depth))
        search.offer({(1,): 10 ** 9})  # far above the bound: `prove_down` runs
        _paths.grouped(search, histogram, 12288, depth, _budget.Budget(None))
        return seen["groups"]

    assert Tuning.DEPTH_NEAR == 0.85
    assert 1.0 < _bounds.slots_share(histogram, 8) < 1.05
    assert 0.68 < _bounds.slots_share(histogram, 12) < 0.69
    assert Tuning.DEPTH_FINE_ROWS < groups(12, True) <= Tuning.UNIT_ROWS
    assert Tuning.DEPTH_FINE_ROWS < groups(12, False) <= Tuning.UNIT_ROWS
    assert groups(8, True) <= Tuning.DEPTH_FINE_ROWS
    assert groups(8, False) <= Tuning.DEPTH_FINE_ROWS
    monkeypatch.setattr(Tuning, "DEPTH_NEAR", 0.68)
    assert groups(12, False) <= Tuning.DEPTH_FINE_ROWS


def test_split_cuts_the_groups_where_rounding_down_loses_most():
    """Groups 1-4, 5-8, 9-12 and 13-16, each row at its start with 1, 10, 1 and 5 sequences and
    duals 0.1, 0.2, 0.5, 0.5: rounded down, a group's sequences may lose up to (next dual - its
    own) each: 0.1, 3.0, 0 and nothing after the last. One split: 5-8 at its middle (7); any
    more: 1-4 (at 3) too, and never the two where the duals do not rise."""
    starts, demand = np.array([1, 5, 9, 13]), np.array([1, 10, 1, 5])
    duals = np.array([0.1, 0.2, 0.5, 0.5])
    assert _groups.split(starts, starts, demand, duals, most=1).tolist() == [1, 5, 7, 9, 13]
    assert _groups.split(starts, starts, demand, duals, most=4).tolist() == [1, 3, 5, 7, 9, 13]
    assert _groups.split(starts, starts, demand, np.full(4, 0.25), most=4).tolist() == \
        starts.tolist()


def test_split_in_units_cuts_at_a_multiple_and_keeps_groups_under_two_units():
    """In units of 4, rows at 8 (group 8-11), 12 (12-23) and 24: 8-11 loses the most (5 x 0.4)
    but is one unit wide; 12-23 (5 x 0.3) is cut at 16, its middle (18) down to a multiple."""
    starts = np.array([1, 8, 12, 24])
    lengths, demand = np.array([8, 12, 24]), np.array([5, 5, 1])
    duals = np.array([0.1, 0.5, 0.8])
    assert _groups.split(starts, lengths, demand, duals, most=2, unit=4).tolist() == \
        [1, 8, 12, 16, 24]


@settings(max_examples=60, deadline=None)
@given(narrow_instances(), st.sampled_from([1, 2]), st.sampled_from([1, 2, 3]))
def test_bound_on_split_groups_never_exceeds_the_optimum(instance, rows, splits):
    """From the first LP on, each finer one on the last one's groups split (`_groups.split`):
    every bound is at most the exact optimum."""
    histogram, max_length, depth = instance
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "PROVE_SPLIT_FROM", rows)
        patch.setattr(Tuning, "PROVE_SPLITS", splits)
        patch.setattr(Tuning, "PROVE_MOST_ROWS", 64)
        bound = proven(histogram, max_length, depth, rows)
    assert bound <= brute_force_packs(histogram, max_length, depth)



def test_a_split_lp_starts_only_where_gaining_as_much_as_the_last_would_prove_more(monkeypatch):
    """The last LP (on groups 1-4, 5-8, 9-12) proved 105, 5 more than the one before; the best
    bound is 109 (a lift): gaining 5 again, a split LP would prove 110, so it starts; with
    the best at 110, it would prove no more, so it does not (on the long-context suite's
    fresh seeds 498-509 such LPs took the time of the LP over all lengths after the plans:
    500/9 0.014% -> 0.097% without this)."""
    calls = []

    def rounded_down_lp(search, rounded, *args):
        calls.append(np.flatnonzero(rounded).tolist())

    monkeypatch.setattr(_paths._units, "rounded_down_lp", rounded_down_lp)
    monkeypatch.setattr(Tuning, "PROVE_SPLIT_FROM", 1)
    histogram = make_histogram(12, {1: 2, 5: 9, 6: 1, 9: 3})
    starts = np.array([1, 5, 9])
    last = (1, 105, 5, starts, starts, np.array([2, 10, 3]), np.array([0.1, 0.3, 0.5]))
    for best, runs in ((109, 1), (110, 0)):
        calls.clear()
        search = _paths.Search({"tokens": 100, "lp": best})
        _paths.prove_down(search, histogram, 12, None, _budget.Budget(None), 2, 0.0, (), last)
        assert len(calls) == runs, best


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=4, max_size=40), st.sampled_from([1, 2, 4]),
       st.integers(0, 12), st.data())
def test_split_only_adds_starts_inside_groups_two_units_wide(counts, unit, most, data):
    """Whatever the duals: the starts kept, at most ``most`` added, each a multiple of the
    unit strictly inside a group at least two units wide, and none in a group twice."""
    histogram = np.array(counts, dtype=np.int64)
    starts = _groups.present(histogram, data.draw(st.integers(1, 8)), 0, unit=unit)
    rounded = _units.in_units(_groups.rounded(histogram, starts, up=False), unit, up=True)
    lengths = (np.flatnonzero(rounded) + 1) * unit
    duals = np.sort(data.draw(st.lists(st.floats(0, 1), min_size=len(lengths),
                                       max_size=len(lengths))))
    split = _groups.split(starts, lengths, rounded[lengths // unit - 1], np.array(duals),
                          most, unit)
    added = np.setdiff1d(split, starts)
    assert set(starts.tolist()) <= set(split.tolist()) and len(added) <= most
    assert np.all(added % unit == 0)
    group = np.searchsorted(starts, added, side="right") - 1
    ends = np.append(starts[1:], len(histogram) + 1)
    assert np.all(added > starts[group]) and np.all(added < ends[group])
    assert np.all(ends[group] - starts[group] >= 2 * unit)
    assert len(set(group.tolist())) == len(group)
