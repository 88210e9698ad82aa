"""Length groups (`_groups`): plans from the rounded-up histogram, bounds from the rounded-down one."""

import collections
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.algorithms import _bounds, _budget, _groups, _lp_plan, _paths, base, optimal
from tfpack.packing.algorithms._tuning import Tuning
from test_optimal import assert_valid, brute_force_packs, make_histogram, tiny_instances


def test_groups_keep_the_ends_exact_and_split_the_middle_evenly():
    assert _groups.groups(16, ends=2, width=4).tolist() == [1, 2, 3, 7, 11, 15, 16]
    assert _groups.groups(4, ends=8, width=4).tolist() == [1, 2, 3, 4]  # all exact
    starts = _groups.groups(8192)
    assert starts[0] == 1 and np.all(np.diff(starts) >= 1)
    assert starts[:128].tolist() == list(range(1, 129))
    assert starts[-128:].tolist() == list(range(8065, 8193))
    assert starts[128:-128].tolist() == list(range(129, 8065, 32))
    assert len(starts) < Tuning.MANY_LENGTHS


def test_rounding_moves_every_sequence_within_its_group():
    histogram = np.array([1, 1, 1, 0, 2])  # lengths 1, 2, 3, 5, 5
    starts = np.array([1, 3, 5])  # groups {1, 2}, {3, 4}, {5}
    assert _groups.rounded(histogram, starts, up=True).tolist() == [0, 2, 0, 1, 2]
    assert _groups.rounded(histogram, starts, up=False).tolist() == [2, 0, 1, 0, 2]


def test_real_packs_put_each_sequence_into_a_slot_of_its_group():
    # Lengths 2, 2, 4, 5, 6 in groups {1, 2} and {3..6}: rounded up, 2, 2, 6, 6, 6.
    histogram = make_histogram(6, {2: 2, 4: 1, 5: 1, 6: 1})
    packs = _groups.real_packs([(6, 2), (6,)], np.array([2, 1]), histogram, np.array([1, 3]))
    assert packs == {(6, 2): 1, (5, 2): 1, (4,): 1}  # longest into the first packs


def test_real_packs_drop_spare_slots_and_empty_packs():
    histogram = make_histogram(6, {2: 1, 4: 1})  # rounded up: 2, 6
    packs = _groups.real_packs([(6, 2), (6, 2)], np.array([1, 1]), histogram, np.array([1, 3]))
    assert packs == {(4, 2): 1}


def test_shrunk_packs_grow_into_their_room_longest_first():
    """Hand-checked on lengths 2, 5, 8 in packs of 15: (9, 5) shrinks to (8, 5), room 2: no
    longer length fits it; (4,) to (2,), room 13: the 2 grows to 8; (6, 6) to (5, 5), room 5:
    the first 5 grows to 8 (5 + 5 = 10 holds no length over 8), the second stays. Without
    ``fill`` they only shrink (as `_paths.finer_packs` did before); a pack with no length up
    to its own (1) is dropped."""
    packs, lengths = [(9, 5), (4,), (6, 6), (1,)], np.array([2, 5, 8])
    assert _groups.shrunk(packs, lengths) == [(8, 5), (2,), (5, 5)]
    assert _groups.shrunk(packs, lengths, fill=15) == [(8, 5), (8,), (8, 5)]
    assert _groups.shrunk([], lengths, fill=15) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12, unique=True),
       st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=4), max_size=20))
def test_shrunk_packs_still_fit_and_their_longest_takes_its_room(lengths, packs):
    """Each pack that fitted 40 tokens still does, on the given lengths only, and its longest
    sequence is the longest length within itself and the room left (none longer fits)."""
    lengths = np.array(sorted(lengths))
    packs = [tuple(p) for p in packs if sum(p) <= 40]
    for pack in _groups.shrunk(packs, lengths, fill=40):
        assert sum(pack) <= 40 and set(pack) <= set(lengths.tolist())
        longer = lengths[lengths > max(pack)]
        assert not len(longer) or sum(pack) - max(pack) + longer[0] > 40


