"""The LPs on a grid of units (`tfpack.packing.pairs._grid`): bound <= optimum <= plan, exact pricing.

Optima of tiny histograms by brute force (`test_pair_lp_bound.optimum`), the
LP itself by enumerating every pack (`test_pair_lp_bound.lp_value`).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tfpack.packing import plan
from tfpack.packing.pairs import _grid
from tfpack.packing.pairs._rounding import from_solution

from test_pair_lp_bound import histogram, lp_value, optimum


def assert_valid(placed, counts, limits):
    """Every pair in exactly one pack; each pack within both limits and K pairs."""
    seen = np.zeros_like(counts)
    np.add.at(seen, (placed.a - 1, placed.b - 1), 1)
    assert (seen == counts).all()
    for row, limit in ((placed.a, limits[0]), (placed.b, limits[1])):
        assert np.bincount(placed.pack, row).max() <= limit
    if limits[2] is not None:
        assert np.bincount(placed.pack).max() <= limits[2]


def test_hand_checked():
    # (6, 1) x2 and (2, 3) x2 at Le=8, Ld=4, units 4 (2 input tokens, 1 target token a unit):
    # up, (3, 1) and (1, 3) units fill a pack; down the same (the lengths are on the grid).
    counts = histogram([(6, 1), (6, 1), (2, 3), (2, 3)], (8, 4))
    down = _grid.solve(counts, (8, 4, 2), 4, None, up=False)
    up = _grid.solve(counts, (8, 4, 2), 4, None, up=True)
    assert (down.bound, down.converged, up.value) == (2, True, 2.0)
    placed = from_solution(counts, (8, 4, 2), up.columns, up.x, up.grouped)
    assert placed.packs == 2
    assert_valid(placed, counts, (8, 4, 2))


def test_rounding_down_loses_what_the_grid_cannot_see():
    # (5, 1) x2 at Le=8: two never share a pack. With 2 units a row (4 tokens), 5 rounds down
    # to 1 unit: the bound sees two in a pack (1 pack); rounded up to 2 units, one a pack (2).
    counts = histogram([(5, 1), (5, 1)], (8, 4))
    assert _grid.solve(counts, (8, 4, None), 2, None, up=False).bound == 1
    assert _grid.solve(counts, (8, 4, None), 2, None, up=True).value == 2.0
    assert _grid.solve(counts, (8, 4, None), 8, None, up=False).bound == 2


def test_rounding_down_wins_back_a_unit_where_it_binds():
    # Le=10, 2 units a row (5 tokens): inputs 7 and 6 never share a pack (optimum 2). floor(a G / L)
    # gives each 1 unit and the bound 1 pack; ceil(a (G + 1) / L) - 1 gives 7 -> 2 (7 * 3 / 10 = 2.1)
    # and 6 -> 1 (1.8): 3 units over 2, so 2 packs, the optimum.
    counts = histogram([(7, 2), (6, 4)], (10, 6))
    assert optimum(counts, (10, 6, 3)) == 2
    assert _grid.solve(counts, (10, 6, 3), 2, None, up=False).bound == 2


def partitions(total: int, most: int):
    """Every multiset of lengths 1..most summing to ``total`` (non-increasing tuples)."""
    if total == 0:
        yield ()
        return
    for first in range(min(total, most), 0, -1):
        for rest in partitions(total - first, first):
            yield (first,) + rest


def test_every_real_pack_rounded_down_fits_its_units():
    # Exhaustive up to L=14: the lengths of any pack (sum <= L), rounded down, fit G units.
    for limit in range(1, 15):
        packs = [np.array(p) for total in range(1, limit + 1) for p in partitions(total, limit)]
        for units in range(1, 2 * limit + 1):
            assert max(_grid._units(p, limit, units, up=False).sum() for p in packs) <= units


SHARES = [Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(1)]


def test_every_pack_of_at_most_k_rounded_down_with_any_share_fits_its_units():
    # Exhaustive up to L=12, K=4: ceil(a (G + s) / L + (1 - s) / K) - 1 over any <= K lengths of a
    # pack (sum <= L) is at most G, for each share s; and `_least` is the least length on its units.
    for limit in range(1, 13):
        lengths = np.arange(1, limit + 1)
        for depth in range(1, 5):
            packs = [list(p) for total in range(1, limit + 1) for p in partitions(total, limit) if len(p) <= depth]
            table = np.zeros((len(packs), depth), dtype=np.int64)  # column j: the pack's j-th length - 1, or -1
            table -= 1
            for i, p in enumerate(packs):
                table[i, :len(p)] = np.array(p) - 1
            for units in range(1, 2 * limit + 1):
                for share in SHARES:
                    rounded = _grid._units(lengths, limit, units, up=False, lean=(share, depth))
                    assert (np.where(table >= 0, rounded[table], 0).sum(axis=1) <= units).all()
                    least = _grid._least(rounded, limit, units, up=False, lean=(share, depth))
                    first = np.searchsorted(rounded, rounded) + 1  # rounded is nondecreasing
                    assert ((least == first) | (rounded == rounded[0])).all()


def test_the_places_share_proves_what_the_lengths_share_cannot():
    # (3, 4) and (10, 4) at Le=10, Ld=6, K=2: 13 > 10 input tokens, so 2 packs. On 2 units a row,
    # s = 1 rounds 3 to ceil(0.9) - 1 = 0 units and 10 to 2: one pack. s = 0 (a pair of at most 2
    # wins back 1/2 a unit): 3 -> ceil(0.6 + 0.5) - 1 = 1, 10 -> ceil(2.5) - 1 = 2: 3 > 2, 2 packs.
    counts = histogram([(3, 4), (10, 4)], (10, 6))
    assert optimum(counts, (10, 6, 2)) == 2
    assert _grid.solve(counts, (10, 6, 2), 2, None, up=False).bound == 1
    assert _grid.solve(counts, (10, 6, 2), 2, None, up=False, lean=(0, 0)).bound == 2
    assert _grid.solve(counts, (10, 6, 2), (2, 3), None, up=False, lean=(0, Fraction(1, 2))).bound == 2


pair = st.tuples(st.integers(1, 10), st.integers(1, 6))


@settings(max_examples=30, deadline=None)
@given(st.lists(pair, min_size=1, max_size=8), st.sampled_from([1, 2, 3, 4]),
       st.tuples(st.integers(1, 8), st.integers(1, 8)), st.tuples(st.sampled_from(SHARES), st.sampled_from(SHARES)))
@example([(3, 4), (10, 4)], 2, (2, 2), (Fraction(0), Fraction(0)))
def test_any_units_and_shares_bound_below_optimum(pairs, depth, units, lean):
    # Input and target units apart, each row's share of its rounding down: still a bound, seeded too.
    limits = (10, 6, depth)
    counts = histogram(pairs, limits[:2])
    best = optimum(counts, limits)
    down = _grid.solve(counts, limits, units, None, up=False, lean=lean)
    assert down.converged and down.bound <= best
    up = _grid.solve(counts, limits, units, None, up=True)
    seeded = _grid.solve(counts, limits, units, None, up=False, seed=up, lean=lean)
    assert seeded.bound == down.bound and abs(seeded.value - down.value) < 1e-6
    placed = from_solution(counts, limits, up.columns, up.x, up.grouped)
    assert_valid(placed, counts, limits)


@settings(max_examples=25, deadline=None)
@given(st.lists(pair, min_size=1, max_size=8), st.sampled_from([1, 2, 3, 4, None]),
       st.sampled_from([2, 3, 4, 5, 8]))
@example([(6, 1), (6, 1), (1, 5), (1, 5), (4, 3)], 4, 3)
def test_bound_below_optimum_below_plan(pairs, depth, units):
    limits = (10, 6, depth)
    counts = histogram(pairs, limits[:2])
    best = optimum(counts, limits)
    lp = lp_value(counts, limits)
    down = _grid.solve(counts, limits, units, None, up=False)
    up = _grid.solve(counts, limits, units, None, up=True)
    assert down.converged and up.converged
    assert down.bound <= best and down.value <= lp + 1e-6
    # (The LP of rounded-up pairs is no restriction of `lp`: its packs may hold more copies of a
    # class than there are pairs; its plan is what must hold the real pairs.)
    placed = from_solution(counts, limits, up.columns, up.x, up.grouped)
    assert_valid(placed, counts, limits)
    assert placed.packs >= best
    placed, bound = _grid.grid(counts, limits, None, units=units)
    assert_valid(placed, counts, limits)
    assert bound <= best <= placed.packs


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 4), st.integers(1, 5), st.data())
def test_pricing_is_exact(units, depth, data):
    # The most a pack of at most `depth` cells within `units` input units (and `other` target
    # units) is worth, by enumeration.
    other = data.draw(st.integers(1, 4))
    values = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.4, 0.7]), min_size=(units + 1) * (other + 1),
                                         max_size=(units + 1) * (other + 1)))).reshape(units + 1, other + 1)
    ids = np.arange(values.size).reshape(values.shape)
    tables = _grid.Tables(values, ids, depth)
    cells_ = [(e, d) for e in range(units + 1) for d in range(other + 1)]
    best = 0.0
    for k in range(1, depth + 1):
        for pack in itertools.combinations_with_replacement(cells_, k):
            if sum(e for e, _ in pack) <= units and sum(d for _, d in pack) <= other:
                best = max(best, sum(values[e, d] for e, d in pack))
    assert abs(tables.worth - best) < 1e-9
    members = tables.packs(1)[0]  # the best pack, as class ids (here: cells), fits and is worth it
    e, d = np.divmod(np.asarray(members, dtype=np.int64), other + 1)
    assert len(members) <= depth and e.sum() <= units and d.sum() <= other
    assert abs(values[e, d].sum() - best) < 1e-9


def balanced(n: int, limits) -> np.ndarray:
    """``n`` pairs of the benchmarks' balanced family: both medians at 0.2 of their limits, correlation 0.5."""
    rng = np.random.default_rng(0)
    z = rng.multivariate_normal([0, 0], [[1, 0.5], [0.5, 1]], n)
    a = np.minimum(np.exp(np.log(0.2 * limits[0]) + 0.6 * z[:, 0]).astype(np.int64) + 1, limits[0])
    b = np.minimum(np.exp(np.log(0.2 * limits[1]) + 0.6 * z[:, 1]).astype(np.int64) + 1, limits[1])
    counts = np.zeros(limits, dtype=np.int64)
    np.add.at(counts, (a - 1, b - 1), 1)
    return counts


