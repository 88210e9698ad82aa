"""The spread fill (`_spread_fill`) and where `optimal` offers its plan (`optimal._spread_pays`).

Where the depth binds beside the tokens (nearly every pack full with nearly
``depth`` sequences), best fit decreasing fills packs with a few long
sequences and leaves the short ones to packs of their own; the spread fill
gives each slot about its share of what the longest sequence leaves.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.algorithms import _bounds, _budget, _fit_decreasing, _spread_fill, optimal
from tfpack.packing.algorithms._tuning import Tuning


def test_hand_checked_plan():
    # 9, 6, 4, 4, 2, 2, 1, 1 in packs of 10 tokens, 3 sequences, 2 opened at once.
    # Openers 9 and 6 (free 1 and 4); slot 2 targets 1 // 2 = 0 and 4 // 2 = 2: the 6 takes a 2;
    # slot 3 targets the free space, 1 and 2: a 1 and the other 2. Left 4, 4, 1 (9 tokens: one
    # pack): opener 4 (free 6), target 3 takes the 1, then 5 the other 4.
    histogram = np.zeros(10, dtype=np.int64)
    histogram[[8, 5, 3, 1, 0]] = [1, 1, 2, 2, 2]
    plan = _spread_fill.packs(histogram, 10, 3, batch=2)
    assert plan == {(9, 1): 1, (6, 2, 2): 1, (4, 4, 1): 1}


def test_the_first_pass_failed_packs_reopen_in_a_second():
    # 10, 9, 9, 7, 6, 3, 2 (46 tokens: 3 packs) in packs of 16 tokens, 3 sequences, 2 at once.
    # First pass: openers 9 and 10 (free 7, 6), targets 3 and 3: the 10 takes the 3, the 9 the 2;
    # last slots 3 and 5: nothing fits. Then 9 and 7 (free 7, 9), targets 3, 4: nothing; last
    # slots: the 7 takes the 6. 4 packs; (9, 2) and (9) leave 5 and 7 free, a slot's share
    # (16 // 3 = 5) or more: they fail. Second pass, pool 10, 7, 6, 3 and the reopened (9, 2)
    # (11 tokens) and (9): openers (9, 2) and 10; (9, 2) takes the 3 (target 5), the 10 then
    # the 6; then (9) takes the 7: 3 packs.
    histogram = np.bincount(np.array([10, 9, 9, 7, 6, 3, 2]) - 1, minlength=16)
    counts = np.concatenate([[0], histogram])
    first = _spread_fill._fill(counts, 16, 3, 2, None)
    rows = sorted(tuple(sorted(row, reverse=True)) for row in first.tolist())  # 0: empty
    assert rows == [(7, 6, 0), (9, 0, 0), (9, 2, 0), (10, 3, 0)]
    plan = _spread_fill.packs(histogram, 16, 3, batch=2)
    assert plan == {(10, 6): 1, (9, 7): 1, (9, 3, 2): 1}


def test_a_budget_that_ends_in_the_second_pass_gives_the_first_pass_plan():
    # A clock that ticks once a call: the budget reads it twice when made (end = 0 + seconds),
    # then once a batch, two batches a pass (ticks 2, 3, then 4, 5). Ending at 4 cuts the
    # second pass (the first's 4 packs stand), at 3 the first (no plan), at 6 neither.
    histogram = np.bincount(np.array([10, 9, 9, 7, 6, 3, 2]) - 1, minlength=16)

    def plan(seconds):
        ticks = iter(range(100))
        budget = _budget.Budget(seconds, clock=lambda: next(ticks))
        return _spread_fill.packs(histogram, 16, 3, batch=2, budget=budget)

    assert plan(4) == {(10, 3): 1, (9, 2): 1, (9,): 1, (7, 6): 1}
    assert plan(3) is None
    assert plan(6) == {(10, 6): 1, (9, 7): 1, (9, 3, 2): 1}


def reference_fill(counts, max_length, depth, batch, reopened, scale):
    """`_spread_fill._fill`'s pass written out a sequence at a time, to check the kernel by."""
    pool = sorted(n for n in range(len(counts)) for _ in range(counts[n]))
    waiting = sorted((sorted(row, reverse=True) for row in reopened), key=lambda row: -sum(row))
    rows = []
    while pool or waiting:
        need_tokens = -(-(sum(pool) + sum(map(sum, waiting))) // max_length)
        need_slots = -(-(len(pool) + sum(n > 0 for row in waiting for n in row)) // depth)
        opened = min(batch, max(need_tokens, need_slots))
        singles = pool[len(pool) - min(opened, len(pool)):][::-1]  # the longest, longest first
        picked, again = [], 0  # the `opened` longest singles and reopened packs (ties: single)
        while len(picked) + again < opened and (len(picked) < len(singles) or again < len(waiting)):
            total = sum(waiting[again]) if again < len(waiting) else -1
            if len(picked) < len(singles) and singles[len(picked)] >= total:
                picked.append(singles[len(picked)])
            else:
                again += 1
        for n in picked:
            pool.remove(n)
        packs = [[n] + [0] * (depth - 1) for n in picked[::-1]] + [list(row) for row in waiting[:again]]
        del waiting[:again]
        used = [sum(n > 0 for n in row) for row in packs]
        for _ in range(1, depth):
            targets = []
            for t, row in enumerate(packs):
                if used[t] < depth:
                    slots, free = depth - used[t], max_length - sum(row)
                    targets.append((int(free * scale // slots) if slots > 1 else free, t))
            for target, t in sorted(targets, reverse=True):  # the largest first (ties: later pack)
                fits = [n for n in pool if n <= target]
                taken = max(fits) if fits else 0
                if taken:
                    pool.remove(taken)
                packs[t][used[t]] = taken
                used[t] += 1
        rows += packs
    return rows


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(2, 40), st.integers(1, 6), st.integers(1, 5),
       st.sampled_from([1.0, 0.99, 0.97, 0.9, 0.5]))
def test_the_compiled_pass_is_the_pass_a_sequence_at_a_time(data, max_length, depth, batch, scale):
    counts = np.array([0] + data.draw(st.lists(st.integers(0, 4), min_size=max_length - 1,
                                               max_size=max_length - 1)) + [0], dtype=np.int64)
    reopened = []
    for _ in range(data.draw(st.integers(0, 4))):
        row = data.draw(st.lists(st.integers(1, max_length), min_size=1, max_size=depth))
        while sum(row) > max_length:
            row.pop()
        reopened.append(row + [0] * (depth - len(row)))
    expected = reference_fill(counts.tolist(), max_length, depth, batch, reopened, scale)
    rows = _spread_fill._fill(counts, max_length, depth, batch, None,
                              reopened=np.array(reopened, dtype=np.int64).reshape(-1, depth), scale=scale)
    assert rows.tolist() == expected
    assert not counts.any()  # every sequence taken from the pool


def test_longest_at_most_gives_the_larger_targets_first_pick():
    counts = np.array([0, 1, 0, 2, 1])  # 1, 3, 3, 4
    taken = _spread_fill._longest_at_most(counts, np.array([0, 2, 3, 4, 4]))
    # 4 takes the 4; the other 4 a 3; 3 the last 3; 2 the 1; 0 nothing.
    assert taken.tolist() == [0, 1, 3, 3, 4]
    assert counts.tolist() == [0, 0, 0, 0, 0]


def test_full_windows_are_packs_of_their_own():
    histogram = np.zeros(8, dtype=np.int64)
    histogram[[7, 3]] = [3, 2]  # three 8s and two 4s
    assert _spread_fill.packs(histogram, 8, 2) == {(8,): 3, (4, 4): 1}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=40), st.integers(1, 6),
       st.integers(1, 5))
def test_every_sequence_in_exactly_one_pack_that_fits(counts, depth, batch):
    histogram = np.array(counts, dtype=np.int64)
    if not histogram.any():
        histogram[-1] = 1
    max_length = len(histogram)
    plan = _spread_fill.packs(histogram, max_length, depth, batch=batch)
    placed = np.zeros(max_length + 1, dtype=np.int64)
    for pack, number in plan.items():
        assert 0 < len(pack) <= depth and sum(pack) <= max_length
        assert list(pack) == sorted(pack, reverse=True) and min(pack) >= 1
        np.add.at(placed, list(pack), number)
    assert placed[1:].tolist() == histogram.tolist()


def test_a_budget_that_ends_first_gives_no_plan():
    histogram = np.zeros(10, dtype=np.int64)
    histogram[[8, 5, 3, 1, 0]] = [1, 1, 2, 2, 2]
    assert _spread_fill.packs(histogram, 10, 3, batch=2, budget=_budget.Budget(0.0)) is None
    assert _spread_fill.packs(histogram, 10, 3, batch=2, budget=_budget.Budget(None))


def eighths(packs, max_length=12288):
    """``packs`` packs' worth of one 6,000 and seven 898s each (12,286 tokens, depth 8): best fit
    pairs the 6,000s and leaves the 898s eight a pack, 1.375x the packs."""
    histogram = np.zeros(max_length, dtype=np.int64)
    histogram[[5999, 897]] = [packs, 7 * packs]
    return histogram


def test_spread_pays_where_the_depth_binds_beside_the_tokens():
    histogram = eighths(10)
    assert optimal._spread_pays(histogram, 8)
    assert not optimal._spread_pays(histogram, 16)  # 80 sequences, 160 slots: the tokens bind
    assert not optimal._spread_pays(histogram, 4)  # below every tier
    assert not optimal._spread_pays(histogram, None)  # no depth limit
    assert not optimal._spread_pays(histogram[:8192], 8)  # not a long context (L=8,192)


def test_spread_pays_from_its_tier_under_to_spread_band_over_the_slots():
    # 100 sequences of n at L=12,288 need 100 * n / 12,288 packs of tokens, so they are
    # 12,288 / (depth * n) of the slots. Depth 8 (from 0.78 to 1.3): 1.29949 at 1,182, 1.30059
    # at 1,181; 0.78015 at 1,969, 0.77976 at 1,970. Depth 12 (from 0.55): 0.55024 at 1,861,
    # 0.54995 at 1,862. Depth 6 (from 1.0): 1.29949 at 1,576, 1.30032 at 1,575; 1.0 at 2,048,
    # 0.9995 at 2,049.
    def of(n):
        histogram = np.zeros(12288, dtype=np.int64)
        histogram[n - 1] = 100
        return histogram

    assert Tuning.SPREAD_BAND == 0.3
    assert Tuning.SPREAD_TIERS == ((12, 0.45, True), (8, 0.22, True), (6, 0.0, False))
    assert [optimal._spread_pays(of(n), 8) for n in (1181, 1182, 1969, 1970)] == \
        [False, True, True, False]
    assert [optimal._spread_pays(of(n), 12) for n in (1861, 1862)] == [True, False]
    assert [optimal._spread_pays(of(n), 6) for n in (1575, 1576, 2048, 2049)] == \
        [False, True, True, False]


def test_at_depth_6_optimal_runs_one_try_as_it_is(monkeypatch):
    seen = []

    def best(histogram, max_length, depth, bound, budget, scales, batch, gap, tail, tails,
             second, second_tail, second_after, settle):
        seen.append((scales, tail, second is None, settle is None))

    monkeypatch.setattr(_spread_fill, "best", best)
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    at_6 = np.zeros(12288, dtype=np.int64)
    at_6[1999] = 100  # 1.024 of the slots at depth 6, 0.768 at depth 8: one try at 6 only
    optimal.pack(at_6, 12288, 6, seed=0, time_limit=1.0)
    optimal.pack(at_6, 12288, 8, seed=0, time_limit=1.0)
    optimal.pack(at_6, 12288, 7, seed=0, time_limit=1.0)  # 0.878: below every tier
    assert seen == [((1.0,), 0.0, True, True)]
    optimal.pack(eighths(10), 12288, 8, seed=0, time_limit=1.0)  # 1.0 at depth 8: all of it
    assert seen[1:] == [(Tuning.SPREAD_SCALES, Tuning.SPREAD_TAIL, False, False)]


def test_optimal_offers_the_spread_plan(monkeypatch):
    # With the search after best fit switched off, the plan is best fit's or the spread fill's.
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    histogram = eighths(10)
    assert sum(_fit_decreasing.packs(histogram, 12288, 8, best_fit=True).values()) == 14
    result = optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    assert int(result.counts.sum()) == 10
    monkeypatch.setattr(Tuning, "SPREAD_TIERS", ((9, 0.3),))  # the rule off at depth 8
    assert int(optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0).counts.sum()) == 14


def six_five_four_two():
    """6, 5, 4, 2 in packs of 9 tokens, 3 sequences (`_spread_fill.best`'s example): with both
    openers at once, scale 1 (targets 3 // 2 and 4 // 2) gives 3 packs, scale 0.5 (0 and 1)
    lets the last slots take the 4 and the 2: 2 packs."""
    return np.bincount([5, 4, 3, 1], minlength=9)


def test_smaller_slot_targets_can_save_a_pack():
    histogram = six_five_four_two()
    assert _spread_fill.packs(histogram, 9, 3, batch=2) == {(6,): 1, (5, 2): 1, (4,): 1}
    assert _spread_fill.packs(histogram, 9, 3, batch=2, scale=0.5) == {(6, 2): 1, (5, 4): 1}


def test_best_tries_the_scales_until_one_is_within_the_gap():
    histogram, unlimited = six_five_four_two(), _budget.Budget(None)

    def best(bound, **kwargs):
        plan = _spread_fill.best(histogram, 9, 3, bound, unlimited, scales=(1.0, 0.5), batch=2,
                                 **kwargs)
        return sum(plan.values())

    assert best(2) == 2  # 3 packs at scale 1 is not within 0 of 2: scale 0.5 runs
    assert best(3) == 2 + 1  # 3 is within 0 of 3: it stops there
    assert best(2, gap=0.5) == 3  # and within 50% of 2


class Stub:
    """A budget that never ends, with ``left`` seconds left and one more spent at each look."""

    def __init__(self, left):
        self.seconds, self.looks = left, 0

    def left(self):
        return self.seconds

    def spent(self):
        self.looks += 1
        return float(self.looks)

    def expired(self):
        return False

    def kernel_seconds(self):
        return 0.0  # the settle kernel's "no limit" (`_budget.Budget.kernel_seconds`)


def test_best_runs_the_next_scale_only_with_the_time_the_last_took():
    # The first try takes one second (two looks at `spent`): with 1.5 left the second runs
    # (2 packs), with 0.5 it does not (3).
    histogram = six_five_four_two()
    plans = [_spread_fill.best(histogram, 9, 3, 2, Stub(left), scales=(1.0, 0.5), batch=2)
             for left in (1.5, 0.5)]
    assert [sum(plan.values()) for plan in plans] == [2, 3]


def test_optimal_gives_the_fill_the_windows_bound(monkeypatch):
    # Where windows of L hold a pack each, `_bounds.windows_alone` is above the simple bounds:
    # the fill stops within the gap of it, not of the looser simple bounds.
    seen = {}

    def best(histogram, max_length, depth, bound, budget, *args, **kwargs):
        seen["bound"] = bound

    monkeypatch.setattr(_spread_fill, "best", best)
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    histogram = np.zeros(12288, dtype=np.int64)
    # Forty 6,000s, 280 850s (38.9 packs of tokens, 320 of the 311 slots they need) and three
    # full windows: 3 + 320 / 8 = 43 packs; the tokens 42, the sequences 41.
    histogram[[5999, 849, 12287]] = [40, 280, 3]
    assert optimal._spread_pays(histogram, 8)
    optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    assert seen["bound"] == 43 > max(_bounds.simple(histogram, 12288, 8).values()) == 42


def test_best_refills_the_last_packs_of_its_best_try():
    # At scale 1: 6, 5 and 2, 4 (3 packs); all three refilled at 0.5: 6 and 2, 5 and 4.
    histogram, unlimited = six_five_four_two(), _budget.Budget(None)

    def best(**kwargs):
        plan = _spread_fill.best(histogram, 9, 3, 2, unlimited, scales=(1.0,), batch=2, **kwargs)
        return sum(plan.values())

    assert best() == 3
    assert best(tail=1.0, tails=[(1.0, 2)]) == 3
    assert best(tail=1.0, tails=[(1.0, 2), (0.5, 2)]) == 2
    assert best(tail=0.5, tails=[(0.5, 2)]) == 3  # the last pack alone: 4
    assert best(tail=1.0, tails=[(0.5, 2)], gap=0.5) == 3  # within the gap: not refilled


def test_the_next_refill_runs_only_with_the_time_the_last_took():
    # Each try takes one second (`Stub`): with 1.5 left the second refill runs (2 packs),
    # with 0.5 only the first (3).
    histogram = six_five_four_two()
    plans = [_spread_fill.best(histogram, 9, 3, 2, Stub(left), scales=(1.0,), batch=2, tail=1.0,
                               tails=[(1.0, 2), (0.5, 2)]) for left in (1.5, 0.5)]
    assert [sum(plan.values()) for plan in plans] == [2, 3]


def test_no_tail_is_no_refill(monkeypatch):
    # A share of 0 (one try as it is, depth 6-7) leaves the rows as they are, no try run.
    calls = []
    monkeypatch.setattr(_spread_fill, "_rows", lambda *args: calls.append(args))
    rows = np.array([[7, 0, 0], [6, 0, 0]])
    assert _spread_fill._refilled(rows, 9, 3, _budget.Budget(None), 0.0,
                                  [(1.0, 2), (0.5, 2)], 0) is rows
    assert not calls


def test_best_refills_each_try_before_the_next(monkeypatch):
    # Scale 1 (3 packs), then 0.5 (2): each refilled, the first before the second runs; with
    # the first within the gap (3 of 2, 50%), the second never runs.
    histogram, unlimited, seen = six_five_four_two(), _budget.Budget(None), []
    refilled = _spread_fill._refilled

    def spy(rows, *args):
        seen.append(len(rows))
        return refilled(rows, *args)

    monkeypatch.setattr(_spread_fill, "_refilled", spy)
    _spread_fill.best(histogram, 9, 3, 2, unlimited, scales=(1.0, 0.5), batch=2, tail=1.0,
                      tails=[(1.0, 2)])
    assert seen == [3, 2]
    seen.clear()
    _spread_fill.best(histogram, 9, 3, 2, unlimited, scales=(1.0, 0.5), batch=2, tail=1.0,
                      tails=[(1.0, 2)], gap=0.5)
    assert seen == [3]


def test_where_the_first_try_is_not_within_the_gap_the_second_packs_compete():
    # Scale 1 gives 3 packs, 50% above 2: `second`'s 2 packs win; within a gap of 50% it is
    # never called.
    histogram, unlimited, calls = six_five_four_two(), _budget.Budget(None), []

    def second(budget):
        calls.append(budget)
        return np.array([[6, 2, 0], [5, 4, 0]])

    def best(gap):
        return _spread_fill.best(histogram, 9, 3, 2, unlimited, scales=(1.0,), batch=2, gap=gap,
                                 second=second)

    assert best(0.5) == {(6,): 1, (5, 2): 1, (4,): 1} and not calls
    assert best(0.0) == {(6, 2): 1, (5, 4): 1} and calls == [unlimited]


def test_the_second_packs_run_only_with_second_after_times_the_first_try_left():
    # A clock that moves one second a reading: the first try takes some seconds, and 100
    # are left; `second` runs where that is ``second_after`` times the try's time or more.
    histogram = six_five_four_two()

    def calls(second_after):
        ticks, called = iter(range(10**6)), []
        budget = _budget.Budget(100.0, clock=lambda: float(next(ticks)))
        _spread_fill.best(histogram, 9, 3, 2, budget, scales=(1.0,), batch=2,
                          second=lambda budget: called.append(1), second_after=second_after)
        return called

    assert calls(1.0) == [1] and calls(1000.0) == []


def test_the_second_packs_run_after_the_first_try_and_before_the_next(monkeypatch):
    # Scale 1 (3 packs), then `second` (3 packs: no better), then scale 0.5 (2 packs).
    histogram, unlimited, order = six_five_four_two(), _budget.Budget(None), []
    rows = _spread_fill._rows

    def spy(histogram, max_length, depth, batch, budget, scale):
        order.append(scale)
        return rows(histogram, max_length, depth, batch, budget, scale)

    def second(budget):
        order.append("second")
        return np.array([[6, 0, 0], [5, 2, 0], [4, 0, 0]])

    monkeypatch.setattr(_spread_fill, "_rows", spy)
    plan = _spread_fill.best(histogram, 9, 3, 2, unlimited, scales=(1.0, 0.5), batch=2,
                             second=second)
    assert order == [1.0, "second", 0.5] and plan == {(6, 2): 1, (5, 4): 1}


def test_optimal_hands_the_class_fill_to_the_tries(monkeypatch):
    seen = {}

    def best(*args, **kwargs):
        seen["second"], seen["tail"], seen["after"] = args[-3:]

    monkeypatch.setattr(_spread_fill, "best", best)
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    histogram = eighths(10)
    optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    rows = seen["second"](_budget.Budget(None))  # the class fill over the sequences below L
    assert np.bincount(rows.ravel(), minlength=12289)[1:].tolist() == histogram.tolist()
    assert seen["tail"] == Tuning.SPREAD_CLASS_TAIL and seen["after"] == Tuning.SPREAD_CLASS_AFTER
    monkeypatch.setattr(Tuning, "SPREAD_CLASSES", 0)
    optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    assert seen["second"] is None


def test_optimal_searches_on_after_the_fills_only_with_search_least_left(monkeypatch):
    # A long context where the plan is settled at the end: the search (`optimal._search`) runs
    # only where its share of the budget is SEARCH_LEAST or more; without a time limit, or
    # without a depth (nothing settled), always.
    searched = []
    monkeypatch.setattr(optimal, "_search", lambda *args: searched.append(args[-1].limited))
    histogram = eighths(10)
    monkeypatch.setattr(Tuning, "SEARCH_LEAST", 1e9)
    optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    assert searched == []
    optimal.pack(histogram, 12288, 8, seed=0)
    optimal.pack(histogram, 12288, None, seed=0, time_limit=1.0)
    assert searched == [False, True]
    monkeypatch.setattr(Tuning, "SEARCH_LEAST", 0.0)
    optimal.pack(histogram, 12288, 8, seed=0, time_limit=1.0)
    assert searched == [False, True, True]