@st.composite
def grouped_instances(draw):
    max_length = draw(st.integers(2, 24))
    max_sequences_per_pack = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, max_length), min_size=1, max_size=8))
    inner = draw(st.lists(st.integers(2, max_length), unique=True, max_size=6))
    starts = np.array(sorted({1, *inner}))
    return (make_histogram(max_length, collections.Counter(lengths)), max_length,
            max_sequences_per_pack, starts)


@settings(max_examples=60, deadline=None)
@given(grouped_instances())
def test_up_plans_fit_the_real_lengths_and_down_bounds_bound_them(instance):
    histogram, max_length, max_sequences_per_pack, starts = instance
    up = optimal.pack(_groups.rounded(histogram, starts, up=True), max_length,
                      max_sequences_per_pack, seed=0)
    packs = _groups.real_packs(up.strategies, up.counts, histogram, starts)
    real = _lp_plan.result(packs, 0)
    assert_valid(real, histogram, max_length, max_sequences_per_pack)
    assert real.counts.sum() <= up.counts.sum()
    down = optimal.pack(_groups.rounded(histogram, starts, up=False), max_length,
                        max_sequences_per_pack, seed=0)
    assert down.lower_bound_packs <= brute_force_packs(histogram, max_length,
                                                      max_sequences_per_pack)