def test_optimal_runs_the_grid_where_both_rows_bind():
    # Both rows bind at 4 pairs a pack: tokens need 0.96 of the packs places need.
    counts = balanced(400, (32, 16))
    p = plan(counts, max_length=(32, 16), max_sequences_per_pack=4, algorithm="optimal", time_limit=None)
    m = p.metrics
    placed, bound = _grid.grid(counts, (32, 16, 4), None)
    assert bound > 100  # 400 pairs: 100 packs of 4 at best; the grid proves more
    assert m["lower_bound_packs"] >= bound and m["packs"] <= placed.packs
    assert m["lower_bound_packs"] <= m["packs"]


def test_templates_after_the_grid_only_where_its_bound_leaves_the_plan_out(monkeypatch):
    # The grid's bound (stood in for here) 0.4% under the fill's plan: the templates, run for their
    # bound, are skipped (`_GRID_CLOSE`); 0.6% under it, they run. The plan is the fill's either way.
    from tfpack.packing.pairs import algorithms

    counts, limits = balanced(4000, (32, 16)), (32, 16, 4)
    packs = algorithms.dot_fill(counts, limits)[0].packs
    calls = []

    def recording(make):
        def made(*args, **kwargs):
            calls.append(make.__name__)
            return make(*args, **kwargs)
        return made

    for name in ("fill", "swapped"):  # the binding side's (here the targets': `swapped`)
        monkeypatch.setattr(algorithms, name, recording(getattr(algorithms, name)))
    monkeypatch.setattr(algorithms, "_grid_first", lambda found, limits: True)  # tokens: 1.09 of places
    monkeypatch.setattr(algorithms, "_SETTLE_PAIRS", 0)  # the best plan kept as the candidates left it
    monkeypatch.setattr(algorithms, "_SETTLE_ABOVE", float("inf"))  # (no settling pass at all)
    for under, called in ((1.004, False), (1.006, True)):
        calls.clear()
        monkeypatch.setattr(algorithms, "grid", lambda *args, under=under, **kwargs: (None, int(packs / under)))
        best, bound, _ = algorithms.optimal(counts, limits, seed=0, time_limit=30.0)
        assert best.packs == packs and bound >= int(packs / under)
        assert bool(calls) == called


