"""The `optimal` planner: exact tiny cases, its lower bound, its parts, its targets."""

import collections
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack import datasets
from tfpack.packing import plan
from tfpack.packing.algorithms import (_best_fit, _column_generation, _exact_fill, _knapsack, _lp,
                                       _lp_plan, _paths, optimal)
from tfpack.packing.algorithms._tuning import Tuning
from tfpack.packing.checks import check_plan, slot_counts


def make_histogram(max_length, counts_by_length):
    counts = np.zeros(max_length, dtype=np.int64)
    for length, count in counts_by_length.items():
        counts[length - 1] += count
    return counts


def as_counter(result):
    return collections.Counter(dict(zip(result.strategies, result.counts.tolist())))


def assert_valid(result, histogram, max_length, max_sequences_per_pack):
    """The invariants, checked here independently of `tfpack.packing.checks`."""
    assert result.counts.dtype == np.int64
    assert len(result.strategies) == len(result.counts) == len(set(result.strategies))
    assert np.all(result.counts > 0)
    slots = np.zeros(max_length + 1, dtype=np.int64)
    for strategy, count in zip(result.strategies, result.counts):
        assert isinstance(strategy, tuple) and strategy
        assert list(strategy) == sorted(strategy, reverse=True)
        assert sum(strategy) <= max_length
        assert max_sequences_per_pack is None or len(strategy) <= max_sequences_per_pack
        for length in strategy:
            slots[length] += count
    assert np.all(slots[1:] >= histogram)
    check_plan(result.strategies, result.counts, histogram, max_length=max_length,
               max_sequences_per_pack=max_sequences_per_pack)


def brute_force_packs(histogram, max_length, max_sequences_per_pack):
    """Fewest packs for a handful of sequences, by dynamic programming over subsets."""
    items = np.repeat(np.arange(1, len(histogram) + 1), histogram)
    n = len(items)
    sums = [int(items[[i for i in range(n) if mask >> i & 1]].sum()) for mask in range(1 << n)]
    fits = [sums[m] <= max_length and (max_sequences_per_pack is None or bin(m).count("1") <= max_sequences_per_pack)
            for m in range(1 << n)]
    best = [0] + [math.inf] * ((1 << n) - 1)
    for mask in range(1, 1 << n):
        low = mask & -mask
        sub = mask
        while sub:  # every feasible pack holding the lowest remaining item
            if sub & low and fits[sub]:
                best[mask] = min(best[mask], best[mask ^ sub] + 1)
            sub = (sub - 1) & mask
    return best[-1]


# --- exact tiny cases ------------------------------------------------------


def test_perfect_packing_is_found_and_proven_optimal():
    # 32 tokens in packs of 8, two per pack: only 6+2, 5+3 and 4+4 fill a pack.
    histogram = make_histogram(8, {6: 2, 2: 2, 5: 1, 3: 1, 4: 2})
    result = optimal.pack(histogram, 8, 2, seed=0)
    assert as_counter(result) == {(6, 2): 2, (5, 3): 1, (4, 4): 1}
    assert result.lower_bound_packs == 4


def test_fractional_lp_bound_beats_the_token_bound():
    # Packs of 6: a 4 fits with nothing but a 2, and there is none, so each 4 is
    # alone; three 3s need 1.5 packs in the LP. LP = 3.5 -> bound 4, while
    # ceil(17 tokens / 6) is only 3. Four packs is optimal.
    histogram = make_histogram(6, {3: 3, 4: 2})
    result = optimal.pack(histogram, 6, None, seed=0)
    assert as_counter(result) == {(4,): 2, (3, 3): 1, (3,): 1}
    assert result.lower_bound_packs == 4


def test_depth_limit_is_respected_and_bound_is_tight():
    # Lengths 2, 2, 2, 3, 5, 6, 6 in packs of 8, at most 3 per pack (the LP's plan), and
    # at most 2 (the pairing greedy's: the longest with the shortest that fits).
    histogram = make_histogram(8, {2: 3, 3: 1, 5: 1, 6: 2})
    result = optimal.pack(histogram, 8, 3, seed=0)
    assert as_counter(result) == {(6, 2): 2, (5, 3): 1, (2,): 1}
    assert result.lower_bound_packs == 4
    result = optimal.pack(histogram, 8, 2, seed=0)
    assert as_counter(result) == {(6, 2): 2, (5, 2): 1, (3,): 1}
    assert result.lower_bound_packs == 4


def test_depth_one_is_one_sequence_per_pack():
    histogram = make_histogram(16, {1: 3, 7: 2, 16: 1})
    result = optimal.pack(histogram, 16, 1, seed=0)
    assert as_counter(result) == {(16,): 1, (7,): 2, (1,): 3}
    assert result.lower_bound_packs == 6


def test_depth_none_packs_many_short_sequences_together():
    histogram = make_histogram(64, {1: 100, 63: 1})
    result = optimal.pack(histogram, 64, None, seed=0)
    assert_valid(result, histogram, 64, None)
    assert sum(result.counts) == result.lower_bound_packs == 3  # 163 tokens


def test_deterministic_and_independent_of_seed():
    rng = np.random.default_rng(7)
    histogram = rng.integers(0, 50, size=128)
    first = optimal.pack(histogram, 128, 3, seed=0)
    again = optimal.pack(histogram, 128, 3, seed=123)
    assert first.strategies == again.strategies
    np.testing.assert_array_equal(first.counts, again.counts)
    assert first.lower_bound_packs == again.lower_bound_packs