def _many_lengths(max_length, seed):
    """Hundreds of lengths, mostly short ones: the depth binds, not the tokens."""
    rng = np.random.default_rng(seed)
    histogram = rng.integers(0, 2, max_length)
    histogram[: max_length // 4] += rng.integers(5, 20, max_length // 4)
    return histogram


@pytest.mark.parametrize("max_sequences_per_pack", [3, 5])
def test_many_lengths_under_a_binding_depth_plan_on_groups(max_sequences_per_pack, monkeypatch):
    monkeypatch.setattr(Tuning, "GROUPED_LENGTHS", 100)
    monkeypatch.setattr(_groups, "EXACT_ENDS", 16)
    monkeypatch.setattr(_groups, "WIDTH", 8)
    histogram, max_length = _many_lengths(512, 0), 512
    calls = []
    real_packs = _groups.real_packs
    monkeypatch.setattr(_groups, "real_packs", lambda *a: calls.append(1) or real_packs(*a))
    grouped = optimal.pack(histogram, max_length, max_sequences_per_pack, seed=0)
    assert calls  # the grouped path ran and its plan was kept
    assert_valid(grouped, histogram, max_length, max_sequences_per_pack)
    exact = _all_lengths(histogram, max_length, max_sequences_per_pack)
    assert grouped.lower_bound_packs <= exact.lower_bound_packs  # a relaxation's bound
    assert grouped.lower_bound_packs <= exact.counts.sum()
    gap = grouped.counts.sum() - grouped.lower_bound_packs
    assert gap <= _lp_plan.slack(grouped.lower_bound_packs)


def test_groups_too_far_apart_fall_back_to_all_lengths(monkeypatch):
    monkeypatch.setattr(Tuning, "GROUPED_LENGTHS", 100)
    monkeypatch.setattr(_groups, "EXACT_ENDS", 1)
    monkeypatch.setattr(_groups, "WIDTH", 256)  # two groups: plan and bound far apart
    histogram, max_length = _many_lengths(512, 1), 512
    tried = []
    grouped = _paths.grouped
    monkeypatch.setattr(_paths, "grouped", lambda *a: tried.append(grouped(*a)) or tried[-1])
    result = optimal.pack(histogram, max_length, 3, seed=0)
    assert len(tried) == 1  # tried; its plan was too far from its bound, so all lengths ran
    exact = _all_lengths(histogram, max_length, 3)
    # The LP over all lengths is seeded by bfd's plan (pack() computes it anyway), not by a
    # second best fit pass, so its packs may differ, never its count or bound.
    assert result.counts.sum() <= exact.counts.sum()
    assert result.lower_bound_packs == exact.lower_bound_packs
    assert_valid(result, histogram, max_length, 3)


def _all_lengths(histogram, max_length, max_sequences_per_pack):
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    simple = _lp_plan.simple_bound(lengths, demand, max_length, max_sequences_per_pack)
    return _lp_plan.result(*_lp_plan.plan(lengths, demand, max_length, max_sequences_per_pack,
                                          simple))


def as_pairs(result):
    return list(zip(result.strategies, result.counts.tolist())), result.lower_bound_packs


def test_balanced_groups_end_at_a_spike_so_rounding_up_keeps_it():
    histogram = np.zeros(64, dtype=np.int64)
    histogram[[9, 29, 39]] = [5, 1000, 5]  # lengths 10, 30 (a spike) and 40
    starts = _groups.balanced(histogram, rows=4, ends=2)
    assert 31 in starts.tolist()  # a group ends at 30
    assert _groups.rounded(histogram, starts, up=True)[29] == 1005  # the 10s join; 30s stay
    assert starts[:3].tolist() == [1, 2, 3] and {63, 64} <= set(starts.tolist())  # exact ends


def test_balanced_groups_round_up_less_than_even_ones():
    """As many groups, fewer tokens lost rounding up a log-normal (the point of them)."""
    rng = np.random.default_rng(0)
    max_length = 2048
    lengths = np.clip(rng.lognormal(np.log(300), 0.8, 50_000).astype(int), 1, max_length)
    histogram = np.bincount(lengths - 1, minlength=max_length)
    tokens = np.arange(1, max_length + 1)
    balanced = _groups.balanced(histogram, rows=128)
    even = _groups.groups(max_length, ends=0, width=-(-max_length // len(balanced)))
    assert len(even) >= len(balanced)
    lost = [tokens @ _groups.rounded(histogram, s, up=True) - tokens @ histogram
            for s in (balanced, even)]
    assert lost[0] < 0.7 * lost[1], lost


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=200), st.integers(0, 40),
       st.integers(0, 8))
def test_balanced_groups_are_valid_starts(counts, rows, ends):
    histogram = np.array(counts, dtype=np.int64)
    starts = _groups.balanced(histogram, rows, ends=ends)
    assert starts[0] == 1 and starts[-1] <= len(histogram)
    assert np.all(np.diff(starts) >= 1)
    assert len(starts) <= max(rows, 1) + 1 + 2 * (ends + 1)
    for up in (False, True):  # every sequence stays, in its group
        assert _groups.rounded(histogram, starts, up=up).sum() == histogram.sum()
    # A length heavier than a group's share ends its group: rounding up keeps it.
    weight = np.sqrt(histogram.astype(float))
    heavy = (weight > 0) & (weight >= weight.sum() / max(rows, 1))  # lengths present
    for length in np.flatnonzero(heavy) + 1:
        if rows and length < len(histogram):
            assert length + 1 in starts.tolist()


@pytest.mark.parametrize("tokens_bind", [True, False])
def test_the_grouped_plan_goes_first_where_the_tokens_bind(tokens_bind, monkeypatch):
    """Tokens bind: the plan on balanced groups, and no LP on the rounded-down histogram
    (its bound never rose above the simple ones there). Depth binds: the bound first."""
    monkeypatch.setattr(Tuning, "GROUPED_LENGTHS", 100)
    monkeypatch.setattr(Tuning, "MANY_LENGTHS", 100)  # not "few lengths": both may run
    max_length = 512
    if tokens_bind:
        rng = np.random.default_rng(0)
        histogram = np.bincount(rng.integers(60, 400, 3000) - 1, minlength=max_length)
    else:
        histogram = _many_lengths(max_length, 0)
    calls, balanced = [], []
    plan = _lp_plan.plan
    monkeypatch.setattr(_lp_plan, "plan",
                        lambda *a, **k: calls.append(k.get("dives", True)) or plan(*a, **k))
    real_balanced = _groups.balanced
    monkeypatch.setattr(_groups, "balanced",
                        lambda *a, **k: balanced.append(1) or real_balanced(*a, **k))
    result = optimal.pack(histogram, max_length, 8 if tokens_bind else 3, seed=0,
                          time_limit=None)
    assert_valid(result, histogram, max_length, 8 if tokens_bind else 3)
    bounds = _bounds.simple(histogram, max_length, 8 if tokens_bind else 3)
    assert (bounds["tokens"] >= bounds["sequences"]) == tokens_bind
    assert calls[0] is tokens_bind  # dives: the plan on the rounded-up histogram
    assert bool(balanced) == tokens_bind
    if tokens_bind:
        assert False not in calls  # no LP on the rounded-down histogram
    else:
        assert calls[:2] == [False, True]  # the bound's LP, then the plan's


def test_quick_bound_on_balanced_groups_sees_what_tokens_miss():
    """300 sequences of 34 tokens, packs of 100: two a pack (150), tokens say 103.

    Rounded down within balanced groups, 34 starts its group (it is heavy), so it
    keeps its length and three still do not fit: the LP bound is 150."""
    histogram = make_histogram(100, {34: 300, **{v: 1 for v in range(1, 9)}})
    search = _paths.Search(_bounds.simple(histogram, 100, None))
    assert search.bound == 103
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "QUICK_ROWS", 4)
        patch.setattr(Tuning, "QUICK_PLAN_ROWS", 4)
        _paths.quick(search, histogram, 100, None, _budget.Budget(None))
    assert search.bounds["lp"] == 150
    assert search.packs == 150  # the plan on groups rounded up meets it
    result = search.result()
    assert (result.lower_bound_packs, result.lower_bound_kind) == (150, "lp")
    assert_valid(result, histogram, 100, None)