@settings(max_examples=25, deadline=None)
@given(st.lists(pair, min_size=1, max_size=8), st.sampled_from([2, 3, 4, None]),
       st.sampled_from([2, 3, 4]), st.sampled_from([2, 3, 5, 8]))
@example([(6, 1), (6, 1), (1, 5), (1, 5), (4, 3)], 4, 3, 5)
def test_seeded_columns_are_packs_of_the_rounded_down_units(pairs, depth, up_units, down_units):
    # The rounded-up LP's columns, mapped to rounded-down classes at any units, fit those units;
    # seeded with them, the rounded-down LP converges to the same value and bound.
    limits = (10, 6, depth)
    counts = histogram(pairs, limits[:2])
    up = _grid.solve(counts, limits, up_units, None, up=True)
    grouped, ca, cb = _grid.grid_classes(counts, limits, down_units, up=False)
    for rows, copies in _grid._seeded(up, grouped):
        assert (ca[rows] * copies).sum() <= down_units and (cb[rows] * copies).sum() <= down_units
        assert depth is None or copies.sum() <= depth
    plain = _grid.solve(counts, limits, down_units, None, up=False)
    seeded = _grid.solve(counts, limits, down_units, None, up=False, seed=up)
    assert seeded.converged and abs(seeded.value - plain.value) < 1e-6 and seeded.bound == plain.bound