def test_bound_rounding_tolerates_float_noise_only():
    assert _column_generation.ceil(3.0 + 1e-12) == 3
    assert _column_generation.ceil(3.0 - 1e-12) == 3
    assert _column_generation.ceil(3.5) == 4
    assert _column_generation.ceil(8143828.857142861) == 8143829
    assert _column_generation.ceil(8143828.000000001) == 8143828  # within 1e-9 relative


# --- properties ------------------------------------------------------------


@st.composite
def tiny_instances(draw):
    max_length = draw(st.integers(1, 24))
    max_sequences_per_pack = draw(st.one_of(st.none(), st.integers(1, 4)))
    lengths = draw(st.lists(st.integers(1, max_length), min_size=1, max_size=8))
    return make_histogram(max_length, collections.Counter(lengths)), max_length, max_sequences_per_pack


@settings(max_examples=60)
@given(tiny_instances())
def test_bound_never_exceeds_the_true_optimum(instance):
    histogram, max_length, max_sequences_per_pack = instance
    result = optimal.pack(histogram, max_length, max_sequences_per_pack, seed=0)
    assert_valid(result, histogram, max_length, max_sequences_per_pack)
    best = brute_force_packs(histogram, max_length, max_sequences_per_pack)
    assert result.lower_bound_packs <= best <= result.counts.sum()


@settings(max_examples=150)
@given(tiny_instances())
def test_two_a_pack_is_planned_exactly(instance):
    """Depth 2 is a matching: the greedy's plan (`_pairs`) has the fewest packs there
    are (brute force), every sequence in one slot, and is its own bound ("pairs")."""
    histogram, max_length, _ = instance
    result = optimal.pack(histogram, max_length, 2, seed=0)
    assert_valid(result, histogram, max_length, 2)
    best = brute_force_packs(histogram, max_length, 2)
    assert result.counts.sum() == best == result.lower_bound_packs
    assert result.lower_bound_kind in ("tokens", "sequences", "long", "pairs")


def test_two_a_pack_by_hand_where_the_simple_bounds_are_far():
    # Four 80s and eight 25s in packs of 100, two a pack: no 80 takes a 25, so 4 + 4
    # packs, while tokens (520 / 100), sequences (12 / 2) and the long bound all say 6.
    histogram = make_histogram(100, {80: 4, 25: 8})
    result = optimal.pack(histogram, 100, 2, seed=0)
    assert as_counter(result) == {(80,): 4, (25, 25): 4}
    assert (result.lower_bound_packs, result.lower_bound_kind) == (8, "pairs")


@st.composite
def instances(draw):
    max_length = draw(st.sampled_from([7, 32, 100, 128, 300]))
    max_sequences_per_pack = draw(st.one_of(st.none(), st.integers(1, 6)))
    lengths = draw(st.lists(st.integers(1, max_length), min_size=1, max_size=30, unique=True))
    counts = draw(st.lists(st.integers(1, 2000), min_size=len(lengths), max_size=len(lengths)))
    return make_histogram(max_length, dict(zip(lengths, counts))), max_length, max_sequences_per_pack