@settings(max_examples=60, deadline=None)
@given(tiny_instances())
def test_quick_bounds_never_exceed_the_true_optimum(instance):
    """`_quick` called on every instance (not only where `optimal` would reach it)."""
    histogram, max_length, max_sequences_per_pack = instance
    search = _paths.Search(_bounds.simple(histogram, max_length, max_sequences_per_pack))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "QUICK_ROWS", 2)
        patch.setattr(Tuning, "QUICK_PLAN_ROWS", 1)
        _paths.quick(search, histogram, max_length, max_sequences_per_pack,
                       _budget.Budget(None))
    best = brute_force_packs(histogram, max_length, max_sequences_per_pack)
    assert search.bound <= best
    if search.plan:
        result = search.result()
        assert_valid(result, histogram, max_length, max_sequences_per_pack)
        assert result.lower_bound_packs <= best <= result.counts.sum()


def groups_everywhere(patch) -> None:
    """Length groups (a few lengths each) on every histogram, the search going on at its bound."""
    patch.setattr(_paths.Search, "done", lambda self: False)
    patch.setattr(Tuning, "GROUPED_LENGTHS", 1)
    patch.setattr(Tuning, "MANY_LENGTHS", 2)
    patch.setattr(Tuning, "GROUP_ROWS", 4)
    patch.setattr(Tuning, "BALANCED_ROWS", 3)


@settings(max_examples=60, deadline=None)
@given(tiny_instances(), st.sampled_from([None, 0.0]))
def test_grouped_paths_bound_and_plan_tiny_histograms_correctly(instance, time_limit):
    """Length groups on every histogram (balanced where the tokens bind), with or without
    a time limit: plans valid and never behind best fit, bounds never above the optimum.
    The search goes on even at its bound, and the grouped LPs run (the path, not the
    shortcut)."""
    histogram, max_length, max_sequences_per_pack = instance
    with pytest.MonkeyPatch.context() as patch:
        groups_everywhere(patch)
        result = optimal.pack(histogram, max_length, max_sequences_per_pack, seed=0,
                              time_limit=time_limit)
    assert_valid(result, histogram, max_length, max_sequences_per_pack)
    best = brute_force_packs(histogram, max_length, max_sequences_per_pack)
    assert result.lower_bound_packs <= best <= result.counts.sum()
    bfd = base.get("bfd")(histogram, max_length, max_sequences_per_pack, seed=0)
    assert result.counts.sum() <= bfd.counts.sum()