def test_seeding_maps_each_class_to_the_most_numerous_class_below_it():
    # Le=8, Ld=4, units 4 (2 input tokens, 1 target token): (3, 1) and (4, 1) round up to (2, 1)
    # units; down to (1, 1) and (2, 1), the latter with 2 pairs. The up LP packs its class twice
    # (4 input units): down, (2, 1) twice.
    counts = histogram([(3, 1), (4, 1), (4, 1)], (8, 4))
    up = _grid.solve(counts, (8, 4, 2), 4, None, up=True)
    grouped, ca, cb = _grid.grid_classes(counts, (8, 4, 2), 4, up=False)
    columns = [(ca[rows].tolist(), cb[rows].tolist(), copies.tolist()) for rows, copies in _grid._seeded(up, grouped)]
    assert columns == [([2], [1], [2])]


def test_the_plans_lp_takes_the_finer_units_while_its_classes_are_few(monkeypatch):
    # (30, 10) and (31, 10) at 64/16: 48 units round them up to (23, 30) and (24, 30): 2 classes.
    counts = histogram([(30, 10), (31, 10)], (64, 16))
    assert _grid.units_for(counts, (64, 16, 4), up=True) == (48, (1, 1))
    monkeypatch.setattr(_grid, "_PLAN_CLASSES", 1)  # 2 classes at 48 units are too many; 32 is the coarsest
    assert _grid.units_for(counts, (64, 16, 4), up=True) == (32, (1, 1))