@settings(max_examples=40)
@given(instances())
def test_every_sequence_has_a_slot_and_bounds_hold(instance):
    histogram, max_length, max_sequences_per_pack = instance
    result = optimal.pack(histogram, max_length, max_sequences_per_pack, seed=0)
    assert_valid(result, histogram, max_length, max_sequences_per_pack)
    packs = int(result.counts.sum())
    tokens = int(histogram @ np.arange(1, max_length + 1))
    assert isinstance(result.lower_bound_packs, int)
    assert -(-tokens // max_length) <= result.lower_bound_packs <= packs
    assert packs <= histogram.sum()  # never worse than one sequence per pack
    # Never worse than best fit decreasing, which seeds it.
    counts = {i + 1: int(c) for i, c in enumerate(histogram) if c}
    assert packs <= sum(_best_fit.fill(counts, {}, max_length, max_sequences_per_pack).values())


@st.composite
def knapsacks(draw):
    max_length = draw(st.integers(1, 20))
    lengths = sorted(draw(st.lists(st.integers(1, max_length), min_size=1, max_size=5,
                                   unique=True)))
    bounds = draw(st.lists(st.integers(1, 4), min_size=len(lengths), max_size=len(lengths)))
    values = draw(st.lists(st.floats(0, 1), min_size=len(lengths), max_size=len(lengths)))
    depth = draw(st.one_of(st.none(), st.integers(1, 4)))
    return np.array(lengths), np.array(bounds), np.array(values), max_length, depth


@settings(max_examples=80)
@given(knapsacks())
def test_pricing_finds_the_best_pack_and_returns_feasible_ones(problem):
    assert_pricing_is_exact(*problem)


def brute_force_best(lengths, bounds, values, max_length, depth):
    best = 0.0
    for copies in itertools.product(*(range(b + 1) for b in bounds)):
        copies = np.array(copies)
        if copies @ lengths <= max_length and (depth is None or copies.sum() <= depth):
            best = max(best, float(copies @ values))
    return best


def assert_pricing_is_exact(lengths, bounds, values, max_length, depth):
    """The best value equals brute force exactly in float64, and from above within
    `OVERSTATES` in float32; every pack is feasible and worth its value."""
    best = brute_force_best(lengths, bounds, values, max_length, depth)
    exact = _knapsack.price(lengths, bounds, values, max_length, depth, min_value=-1.0,
                            max_patterns=len(lengths), exact=True)
    assert exact.best_value == pytest.approx(best, abs=1e-12)
    fast = _knapsack.price(lengths, bounds, values, max_length, depth, min_value=-1.0,
                           max_patterns=len(lengths))
    assert best <= fast.best_value <= best * (1 + _knapsack.OVERSTATES) + 1e-12
    for pricing in (exact, fast):
        for (rows, copies), value in zip(pricing.patterns, pricing.pattern_values):
            assert np.all(copies >= 1) and np.all(copies <= bounds[rows])
            assert copies @ lengths[rows] <= max_length
            assert depth is None or copies.sum() <= depth
            assert copies @ values[rows] == pytest.approx(value, abs=1e-12)
        assert np.all(np.diff(pricing.pattern_values) <= 0)  # best first


def test_float32_pricing_bounds_the_exact_best_value_from_above():
    """On tables too large for brute force: float32 never understates, and
    overstates by at most `OVERSTATES`; the packs are the exact DP's or as good."""
    rng = np.random.default_rng(1)
    for depth in (3, 8, 32):
        lengths = np.unique(rng.integers(1, 600, 80))
        bounds = rng.integers(1, 6, len(lengths))
        values = np.sort(rng.random(len(lengths)) / 3)
        exact, fast = (_knapsack.price(lengths, bounds, values, 1000, depth, min_value=0.0,
                                       max_patterns=8, exact=e) for e in (True, False))
        assert exact.best_value < fast.best_value  # float32 ran, and its margin with it
        assert fast.best_value <= exact.best_value * (1 + _knapsack.OVERSTATES)
        assert fast.pattern_values[0] >= exact.pattern_values[0] * (1 - 1e-6)
def test_effective_depth_drops_a_limit_that_cannot_bind():
    lengths, bounds = np.array([3, 5]), np.array([10, 10])
    assert _knapsack.effective_depth(lengths, bounds, 10, 4) is None  # at most 3 fit
    assert _knapsack.effective_depth(lengths, bounds, 10, 2) == 2


@pytest.mark.parametrize("incremental, ipm_rows", [(True, 2048), (True, 0), (False, 2048)])
def test_master_lp_backends_agree(incremental, ipm_rows, monkeypatch):
    monkeypatch.setattr(_lp, "_IPM_ROWS", ipm_rows)  # 0: first solve by interior point
    # Demand 3 and 2; packs of two row-0 sequences, or one row-1 sequence.
    master = _lp.Master(np.array([3.0, 2.0]), incremental=incremental)
    if incremental and not master.incremental:
        pytest.skip("no HiGHS object in this SciPy")
    master.add([(np.array([0]), np.array([2])), (np.array([1]), np.array([1]))])
    value, x, duals = master.solve()
    assert value == pytest.approx(3.5)
    np.testing.assert_allclose(x, [1.5, 2.0])
    np.testing.assert_allclose(duals, [0.5, 1.0])
    master.add([(np.array([0, 1]), np.array([1, 1]))])  # one of each: 2 of it + half a pair
    value, x, _ = master.solve()
    assert value == pytest.approx(2.5)
    np.testing.assert_allclose(x, [0.5, 0.0, 2.0])


@pytest.mark.parametrize("incremental", [True, False])
def test_master_lp_solves_demands_past_2_to_the_32_scaled(incremental):
    # The same LP as above at 2^40 times the demand: x and the value scale, duals do not.
    big = 2.0 ** 40
    master = _lp.Master(np.array([3.0, 2.0]) * big, incremental=incremental)
    assert master.scale == 2.0 ** 16
    master.add([(np.array([0]), np.array([2])), (np.array([1]), np.array([1]))])
    value, x, duals = master.solve()
    assert value == pytest.approx(3.5 * big)
    np.testing.assert_allclose(x, [1.5 * big, 2.0 * big])
    np.testing.assert_allclose(duals, [0.5, 1.0])


def test_optimal_plans_counts_past_2_to_the_32_of_a_length():
    # Odd lengths 1..31, 2^36 / 16 sequences each: HiGHS called the unscaled LP unbounded.
    histogram = np.zeros(31, dtype=np.int64)
    histogram[::2] = 2**36 // 16
    result = plan(histogram, 31, None, algorithm="optimal", time_limit=0.5)
    check_plan(result.strategies, result.counts, histogram, max_length=31,
               max_sequences_per_pack=None)
    packs, bound = result.metrics["packs"], result.metrics["lower_bound_packs"]
    assert bound <= packs <= bound * 1.002


def test_highs_time_limit_counts_from_its_run_clock_now():
    """HiGHS's `time_limit` is read against a run clock that adds up over every solve of
    one object: a budget's time left is added to that clock, not set alone (a master
    that had run 0.6 s in all stopped at once with 0.57 s left)."""
    from tfpack.packing.algorithms import _budget

    rng = np.random.default_rng(0)
    demand = rng.integers(1, 50, 100).astype(np.float64)
    master = _lp.Master(demand)
    if not master.incremental:
        pytest.skip("no HiGHS object in this SciPy")
    for _ in range(2):  # columns of up to three rows: some run time accumulates
        rows = [np.unique(rng.integers(0, 100, 3)) for _ in range(100)]
        master.add([(r, np.ones(len(r), dtype=np.int64)) for r in rows]
                   + [(np.array([r]), np.array([1])) for r in range(100)])
        master.solve()
    before = master._highs.getRunTime()
    assert before > 0.0
    master.add([(np.array([0, 1]), np.array([1, 1]))])
    master.solve(_budget.Budget(0.5, clock=lambda: 0.0))  # a frozen clock: 0.5 s, wall too
    limit = master._highs.getOptionValue("time_limit")
    limit = limit[1] if isinstance(limit, tuple) else limit  # (status, value) in highspy
    assert limit == pytest.approx(before + 0.5, abs=1e-9)


def test_without_the_highs_object_linprog_gives_the_same_plan(monkeypatch):
    rng = np.random.default_rng(3)
    histogram = rng.integers(0, 40, size=96)
    fast = optimal.pack(histogram, 96, 3, seed=0)
    monkeypatch.setattr(_lp, "_HIGHS", None)
    slow = optimal.pack(histogram, 96, 3, seed=0)
    assert_valid(slow, histogram, 96, 3)
    assert slow.lower_bound_packs == fast.lower_bound_packs == 1007
    # Both are optimal here (1007 packs); LP ties may round one pack apart elsewhere.
    assert int(fast.counts.sum()) == 1007
    assert int(slow.counts.sum()) <= 1008


def test_best_fit_fills_open_packs_first():
    packs = _best_fit.fill({500: 2, 12: 3}, {(300,): 1}, 512, 2)
    assert packs == {(300, 12): 1, (500, 12): 2}


# --- full packs first, for histograms with many lengths -------------------


def assert_full_packs_and_rest(histogram, max_length, max_sequences_per_pack):
    packs, rest = _exact_fill.fill(histogram, max_length, max_sequences_per_pack)
    depth = min(max_sequences_per_pack or _exact_fill._FILL_DEPTH, _exact_fill._FILL_DEPTH)
    slots = np.zeros(max_length, dtype=np.int64)
    for pack, number in packs.items():
        assert number > 0 and list(pack) == sorted(pack, reverse=True)
        assert sum(pack) == max_length and len(pack) <= depth
        np.add.at(slots, np.array(pack) - 1, number)
    assert rest.dtype == np.int64 and np.all(rest >= 0)
    np.testing.assert_array_equal(slots + rest, histogram)  # every sequence exactly once
    return packs, rest


def test_exact_fill_completes_groups_of_packs():
    histogram = make_histogram(8, {6: 2, 5: 1, 3: 1, 2: 2, 1: 1})
    packs, rest = assert_full_packs_and_rest(histogram, 8, 3)
    assert packs == {(6, 2): 2, (5, 3): 1}  # each 6 by a 2; the 5 by a 3
    assert rest.tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    # No 3 fills the 5's space: the shortest joins (5+1), then one sequence (2) fills it.
    packs, rest = assert_full_packs_and_rest(make_histogram(8, {5: 1, 2: 1, 1: 3}), 8, 4)
    assert packs == {(5, 2, 1): 1} and rest.tolist() == [2, 0, 0, 0, 0, 0, 0, 0]
    # Without the 2: 5+1, then a pair 1+1; at depth 3 only a pair could fill 3: none.
    packs, rest = assert_full_packs_and_rest(make_histogram(8, {5: 1, 1: 3}), 8, 4)
    assert packs == {(5, 1, 1, 1): 1} and not rest.any()
    packs, rest = assert_full_packs_and_rest(make_histogram(8, {5: 1, 1: 3}), 8, 3)
    assert not packs and rest.tolist() == [3, 0, 0, 0, 1, 0, 0, 0]
    # A pair of equal lengths needs two copies.
    packs, rest = assert_full_packs_and_rest(make_histogram(8, {6: 1, 1: 1}), 8, 3)
    assert not packs and rest.tolist() == [1, 0, 0, 0, 0, 1, 0, 0]
    # Nothing fits: no pair sums to a space (41 after the 23) below twice the shortest (50).
    histogram = make_histogram(64, {23: 1, 50: 1, 57: 1})
    packs, rest = assert_full_packs_and_rest(histogram, 64, 3)
    assert not packs and rest.tolist() == histogram.tolist()


@settings(max_examples=60)
@given(st.sampled_from([8, 16, 64, 100]), st.one_of(st.none(), st.integers(1, 10)),
       st.data())
def test_exact_fill_packs_are_full_and_hold_every_sequence_once(max_length, depth, data):
    counts = data.draw(st.lists(st.integers(0, 12), min_size=max_length, max_size=max_length))
    assert_full_packs_and_rest(np.array(counts, dtype=np.int64), max_length, depth)


@settings(max_examples=80)
@given(st.sampled_from([8, 16, 64]), st.one_of(st.none(), st.integers(1, 6)), st.data())
def test_exact_fill_gives_up_only_on_what_would_be_left_anyway(max_length, depth, data):
    """`most_left=(tokens, lengths)`: the fill gives up (TooMuchLeft) only when its rest
    holds more tokens or lengths than that, and otherwise returns what it returns without."""
    histogram = np.array(data.draw(st.lists(st.integers(0, 9), min_size=max_length,
                                            max_size=max_length)), dtype=np.int64)
    packs, rest = _exact_fill.fill(histogram, max_length, depth)
    tokens, lengths = int(rest @ np.arange(1, max_length + 1)), int(np.count_nonzero(rest))
    most = (data.draw(st.integers(0, tokens + 2)), data.draw(st.integers(0, lengths + 1)))
    try:
        again = _exact_fill.fill(histogram, max_length, depth, most_left=most)
    except _exact_fill.TooMuchLeft:
        assert tokens > most[0] or lengths > most[1]
    else:
        assert again[0] == packs and again[1].tolist() == rest.tolist()
    if tokens <= most[0] and lengths <= most[1]:  # within: never gives up
        assert _exact_fill.fill(histogram, max_length, depth, most_left=most)[0] == packs


def test_exact_fill_gives_up_as_soon_as_an_opener_is_left():
    # Packs of 8, depth 2: the 7 finds no 1 (left: 7 tokens), so with at most 6 it stops there.
    histogram = make_histogram(8, {7: 1, 5: 1, 3: 1})
    with pytest.raises(_exact_fill.TooMuchLeft):
        _exact_fill.fill(histogram, 8, 2, most_left=(6, 10))
    assert _exact_fill.fill(histogram, 8, 2, most_left=(7, 10))[0] == {(5, 3): 1}


def lognormal_histogram(sequences, max_length, seed):
    rng = np.random.default_rng(seed)
    lengths = np.minimum(np.exp(rng.normal(6.3, 1.2, sequences)).astype(np.int64) + 1, max_length)
    return np.bincount(lengths, minlength=max_length + 1)[1:]


def test_many_lengths_are_planned_from_full_packs_without_the_lp_over_all_of_them(monkeypatch):
    histogram = lognormal_histogram(40_000, 4096, seed=5)
    assert np.count_nonzero(histogram) >= Tuning.MANY_LENGTHS
    lp_rows = []
    column_generation = _column_generation.run
    monkeypatch.setattr(_column_generation, "run",
                        lambda lengths, *args, **kwargs: lp_rows.append(len(lengths))
                        or column_generation(lengths, *args, **kwargs))
    result = optimal.pack(histogram, 4096, 8, seed=0)
    assert_valid(result, histogram, 4096, 8)
    tokens = int(histogram @ np.arange(1, 4097))
    assert result.lower_bound_packs == -(-tokens // 4096)  # the token bound: valid
    bound = result.lower_bound_packs
    assert result.counts.sum() <= bound + _lp_plan.slack(bound)
    assert lp_rows and max(lp_rows) < Tuning.MANY_LENGTHS // 2  # only the rest's LP


def test_full_packs_first_is_skipped_when_sequences_outnumber_the_token_bound(monkeypatch):
    # Three of each length 1..2,048 in packs of 4,096 and two: 3,072 packs (best fit's
    # pairs), while the tokens need 1,537: full packs cannot be the plan.
    histogram = make_histogram(4096, {length: 3 for length in range(1, 2049)})
    monkeypatch.setattr(_exact_fill, "fill", None)  # would raise if called
    result = optimal.pack(histogram, 4096, 2, seed=0)
    assert result.lower_bound_packs == 3072 == result.counts.sum()


def test_full_packs_first_returns_best_fit_when_it_meets_the_token_bound(monkeypatch):
    # Lengths 1..4,095 once each: best fit pairs l with 4,096 - l, and 2,048 is alone.
    histogram = np.ones(4096, dtype=np.int64)
    histogram[-1] = 0
    monkeypatch.setattr(_exact_fill, "fill", None)  # would raise if called
    result = optimal.pack(histogram, 4096, None, seed=0)
    assert_valid(result, histogram, 4096, None)
    assert result.lower_bound_packs == 2048 == result.counts.sum()


def test_full_packs_first_runs_only_below_its_max_length(monkeypatch):
    """From `_FULL_FIRST_BELOW` tokens a pack the greedy is not started: at L=32,768-65,536
    it ran 0.65-1.8 s to give up on every suite case, time the grouped plan lost."""
    histogram = lognormal_histogram(40_000, 4096, seed=5)
    calls = []
    fill = _exact_fill.fill
    monkeypatch.setattr(_exact_fill, "fill", lambda *a, **k: calls.append(1) or fill(*a, **k))
    optimal.pack(histogram, 4096, 8, seed=0, time_limit=0.2)
    assert calls  # below: as before
    calls.clear()
    monkeypatch.setattr(Tuning, "FULL_FIRST_BELOW", 4096)
    result = optimal.pack(histogram, 4096, 8, seed=0, time_limit=0.2)
    assert not calls
    assert_valid(result, histogram, 4096, 8)


def test_a_grouped_plan_leaves_time_for_what_follows_its_lp_and_learns_how_much(monkeypatch):
    """`_plan_up`: the LP's budget ends ``search.reserve`` before the plan's; the reserve
    grows to the most a plan ran past its own budget (its rounding, `real_packs`)."""
    from tfpack.packing.algorithms import _budget

    now, ends = [0.0], []

    def plan(lengths, demand, length, depth, simple, *, budget, first_round, repair, dives):
        assert repair == Tuning.REPAIR_SHARE  # a grouped plan keeps time for `_repair`
        assert dives  # not a long context (`Tuning.DIVE_GAP`'s notes)
        ends.append(budget.end)
        now[0] = budget.end + overrun  # its last rounding runs past the LP's budget
        return {(2,): 1}, 1

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search({"tokens": 1})
    args = (np.array([0, 1]), np.array([2]), np.array([1]), 2, None, 1, np.array([1]), 1)
    for overrun, reserve in ((0.05, 0.0), (0.02, 0.05), (0.2, 0.05)):
        assert search.reserve == pytest.approx(reserve)
        start = now[0]
        _paths.plan_up(search, *args, _budget.Budget(1.0, clock=lambda: now[0]))
        assert ends[-1] == pytest.approx(start + 1.0 - reserve)
        assert search.plan == {(2,): 1}
    assert search.reserve == pytest.approx(0.2)
    assert _budget.Budget(1.0, clock=lambda: now[0]).less(0.3).left() == pytest.approx(0.7)


def test_the_search_leaves_best_fits_time_for_the_result_and_its_checks(monkeypatch):
    """Building the result and `plan`'s checks of it pass over the packs after the budget,
    as best fit does before it: the search's budget ends best fit's time earlier."""
    seen = []
    monkeypatch.setattr(optimal, "_search", lambda search, *args: seen.append((search.reserve,
                                                                               args[-1])))
    histogram = lognormal_histogram(40_000, 4096, seed=5)
    result = optimal.pack(histogram, 4096, 8, seed=0, time_limit=100.0)
    assert_valid(result, histogram, 4096, 8)  # best fit's plan
    (reserve, budget), = seen
    assert reserve > 0
    assert budget.end == pytest.approx(budget._started[0] + 100.0 - reserve, abs=1e-3)


def test_full_packs_first_gives_up_when_much_is_left():
    # Two sequences of 1,500..2,000 tokens never fill 4,096: nothing is full, all is left.
    histogram = make_histogram(4096, {length: 5 for length in range(1500, 2001)})
    assert _paths.full_packs_first(histogram, 4096, 2, 1071) is None  # the token bound


def test_column_generation_stops_once_the_lp_value_is_low_enough():
    histogram = lognormal_histogram(2_000, 512, seed=1)
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    seed = _best_fit.fill(dict(zip(lengths.tolist(), demand.tolist())), {}, 512, 3)
    args = (lengths, demand, 512, 3, seed, 0)
    assert _column_generation.run(*args).rounds > 1
    assert _column_generation.run(*args, stop_at=math.inf).rounds == 1


def test_the_rest_is_planned_on_lengths_rounded_up_in_groups(monkeypatch):
    # Fifty full packs (5, 3); 6 and 7 are left, and planned as they are, or, with
    # at most one row for the rest's LP, rounded up in groups of two (5-6, 7-8).
    histogram = make_histogram(8, {5: 50, 3: 50, 6: 1, 7: 1})
    planned = []
    plan = _lp_plan.plan
    monkeypatch.setattr(_lp_plan, "plan", lambda lengths, demand, *args, **kwargs:
                        planned.append(lengths.tolist()) or plan(lengths, demand, *args, **kwargs))
    expected = {(5, 3): 50, (6,): 1, (7,): 1}  # real lengths in the slots
    assert _paths.full_packs_first(histogram, 8, 3, 51) == expected
    monkeypatch.setattr(Tuning, "REST_ROWS", 1)
    assert _paths.full_packs_first(histogram, 8, 3, 51) == expected
    assert planned == [[6, 7], [6, 8]]


@settings(max_examples=60)
@given(tiny_instances(), st.sampled_from([Tuning.REST_ROWS, 1]))
def test_full_packs_first_plans_are_valid_and_bounded(instance, rest_rows):
    histogram, max_length, max_sequences_per_pack = instance
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "MANY_LENGTHS", 1)
        patch.setattr(Tuning, "REST_ROWS", rest_rows)  # 1: the rest in one group
        result = optimal.pack(histogram, max_length, max_sequences_per_pack, seed=0)
    assert_valid(result, histogram, max_length, max_sequences_per_pack)
    best = brute_force_packs(histogram, max_length, max_sequences_per_pack)
    assert result.lower_bound_packs <= best <= result.counts.sum()


# --- through `plan`, and the Wikipedia targets ----------------------------


def test_plan_reports_the_bound():
    histogram = make_histogram(8, {6: 2, 2: 2, 5: 1, 3: 1, 4: 2})
    result = plan(histogram, 8, 2, algorithm="optimal")
    assert result.metrics["packs"] == result.metrics["lower_bound_packs"] == 4
    assert result.metrics["efficiency"] == 1.0


@pytest.mark.parametrize("depth, efficiency", [(3, 0.9987), (4, 0.9998)])
def test_wikipedia_512_targets(depth, efficiency):
    histogram = datasets.histogram("wikipedia_512")
    # No time limit: these targets need the whole search, whatever the machine's load.
    result = plan(histogram, 512, depth, algorithm="optimal", time_limit=None)
    metrics = result.metrics
    assert metrics["efficiency"] >= efficiency
    # Within 0.01 percentage points of what the proven bound allows.
    bound_efficiency = metrics["tokens"] / (metrics["lower_bound_packs"] * 512)
    assert bound_efficiency - metrics["efficiency"] <= 1e-4
    assert np.all(slot_counts(result.strategies, result.counts, 512) >= histogram)


def test_optimal_prints_nothing_on_stdout():
    # highspy prints a banner from C++ when a solver is constructed; a planner prints nothing.
    code = ("from tfpack import datasets, packing; "
            "packing.plan(datasets.histogram('wikipedia_512'), max_length=512, "
            "max_sequences_per_pack=3, algorithm='optimal')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=120)
    assert result.stdout == ""


def test_pricing_skipping_dominated_lengths_equals_brute_force():
    """Values in few equal levels growing with length, as column generation prices."""
    rng = np.random.default_rng(0)
    skipped = 0
    for _ in range(300):
        max_length = int(rng.integers(1, 25))
        lengths = np.sort(rng.choice(np.arange(1, max_length + 1), min(max_length, 6),
                                     replace=False))
        bounds = rng.integers(1, 4, len(lengths))
        values = np.sort(rng.choice([0.0, 0.5, 0.5, 1.0], len(lengths)))
        depth = None if rng.random() < 0.3 else int(rng.integers(1, 5))
        assert_pricing_is_exact(lengths, bounds, values, max_length, depth)
        usable = _knapsack._copies(lengths, bounds, max_length, depth)
        skipped += int(_knapsack._dominated(lengths, usable, values, max_length, depth).sum())
    assert skipped > 100  # the rule was exercised


def test_dominated_lengths_are_those_with_enough_shorter_copies_worth_as_much():
    lengths = np.array([2, 3, 4, 5, 6])
    copies = np.array([1, 1, 2, 1, 1])
    values = np.array([0.5, 0.5, 0.5, 0.5, 0.9])
    # Depth 2: length 4 has two shorter copies worth 0.5 (2 and 3), so does 5;
    # 6 is worth more than any shorter copy.
    assert _knapsack._dominated(lengths, copies, values, 20, 2).tolist() == [
        False, False, True, True, False]
    # Depth 3: 5 has three (2, 3 and one of the two 4s); 4 has only two.
    assert _knapsack._dominated(lengths, copies, values, 20, 3).tolist() == [
        False, False, False, True, False]
    # No depth: up to 20 // 2 = 10 sequences fit, too many to skip anything.
    assert not _knapsack._dominated(lengths, copies, values, 20, None).any()


def test_priced_duals_only_grow_so_the_bound_stays_valid():
    duals = np.array([0.0, 0.3, 0.1 + 0.2, 0.29, 1.0 / 3.0, 1e-17])
    priced = _column_generation.plateaus(duals)
    assert np.all(priced >= duals)  # never below: the best pack is worth at least as much
    assert np.all(np.diff(priced) >= 0)
    assert np.all(priced - np.maximum.accumulate(duals) <= 2.0 ** -Tuning.DUAL_BITS)
    assert priced[1] == priced[2] == priced[3]  # 0.3, 0.30000000000000004 and 0.29: one level


def test_seed_packs_priced_on_rounded_up_lengths_fit():
    rng = np.random.default_rng(2)
    lengths = np.unique(rng.integers(1, 8193, 300))
    bounds = np.minimum(rng.integers(1, 9, len(lengths)), 8192 // lengths)
    for depth in (4, 32, None):
        patterns = _column_generation.seed_patterns(lengths, bounds, 8192, depth)
        assert len(patterns) >= len(lengths)  # one set per seed weight, most anchors in each
        tokens = [copies @ lengths[rows] for rows, copies in patterns]
        assert max(tokens) <= 8192 and np.median(tokens) > 8192 - 64
        for rows, copies in patterns:
            assert np.all(copies <= bounds[rows])
            assert depth is None or copies.sum() <= depth


def test_column_generation_stops_when_a_rounded_lp_meets_the_bound():
    # 61 lengths, at most 8 a pack: the first LP (19.12) rounds to 19 packs,
    # the bound, so no more rounds are needed although the LP is not optimal.
    rng = np.random.default_rng(6)
    assert int(rng.choice([8, 16])) == 8  # the draws that picked this instance
    sizes = np.exp(rng.normal(np.log(512) - 2.5, 1.0, int(rng.integers(40, 120))))
    lengths = np.unique(np.minimum(sizes.astype(int) + 1, 512))
    demand = rng.integers(1, 4, len(lengths))
    histogram = make_histogram(512, dict(zip(lengths.tolist(), demand.tolist())))
    simple = max(-(-int(lengths @ demand) // 512), -(-int(demand.sum()) // 8))
    heuristic = _best_fit.fill(dict(zip(lengths.tolist(), demand.tolist())), {}, 512, 8)
    assert sum(heuristic.values()) > simple  # not solved by best fit alone
    lp = _column_generation.run(lengths, demand, 512, 8, heuristic, simple)
    assert lp.rounds == 1 and lp.lower_bound == 19 < _column_generation.ceil(lp.value)
    assert sum(lp.plan.values()) == 19
    result = optimal.pack(histogram, 512, 8, seed=0)
    assert_valid(result, histogram, 512, 8)
    assert result.counts.sum() == result.lower_bound_packs == 19


# --- repair: what the LP's whole packs leave gets a plan of its own ---------------


def _repair_instance():
    # 84 sequences, packs of 128 tokens and 3 sequences: the LP is 28.0, the bound.
    lengths = np.array([5, 14, 16, 19, 22, 29, 32, 44, 53, 68, 69, 79, 103])
    demand = np.array([10, 10, 6, 7, 4, 2, 8, 5, 6, 3, 11, 7, 5])
    heuristic = _best_fit.fill(dict(zip(lengths.tolist(), demand.tolist())), {}, 128, 3)
    lp = _column_generation.run(lengths, demand, 128, 3, heuristic,
                                    _lp_plan.simple_bound(lengths, demand, 128, 3))
    return lengths, demand, lp


def test_repair_plans_what_rounding_down_leaves_where_rounding_loses_a_pack():
    from tfpack.packing.algorithms import _budget, _rounding

    lengths, demand, lp = _repair_instance()
    assert lp.lower_bound == 28
    whole = np.floor(lp.x + 1e-6).astype(np.int64)
    # The rest into free space by best fit, after rounding up or not: 29 packs.
    assert sum(_rounding.settle(lp.patterns, whole, lengths, demand, 128, 3).values()) == 29
    for fill in Tuning.ROUND_UP_FILLS:
        assert sum(_rounding.round_lp(lp.patterns, lp.x, lengths, demand, 128, 3,
                                      fill).values()) == 29
    repaired = _lp_plan.repaired(lp, lengths, demand, 128, 3, _budget.Budget(None))
    assert sum(repaired.values()) == 28  # the bound: optimal
    histogram = make_histogram(128, dict(zip(lengths.tolist(), demand.tolist())))
    strategies = sorted(repaired, reverse=True)
    check_plan(strategies, np.array([repaired[s] for s in strategies]), histogram,
               max_length=128, max_sequences_per_pack=3)


def test_repair_of_whole_packs_keeps_them_and_of_none_plans_everything():
    from tfpack.packing.algorithms import _budget, _rounding

    lengths, demand, lp = _repair_instance()
    everything = _lp_plan.plan(lengths, demand, 128, 3, 1)[0]
    nothing = dataclasses_replace(lp, x=np.zeros_like(lp.x))
    assert _lp_plan.repaired(nothing, lengths, demand, 128, 3, _budget.Budget(None)) == everything
    up = np.ceil(lp.x - 1e-6)  # whole packs that hold every sequence: nothing left to plan
    packs, missing = _rounding.cover(lp.patterns, up.astype(np.int64), lengths, demand)
    assert not missing
    assert _lp_plan.repaired(dataclasses_replace(lp, x=up), lengths, demand, 128, 3,
                           _budget.Budget(None)) == packs


def dataclasses_replace(lp, **changes):
    import dataclasses

    return dataclasses.replace(lp, **changes)


def test_grouped_plans_repair_only_where_they_have_few_packs_a_row(monkeypatch):
    from tfpack.packing.algorithms import _budget

    asked = []
    monkeypatch.setattr(_lp_plan, "plan", lambda *args, repair, **kwargs: (asked.append(repair)
                                                                          or ({(2,): 1}, 1)))
    rows = 2
    for simple in (1, Tuning.REPAIR_PACKS_PER_ROW * rows - 1,
                   Tuning.REPAIR_PACKS_PER_ROW * rows):
        _paths.plan_up(_paths.Search({"tokens": 1}), np.array([0, 1]), np.array([1, 2]),
                         np.array([1, 1]), 2, None, simple, np.array([1]), 1, _budget.Budget(1.0))
    assert asked == [Tuning.REPAIR_SHARE, Tuning.REPAIR_SHARE, 0.0]


def test_plan_keeps_a_share_of_its_budget_for_repair_and_offers_its_plan(monkeypatch):
    from tfpack.packing.algorithms import _budget

    lengths, demand, _ = _repair_instance()
    now = [0.0]
    budget = _budget.Budget(1.0, clock=lambda: now[0])
    seen = {}
    real = _column_generation.run

    def column_generation(*args, budget, **kwargs):
        seen["end"] = budget.end
        return real(*args, budget=None, **kwargs)

    def repair(lp, lengths, demand, max_length, depth, budget):
        seen["repair"] = budget.end
        return {(103,): 5, (79,): 7}  # a marker, fewer packs than any plan

    monkeypatch.setattr(_column_generation, "run", column_generation)
    monkeypatch.setattr(_lp_plan, "repaired", repair)
    # simple=1: best fit is not within `_GOOD_ENOUGH` of it, so the LP runs
    packs, bound = _lp_plan.plan(lengths, demand, 128, 3, 1, repair=0.25, budget=budget)
    assert seen == {"end": pytest.approx(0.75), "repair": pytest.approx(1.0)}
    assert packs == {(103,): 5, (79,): 7} and bound == 28
    seen.clear()
    _lp_plan.plan(lengths, demand, 128, 3, 1, budget=_budget.Budget(1.0, clock=lambda: now[0]))
    assert seen == {"end": pytest.approx(1.0)}  # no repair unless asked


@settings(max_examples=40)
@given(instances(), st.integers(0, 2 ** 16))
def test_repair_gives_every_sequence_a_slot_from_any_lp_solution(instance, seed):
    """From any x >= 0 (whole, fractional, short of the demand), `_rounding.cover` and
    the repair give a valid plan."""
    from tfpack.packing.algorithms import _budget, _rounding

    histogram, max_length, depth = instance
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    heuristic = _best_fit.fill(dict(zip(lengths.tolist(), demand.tolist())), {}, max_length, depth)
    lp = _column_generation.run(lengths, demand, max_length, depth, heuristic,
                                    _lp_plan.simple_bound(lengths, demand, max_length, depth))
    x = lp.x * np.random.default_rng(seed).uniform(0.0, 1.5, len(lp.x))
    packs, missing = _rounding.cover(lp.patterns, np.floor(x).astype(np.int64), lengths, demand)
    slots = collections.Counter()
    for pack, number in packs.items():
        for length in pack:
            slots[length] += number
    for length, need in zip(lengths.tolist(), demand.tolist()):
        assert slots[length] + missing.get(length, 0) >= need  # cover leaves no one out
        assert missing.get(length, 0) <= need
    plan = _lp_plan.repaired(dataclasses_replace(lp, x=x), lengths, demand, max_length, depth,
                           _budget.Budget(None))
    strategies = sorted(plan, reverse=True)
    check_plan(strategies, np.array([plan[s] for s in strategies], dtype=np.int64), histogram,
               max_length=max_length, max_sequences_per_pack=depth)