def test_where_the_tokens_bind_groups_are_split_while_time_is_left(monkeypatch):
    """`_refine`: after the plan on balanced groups, plans on twice the groups (balanced
    again) while the plan is not within `_slack` of the bound and time is left; each is a
    candidate, so the plan only improves, and it stops below one group a length."""
    monkeypatch.setattr(Tuning, "GROUPED_LENGTHS", 100)
    monkeypatch.setattr(Tuning, "MANY_LENGTHS", 100)
    monkeypatch.setattr(Tuning, "BALANCED_ROWS", 16)
    monkeypatch.setattr(Tuning, "BALANCED_ENDS", 2)
    monkeypatch.setattr(Tuning, "REFINE_LEFT", 0.0)
    monkeypatch.setattr(Tuning, "LP_GAP", 0.0)  # "within" only at the bound itself
    monkeypatch.setattr(Tuning, "ROUNDING_PACKS", 0)
    rng = np.random.default_rng(4)
    histogram = np.bincount(rng.integers(60, 400, 3000) - 1, minlength=512)
    rows, made, offered = [], [], []
    balanced, offer = _groups.balanced, _paths.Search.offer

    def spy(h, r, *a, **k):
        rows.append(r)
        made.append(len(balanced(h, r, *a, **k)))
        return balanced(h, r, *a, **k)

    monkeypatch.setattr(_groups, "balanced", spy)
    monkeypatch.setattr(_paths.Search, "offer", lambda self, packs, **k: (
        offered.append(sum(packs.values()) if packs else None), offer(self, packs, **k))[1])
    result = optimal.pack(histogram, 512, 8, seed=0, time_limit=None)
    assert_valid(result, histogram, 512, 8)
    assert rows[0] == 60  # 64 groups at least (2 exact ends a side), then twice as many
    assert all(r == 2 * m - 4 for r, m in zip(rows[1:], made))
    assert len(rows) >= 3 and 2 * made[-1] >= np.count_nonzero(histogram) > 2 * made[-2]
    assert result.counts.sum() == min(p for p in offered if p is not None)


def _units_case(monkeypatch, lossy, less=(8, 16, 24)):
    """L=1,024 in units of 32 (`_UNITS_FROM`, `_UNIT_ROWS`), a finer grid of 4 (`_FINE_ROWS`).

    1,000 sequences of 3, 5, 7, 11 or 13 units of 32, less 8, 16 or 24 tokens
    (``lossy``: rounding up to 32 loses 16 tokens a sequence, 7% of the tokens; or any of
    ``less``) or not (nothing lost); depth 16: the tokens bind, and best fit is 3-6 packs above them."""
    for name, value in (("UNITS_FROM", 1024), ("UNIT_ROWS", 32), ("FINE_ROWS", 256),
                        ("GROUPED_LENGTHS", 4), ("MANY_LENGTHS", 4),
                        ("FULL_FIRST_BELOW", 1024)):
        monkeypatch.setattr(Tuning, name, value)
    rng = np.random.default_rng(0)
    units = np.array([3, 5, 7, 11, 13])[rng.integers(0, 5, 1000)]
    lengths = units * 32 - (rng.choice(less, 1000) if lossy else 0)
    return np.bincount(lengths - 1, minlength=1024)