def test_the_plans_lp_gets_most_of_the_time_limit(monkeypatch):
    # Balanced pairs at K=4: the LP of rounded-up pairs converges in 0.86 s CPU on 1e6 of them
    # (its plan: 260,348 packs from 0.7 s, 259,732 converged); the bound's LP, seeded, in 0.23 s.
    seen, solve = [], _grid.solve

    def recording(counts, limits, units, budget, up=True, **kwargs):
        seen.append((up, budget.left()))
        return solve(counts, limits, units, budget, up=up, **kwargs)

    monkeypatch.setattr(_grid, "solve", recording)
    _grid.grid(histogram([(6, 1), (6, 1), (2, 3), (2, 3)], (8, 4)), (8, 4, 2), time_limit=1.0)
    # Then, in the time left, the plan's LP on finer units and the bound's on finer units.
    (up, first), second = seen[0], next(left for up, left in seen if not up)
    assert up
    assert _grid._UP_SHARE == 0.9 and 0.85 < first <= 0.9 and second >= _grid._DOWN_LEAST


def test_finer_units_in_the_time_left_prove_more():
    # Two (101, 1) at 200/200: one a pack (202 > 200), so 2 packs. Rounded down to 80 input units
    # with s = 3/4 (ceil(101 * 80.75 / 200 + 1 / 16) - 1 = 40 a pair: 80 <= 80) both fit; to 128
    # units (s = 1), ceil(101 * 129 / 200) - 1 = 65 a pair, 130 > 128.
    counts = histogram([(101, 1)] * 2, (200, 200))
    assert optimum(counts, (200, 200, 4)) == 2
    assert _grid.units_for(counts, (200, 200, 4)) == ((80, 80), (Fraction(3, 4), 0))
    assert _grid.grid(counts, (200, 200, 4), None)[1] == 1  # no time limit: the first units only
    assert _grid.grid(counts, (200, 200, 4), 5.0)[1] == 2


def test_finer_units_only_with_the_time_they_need(monkeypatch):
    units, solve = [], _grid.solve

    def recording(counts, limits, g, budget, up=True, **kwargs):
        units.append((g, up))
        return solve(counts, limits, g, budget, up=up, **kwargs)

    monkeypatch.setattr(_grid, "solve", recording)
    counts = histogram([(101, 1)] * 2, (200, 200))
    _grid.grid(counts, (200, 200, 4), 5.0)
    assert units == [(48, True), (64, True), ((80, 80), False), (96, False), (128, False)]
    units.clear()
    monkeypatch.setattr(_grid, "_FINER_NEED", 1e9)  # the first LP's time times this is never left
    _grid.grid(counts, (200, 200, 4), 5.0)
    assert units == [(48, True), ((80, 80), False)]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 200), st.integers(1, 200)), min_size=1, max_size=7),
       st.sampled_from([1, 2, 3, 4]))
@example([(67, 1)] * 3, 4)
@example([(101, 1)] * 2, 4)
def test_finer_units_keep_bound_below_optimum_below_plan(pairs, depth):
    limits = (200, 200, depth)
    counts = histogram(pairs, limits[:2])
    placed, bound = _grid.grid(counts, limits, 5.0)
    assert_valid(placed, counts, limits)
    assert bound <= optimum(counts, limits) <= placed.packs


def test_the_next_units_prove_a_bound_where_the_first_stop_early(monkeypatch):
    # Three (70, 1) at 200/200, K=4: 96 x 64 units with s = 3/4 round each input to 33 (99 > 96),
    # so 2 packs, the optimum.
    # The first units' LP stopped before its first round (as a loaded machine can) proves nothing;
    # the next units of the list then run, and their bound is the grid's.
    counts = histogram([(70, 1)] * 3, (200, 200))
    assert optimum(counts, (200, 200, 4)) == 2
    calls, solve = [], _grid.solve

    def first_stops(counts, limits, units, budget, up=True, **kwargs):
        calls.append((units, up))
        stopped = not up and units == (80, 80)
        return solve(counts, limits, units, _grid.Budget(0.0) if stopped else budget, up=up, **kwargs)

    monkeypatch.setattr(_grid, "solve", first_stops)
    assert _grid.grid(counts, (200, 200, 4), 1.0)[1] == 2
    assert [units for units, up in calls if not up][:2] == [(80, 80), (96, 64)]
