"""Settling the spread fill's packs (`_spread_settle`) and where `_spread_fill.best` and `optimal` do it.

The least-filled packs are dissolved and their sequences moved into the others' room, a larger
sequence in place of a smaller one where it fits (the two-length settle kernel on one length).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.algorithms import _budget, _spread_fill, _spread_settle, optimal
from tfpack.packing.algorithms._tuning import Tuning
from tfpack.packing.compiled import kernels

from test_spread_fill import Stub  # a budget that never ends

UNLIMITED = _budget.Budget(None)


def sequences(rows):
    """The sequences of ``rows`` (0: an empty slot), sorted."""
    rows = np.asarray(rows)
    return sorted(rows[rows > 0].tolist())


def test_a_larger_sequence_takes_a_smaller_ones_place():
    # Packs of 10 tokens, 3 sequences: {6, 2}, {3}, {8}. The {3} is dissolved; its 3 fits no
    # room (2 and 2) but takes the 2's place in {6, 2}, and the 2 goes into the {8}'s room.
    rows = np.array([[6, 2, 0], [3, 0, 0], [8, 0, 0]])
    after = _spread_settle._pass(rows, 10, 3, 0.34, 2, None)
    assert sorted(sorted(row) for row in after.tolist()) == [[0, 2, 8], [0, 3, 6]]
    assert sequences(after) == sequences(rows)


def test_the_depth_is_a_room_of_its_own():
    # Packs of 10 tokens: {6, 2}, {3} (dissolved), {5, 1}. At depth 3 the 3 goes into the {5, 1}'s
    # room: 2 packs. At depth 2 the {5, 1} has no place left: the 3 takes the 2's place, the 2
    # the 1's, and the 1 finds none (3 packs, no better: `settled` keeps the rows).
    rows = np.array([[6, 2, 0], [3, 0, 0], [5, 1, 0]])
    after = _spread_settle._pass(rows, 10, 3, 0.34, 2, None)
    assert sorted(sorted(row) for row in after.tolist()) == [[0, 2, 6], [1, 3, 5]]
    after = _spread_settle._pass(rows[:, :2], 10, 2, 0.34, 2, None)
    assert sorted(sorted(row) for row in after.tolist()) == [[0, 1], [2, 5], [3, 6]]
    assert np.array_equal(_spread_settle.settled(rows[:, :2], 10, 2, UNLIMITED, [(0.34, 2)], 0),
                          rows[:, :2])


def test_full_packs_are_kept_as_they_are():
    rows = np.array([[6, 2, 0], [3, 0, 0], [8, 0, 0], [5, 5, 0], [4, 3, 3]])
    after = _spread_settle._pass(rows, 10, 3, 0.2, 2, None)
    assert after[:2].tolist() == [[5, 5, 0], [4, 3, 3]]
    assert len(after) == 4 and sequences(after) == sequences(rows)


def test_settled_stops_within_enough_and_without_the_time_the_last_pass_took():
    rows = np.array([[6, 2, 0], [3, 0, 0], [8, 0, 0]])
    assert len(_spread_settle.settled(rows, 10, 3, UNLIMITED, [(0.34, 2)], 3)) == 3  # within
    assert len(_spread_settle.settled(rows, 10, 3, UNLIMITED, [(0.1, 2), (0.34, 2)], 0)) == 2
    # The first pass (nothing dissolved at 0.1) takes a second (`Stub`): with 0.5 left, no second.
    assert len(_spread_settle.settled(rows, 10, 3, Stub(0.5), [(0.1, 2), (0.34, 2)], 0)) == 3
    assert len(_spread_settle.settled(rows, 10, 3, Stub(1.5), [(0.1, 2), (0.34, 2)], 0)) == 2
    assert len(_spread_settle.settled(rows, 10, 3, _budget.Budget(0.0), [(0.34, 2)], 0)) == 3


def six_five_four_two():
    """6, 5, 4, 2 in packs of 9 tokens, 3 sequences: 3 packs from the fill at scale 1 (both
    openers at once), 2 at 0.5 (`test_spread_fill.six_five_four_two`)."""
    return np.bincount([5, 4, 3, 1], minlength=9)


def test_best_settles_each_try_and_the_second_packs_and_the_best_once_more():
    seen, calls = [], []

    def settle(rows, budget, enough, last):
        seen.append((len(rows), last))
        return rows

    def second(budget):
        calls.append(budget)
        return np.array([[6, 2, 0], [5, 4, 0]])

    def best(**kwargs):
        plan = _spread_fill.best(six_five_four_two(), 9, 3, 1, UNLIMITED, scales=(1.0, 1.0),
                                 batch=2, second=second, **kwargs)
        return sum(plan.values())

    # The first try (3 packs) settled, the class fill's (2) after it, then the best so far
    # once more (`last`), then the second try (3); the best is the one settled last already.
    assert best(settle=settle) == 2 and len(calls) == 1
    assert seen == [(3, False), (2, False), (2, True), (3, False)]
    seen.clear()
    plan = _spread_fill.best(six_five_four_two(), 9, 3, 1, UNLIMITED, scales=(1.0, 0.5), batch=2,
                             settle=settle)  # no class fill: the best (the second try's) last
    assert sum(plan.values()) == 2 and seen == [(3, False), (2, False), (2, True)]
    assert best() == 2 and len(calls) == 2  # without settling: the class fill's 2


def random_packs(seed, packs, max_length=12288):
    """``packs`` packs' worth of sequences (a histogram): each an opener of 3,000-7,999 and seven
    pieces of what it leaves but up to 59 tokens, cut at random."""
    rng = np.random.default_rng(seed)
    lengths = []
    for _ in range(packs):
        opener = int(rng.integers(3000, 8000))
        cuts = np.sort(rng.integers(1, max_length - opener - 30, 6))
        end = max_length - opener - int(rng.integers(0, 60))
        lengths += [opener, *np.diff(np.r_[0, cuts, end]).tolist()]
    lengths = np.array([n for n in lengths if n > 0])
    return np.bincount(lengths - 1, minlength=max_length).astype(np.int64)


def test_optimal_settles_the_spread_fill(monkeypatch):
    # 160 sequences of 20 full-ish packs (L=12,288 depth 8): the fill's tries and their refills
    # leave 21 packs; settled, 20. (With the search after best fit off: its plan or the fill's.)
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    histogram = random_packs(2, 20)
    assert int(histogram.sum()) == 160 and optimal._spread_pays(histogram, 8)
    assert int(optimal.pack(histogram, 12288, 8, seed=0).counts.sum()) == 20
    monkeypatch.setattr(Tuning, "SPREAD_SETTLE", ())
    assert int(optimal.pack(histogram, 12288, 8, seed=0).counts.sum()) == 21


def test_the_kernel_places_nothing_once_its_seconds_are_spent():
    # The module example as sequences: {6, 2} (pack 0), {3} (pack 1, dissolved), {8} (pack 2).
    # With no time, the 3 is left out (-1) and the others stay; without a limit, it is placed.
    pack, lengths = np.array([0, 0, 1, 2]), np.array([6, 2, 3, 8])
    args = (pack.tobytes(), lengths.tobytes(), np.ones(4, dtype=np.int64).tobytes(), 3, 10, 3, 3, 1,
            100)
    assert np.frombuffer(kernels.settle(*args, 1e-9), dtype=np.int64).tolist() == [0, 0, -1, 2]
    assert np.frombuffer(kernels.settle(*args), dtype=np.int64).tolist() == [0, 2, 0, 2]
    assert np.frombuffer(kernels.settle(*args, 60.0), dtype=np.int64).tolist() == [0, 2, 0, 2]


def plan_sequences(plan):
    return sorted(length for strategy, number in plan.items() for length in strategy * number)


def test_a_plan_settled_keeps_its_full_packs_and_every_sequence():
    # The module example, with full packs beside it: {5, 5} and {4, 3, 3} stay as they are.
    plan = {(6, 2): 1, (3,): 1, (8,): 1, (5, 5): 2, (4, 3, 3): 1}
    settled = _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, [(0.2, 2)], 0.1)
    assert settled == {(6, 3): 1, (8, 2): 1, (5, 5): 2, (4, 3, 3): 1}
    # Nothing dissolved (a share of under one pack) or no pass: the plan as it was.
    assert _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, [(0.1, 2)], 0.1) is plan
    assert _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, [], 0.1) is plan
    full = {(5, 5): 3, (10,): 1}  # no pack with room: nothing to move
    assert _spread_settle.settled_plan(full, 10, 3, UNLIMITED, [(0.5, 2)], 0.1) is full


def test_a_sample_of_the_other_packs_brings_their_short_sequences():
    # Packs of 10 tokens, 3 sequences: {3}, {5} and {2}. A third dissolved is the {2}; alone, its
    # 2 goes into the room of the {5} (the tightest), and the {3} stays: two packs. With a sample
    # of a third more (one pack, the middle id: the {5}), the 5 is placed first, into the room of
    # the {3}, then the 2 beside them: one pack.
    plan = {(3,): 1, (5,): 1, (2,): 1}
    assert _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, [(0.34, 2)], 1.0) == {(3,): 1, (5, 2): 1}
    assert _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, [(0.34, 2)], 1.0, 0.34) == {(5, 3, 2): 1}


def samples_asked(monkeypatch, plan, passes):
    """The sample (packs) each pass of `settled_plan` on ``plan`` (10 tokens, 3 sequences, a
    third sampled) gave the kernel."""
    asked, moved = [], _spread_settle._moved

    def spy(*args):
        asked.append(args[-1])
        return moved(*args)

    monkeypatch.setattr(_spread_settle, "_moved", spy)
    _spread_settle.settled_plan(plan, 10, 3, UNLIMITED, passes, 1.0, 0.34)
    monkeypatch.undo()
    return asked


def test_the_sample_stops_after_a_pass_with_it_leaves_no_fewer_packs(monkeypatch):
    # Three {6}s: no two fit together, so no pass leaves fewer packs: the first dissolves one
    # pack and a sample of one (a third of them), the next ones none beside the least filled.
    # Thirty {3}, {5} and {2} (the example above, ten times): each pass with it leaves fewer.
    assert samples_asked(monkeypatch, {(6,): 3}, [(0.34, 2)] * 3) == [1, 0, 0]
    asked = samples_asked(monkeypatch, {(3,): 10, (5,): 10, (2,): 10}, [(0.1, 2)] * 2)
    assert asked[0] == 10 and asked[1] > 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=4), min_size=1, max_size=60),
       st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([0.1, 1.0]), st.sampled_from([0.0, 0.03, 0.3]))
def test_a_settled_plan_holds_the_same_sequences_in_packs_that_fit(packs, share, moves, sample):
    # Random packs of at most 4 sequences, each cut to fit 60 tokens.
    plan = {}
    for pack in packs:
        kept = []
        for length in pack:
            if sum(kept) + length <= 60:
                kept.append(length)
        strategy = tuple(sorted(kept, reverse=True))
        plan[strategy] = plan.get(strategy, 0) + 1
    settled = _spread_settle.settled_plan(plan, 60, 4, UNLIMITED, [(share, 4), (share, 2)], moves,
                                          sample)
    assert plan_sequences(settled) == plan_sequences(plan)
    assert all(sum(s) <= 60 and 1 <= len(s) <= 4 and list(s) == sorted(s, reverse=True)
               for s in settled)
    assert all(number > 0 for number in settled.values())
    assert sum(settled.values()) <= sum(plan.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(1, 40), min_size=1, max_size=4),
                          st.integers(1, 3)), min_size=1, max_size=60),
       st.sampled_from([0.05, 0.2, 0.5]), st.sampled_from([0.1, 1.0]))
def test_a_settled_plan_counts_the_changed_packs_as_counting_every_pack_would(packs, share,
                                                                             moves):
    # `_changed` leaves the packs the passes did not touch as they were counted in the plan;
    # counting every pack again (what it replaced) must give the same plan.
    plan = {}
    for pack, copies in packs:
        kept = []
        for length in pack:
            if sum(kept) + length <= 60:
                kept.append(length)
        strategy = tuple(sorted(kept, reverse=True))
        plan[strategy] = plan.get(strategy, 0) + copies
    passes = [(share, 4), (share, 2)]
    settled = _spread_settle.settled_plan(plan, 60, 4, UNLIMITED, passes, moves)
    changed = _spread_settle._changed
    try:
        _spread_settle._changed = lambda pack, *_: (np.zeros(0, dtype=np.int64),
                                                     np.ones(len(pack), dtype=bool))
        every = _spread_settle.settled_plan(plan, 60, 4, UNLIMITED, passes, moves)
    finally:
        _spread_settle._changed = changed
    assert settled == {strategy: number for strategy, number in every.items() if number}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.data())
def test_changed_finds_the_packs_that_hold_just_what_a_pack_of_the_plan_held(sizes, data):
    # Sequences of the plan's packs (pack i holds `sizes[i]`), some then moved to other
    # packs, some left out (a refill's sequences come after, from no pack of the plan).
    origin = np.repeat(np.arange(len(sizes)), sizes)
    packs = data.draw(st.integers(1, len(sizes) + 2))
    pack = np.array(data.draw(st.lists(st.integers(-1, packs - 1), min_size=len(origin),
                                       max_size=len(origin))), dtype=np.int64)
    kept = pack >= 0
    refill = data.draw(st.lists(st.integers(0, packs - 1), max_size=3))
    pack = np.concatenate([pack[kept], refill]).astype(np.int64)
    origin = np.concatenate([origin[kept], np.full(len(refill), -1)])
    sequence = np.concatenate([np.flatnonzero(kept), -1 - np.arange(len(refill))])
    same, moved = _spread_settle._changed(pack, origin, packs, np.array(sizes))
    members = {j: set(sequence[pack == j].tolist()) for j in np.unique(pack).tolist()}
    held = {i: set(np.flatnonzero(np.repeat(np.arange(len(sizes)), sizes) == i).tolist())
            for i in range(len(sizes))}
    expected = [i for j, m in sorted(members.items()) for i, h in held.items() if m == h]
    assert same.tolist() == expected
    assert moved.tolist() == [members[j] not in held.values() for j in pack.tolist()]


def test_optimal_settles_its_best_plan_on_long_contexts(monkeypatch):
    # The module example at L=12,288 (units of 1,228 tokens), 100 times over, depth 4: best fit
    # stubbed to give the 300 packs of the example (its own 200 are the optimum) and no search
    # after it. No sample of other packs at depth 4 (`optimal._sample`): a pass dissolves 1%
    # of them, three {3}s: each 3 takes a 2's place, the 2 goes into an {8}'s room, and 3
    # packs go; the second, 1% of 297, two more; the third, 3% of 295, eight; the fourth, 5%
    # of 287, fourteen. Only on long contexts, not with no passes.
    unit, copies = 1228, 100
    loose = {(6 * unit, 2 * unit): copies, (3 * unit,): copies, (8 * unit,): copies}
    histogram = np.zeros(12288, dtype=np.int64)
    histogram[[6 * unit - 1, 2 * unit - 1, 3 * unit - 1, 8 * unit - 1]] = copies
    monkeypatch.setattr(optimal._fit_decreasing, "packs", lambda *args, **kwargs: dict(loose))
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    assert not optimal._spread_pays(histogram, 4) and optimal._sample(histogram, 4) == 0
    assert Tuning.PLAN_SETTLE == ((0.01, 64), (0.01, 64), (0.03, 64), (0.05, 64))
    result = optimal.pack(histogram, 12288, 4, seed=0, time_limit=1.0)
    assert int(result.counts.sum()) == 273
    plan = dict(zip(result.strategies, result.counts.tolist()))
    assert plan_sequences(plan) == plan_sequences(loose)
    assert int(optimal.pack(histogram, 12288, 4, seed=0).counts.sum()) == 273  # no time limit
    monkeypatch.setattr(Tuning, "PLAN_SETTLE", ((0.01, 64), (0.01, 64)))
    assert int(optimal.pack(histogram, 12288, 4, seed=0).counts.sum()) == 295
    monkeypatch.setattr(Tuning, "PLAN_SETTLE", ((0.01, 64),))
    assert int(optimal.pack(histogram, 12288, 4, seed=0).counts.sum()) == 297
    monkeypatch.setattr(Tuning, "PLAN_SETTLE", ())
    assert int(optimal.pack(histogram, 12288, 4, seed=0).counts.sum()) == 300
    monkeypatch.undo()
    monkeypatch.setattr(optimal._fit_decreasing, "packs", lambda *args, **kwargs: dict(loose))
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    # With a sample from depth 4 (3% of the packs given to the kernel, spread over them), the
    # {6, 2}s and {8}s of the sample bring their 2s to the {3}s and {8}s: fewer packs.
    monkeypatch.setattr(Tuning, "SAMPLE_DEPTH_FROM", 4)
    assert optimal._sample(histogram, 4) == Tuning.PLAN_SETTLE_SAMPLE == 0.03
    assert int(optimal.pack(histogram, 12288, 4, seed=0).counts.sum()) < 273
    monkeypatch.undo()
    monkeypatch.setattr(optimal._fit_decreasing, "packs", lambda *args, **kwargs: dict(loose))
    monkeypatch.setattr(optimal, "_search", lambda *args: None)
    short = histogram[:10240].copy()  # the same sequences at L=10,240: not a long context
    assert int(optimal.pack(short, 10240, 4, seed=0).counts.sum()) == 300