@pytest.mark.parametrize("lossy", [True, False])
def test_the_plan_moves_to_a_finer_grid_where_rounding_up_to_units_loses_too_much(lossy,
                                                                                 monkeypatch):
    """`_fine_grid`: the plan in units of 32 tokens, unless rounding every length up to
    them loses more than `_GRID_LOSS` of the token bound's tokens: then on balanced
    groups whose first lengths are 4 k + 1, in units of 4."""
    histogram = _units_case(monkeypatch, lossy)
    monkeypatch.setattr(Tuning, "REFINE_LEFT", math.inf)  # the first grouped plan only
    units, grids = [], []
    plan_up, on_grid = _paths.plan_up, _paths.on_grid
    monkeypatch.setattr(_paths, "plan_up", lambda *a, **k: (units.append(a[8]), plan_up(*a, **k)))
    monkeypatch.setattr(_paths, "on_grid", lambda h, unit, rows: (
        grids.append((unit, rows)), on_grid(h, unit, rows))[1])
    result = optimal.pack(histogram, 1024, 16, seed=0, time_limit=None)
    assert_valid(result, histogram, 1024, 16)
    assert units == [4 if lossy else 32]  # the grouped plan's unit
    assert grids == ([(4, 32)] if lossy else [])
    bfd = base.get("bfd")(histogram, 1024, 16, seed=0)
    assert result.counts.sum() <= bfd.counts.sum()


def test_a_finer_grid_is_not_taken_where_its_table_is_too_large(monkeypatch):
    histogram = _units_case(monkeypatch, lossy=True)
    cells = Tuning.UNIT_ROWS * 17 * (1024 // 4 + 1)  # the finer plan's table at depth 16
    starts = np.arange(1, 1025, 32)
    bound = _bounds.simple(histogram, 1024, 16)["tokens"]
    assert _paths.fine_grid(histogram, 32, starts, bound, 16)[0] == 4
    monkeypatch.setattr(Tuning, "TABLE_CELLS", cells - 1)
    assert _paths.fine_grid(histogram, 32, starts, bound, 16)[0] == 32


def test_long_contexts_plan_on_unit_rows_groups_of_the_finer_grid(monkeypatch):
    """On long contexts too the finer grid's plan has UNIT_ROWS balanced groups (32 here), not
    more: up to 2,048 at L=12,288-16,384, their LP's first solve did not end within the second
    of a slower CPU, and the plan was best fit's (session 19: 559/32 5.83% above the bound)."""
    histogram = _units_case(monkeypatch, lossy=True)
    starts = np.arange(1, 1025, 32)
    bound = _bounds.simple(histogram, 1024, 16)["tokens"]
    for long_from in (1024, 2048):
        monkeypatch.setattr(Tuning, "LONG_CONTEXT_FROM", long_from)
        unit, groups = _paths.fine_grid(histogram, 32, starts, bound, 16)
        assert unit == 4 and np.all((groups - 1) % 4 == 0)
        assert 16 < len(groups) <= 32


def test_the_grid_loss_is_counted_past_int64():
    """2**59 sequences of one token lose 31 * 2**59 > 2**63 tokens in units of 32: counted
    in int64 that wraps negative, and the coarse grid would look free."""
    histogram = np.zeros(4096, dtype=np.int64)
    histogram[0] = 2 ** 59
    bound = -(-(2 ** 59) // 4096)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "FINE_ROWS", 1024)  # a grid of 4
        unit, starts = _paths.fine_grid(histogram, 32, np.arange(1, 4097, 32), bound, 1)
    assert unit == 4 and np.all((starts - 1) % 4 == 0)


@pytest.mark.parametrize("length, half, unit", [(1023, True, 32), (1022, True, 16),
                                                (1022, False, 32), (1021, False, 4),
                                                (1021, True, 4)])
def test_a_grid_of_half_the_unit_where_rounding_up_loses_a_little_too_much(length, half, unit):
    """`fine_grid` in units of 32 at L=1,024: ten sequences of ``length`` (token bound 10)
    lose ``1024 - length`` tokens each, 0.098%, 0.195% or 0.293% of the bound's tokens:
    with ``half``, past `Tuning.HALF_GRID_LOSS` (0.15%) and up to `Tuning.GRID_LOSS` (0.2%)
    the grid is half the unit; past GRID_LOSS, L / `Tuning.FINE_ROWS` (256 here: 4)."""
    histogram = np.zeros(1024, dtype=np.int64)
    histogram[length - 1] = 10
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Tuning, "FINE_ROWS", 256)
        got, starts = _paths.fine_grid(histogram, 32, np.arange(1, 1025, 32), 10, 2, half=half)
    assert got == unit and np.all((starts - 1) % unit == 0)


@pytest.mark.parametrize("proved, unit", [(-1, 16), (0, 32)])
def test_the_half_grid_only_where_the_rounded_down_lp_stays_below_the_token_bound(
        proved, unit, monkeypatch):
    """`grouped`: rounding up to 32 loses 0.8% of the tokens (1-3 a sequence), between
    HALF_GRID_LOSS and GRID_LOSS here; where `prove_down`'s LP proves less than the token bound (``proved``
    relative to it) the plan is on half the unit, where it reaches it on the unit (its
    duals lift the bound there)."""
    histogram = _units_case(monkeypatch, lossy=True, less=(1, 2, 3))
    for name, value in (("HALF_GRID_LOSS", 0.001), ("GRID_LOSS", 0.1), ("PROVE_ABOVE", -0.5),
                        ("REFINE_LEFT", math.inf)):
        monkeypatch.setattr(Tuning, name, value)

    def prove_down(search, *args, **kwargs):
        search.prove(search.bounds["tokens"] + proved, "lp")
        return 0, 0.0, []

    units = []
    plan_up = _paths.plan_up
    monkeypatch.setattr(_paths, "prove_down", prove_down)
    monkeypatch.setattr(_paths, "plan_up", lambda *a, **k: (units.append(a[8]), plan_up(*a, **k)))
    result = optimal.pack(histogram, 1024, 16, seed=0, time_limit=None)
    assert_valid(result, histogram, 1024, 16)
    assert units[:1] == [unit]


def test_a_grid_plan_is_refined_on_twice_the_groups_of_the_same_grid(monkeypatch):
    """`_refine` after a plan on a finer grid: twice the balanced groups, on the same grid,
    until they would be fewer than `Tuning.REFINE_MORE_ROWS` times the last plan's (nearly one
    a grid length: half the unit next); each plan a candidate."""
    histogram = _units_case(monkeypatch, lossy=True, less=np.arange(1, 31))  # 150 lengths
    monkeypatch.setattr(Tuning, "REFINE_LEFT", 0.0)
    monkeypatch.setattr(Tuning, "LP_GAP", 0.0)  # "within" only at the bound itself
    monkeypatch.setattr(Tuning, "ROUNDING_PACKS", 0)
    grids, offered = [], []
    on_grid, offer = _paths.on_grid, _paths.Search.offer
    monkeypatch.setattr(_paths, "on_grid", lambda h, unit, rows: (
        grids.append((unit, rows, len(on_grid(h, unit, rows)))), on_grid(h, unit, rows))[1])
    monkeypatch.setattr(_paths.Search, "offer", lambda self, packs, **k: (
        offered.append(sum(packs.values()) if packs else None), offer(self, packs, **k))[1])
    result = optimal.pack(histogram, 1024, 16, seed=0, time_limit=None)
    assert_valid(result, histogram, 1024, 16)
    assert grids[0][:2] == (4, 32) and {unit for unit, _, _ in grids} == {4}
    assert all(rows == 2 * made for (_, _, made), (_, rows, _) in zip(grids, grids[1:]))
    assert len(grids) >= 3 and grids[-1][2] < Tuning.REFINE_MORE_ROWS * grids[-2][2]
    assert result.counts.sum() == min(p for p in offered if p is not None)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=64, max_size=64), st.sampled_from([2, 4, 8]),
       st.integers(1, 20))
def test_groups_on_a_grid_start_on_it_and_round_up_to_multiples_of_it(counts, unit, rows):
    histogram = np.array(counts, dtype=np.int64)
    starts = _paths.on_grid(histogram, unit, rows)
    assert starts[0] == 1 and np.all(np.diff(starts) > 0) and np.all((starts - 1) % unit == 0)
    up = _groups.rounded(histogram, starts, up=True)
    assert up.sum() == histogram.sum() and not up[np.arange(64) % unit != unit - 1].any()
