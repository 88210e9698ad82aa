"""Plans rounded from the two-length LP (`tfpack.packing.pairs._rounding`): always valid, never below the optimum."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing import plan
from tfpack.packing.pairs import _lp_bound
from tfpack.packing.pairs._packs import strategies_of
from tfpack.packing.pairs._grid import grid_classes
from tfpack.packing.pairs._rounding import _added, _followed, _redirected, from_solution, rounded
from tfpack.packing.pairs.checks import check_pair_plan

from test_pair_lp_bound import histogram, optimum


def valid(placed, counts, limits) -> None:
    strategies, copies = strategies_of(placed.pack, placed.a, placed.b, limits[1])
    check_pair_plan(strategies, copies, counts, max_length=limits[:2], max_sequences_per_pack=limits[2])
    assert placed.packs == int(copies.sum())


def test_a_converged_lp_rounds_to_the_pairs_that_fill_both_rows():
    # (6, 1) with (2, 3) fills (8, 4); alone, each side's tokens say 3 packs but a first fit may not pair them.
    counts = histogram([(6, 1)] * 3 + [(2, 3)] * 3, (8, 4))
    placed, result = rounded(counts, (8, 4, None), time_limit=None)
    valid(placed, counts, (8, 4, None))
    assert (placed.packs, result.bound) == (3, 3)


def test_left_out_pairs_take_the_empty_slots_of_a_longer_class():
    # Classes (4, 2) with 1 slot and 2 pairs, (5, 3) with 1 empty slot: one (4, 2) pair moves there.
    grouped = _lp_bound.Classes(np.array([4, 5]), np.array([2, 3]), np.array([2, 0]), np.full((5, 3), -1))
    a, b, n, cls, assigned = _redirected(np.array([4]), np.array([2]), np.array([2]), np.array([0]),
                                         np.array([1]), np.array([1, 1]), grouped, (8, 4))
    assert (a.tolist(), b.tolist(), n.tolist(), cls.tolist(), assigned.tolist()) == (
        [4, 4], [2, 2], [1, 1], [0, 1], [1, 1])
    # No class holds it: the pair stays left out.
    grouped = _lp_bound.Classes(np.array([4, 3]), np.array([2, 3]), np.array([2, 0]), np.full((5, 3), -1))
    a, b, n, cls, assigned = _redirected(np.array([4]), np.array([2]), np.array([2]), np.array([0]),
                                         np.array([1]), np.array([1, 1]), grouped, (8, 4))
    assert (n.tolist(), assigned.tolist()) == ([2], [1])


def test_a_solution_over_more_classes_than_the_blend_has_sizes_rounds_to_every_pair():
    # 64 x 64 units, a pair on every cell: 4,096 classes (the blend's sizes stop at 2,048; pairs of
    # the classes ranked past them were left unplaced). Each class alone in its packs: 4,096 packs.
    counts = np.ones((64, 64), dtype=np.int64)
    grouped = grid_classes(counts, (64, 64, 4), 64, up=True)[0]
    columns = [(np.array([c]), np.array([1])) for c in range(grouped.n.size)]
    placed = from_solution(counts, (64, 64, 4), columns, grouped.n.astype(np.float64), grouped)
    valid(placed, counts, (64, 64, 4))
    assert grouped.n.size == 4096 and placed.packs <= 4096


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 5)), min_size=1, max_size=8),
       depth=st.sampled_from([None, 1, 2, 3]), most=st.integers(1, 6))
def test_every_rounded_plan_is_valid_and_at_least_the_optimum(pairs, depth, most):
    # Coarse classes (most < cells) round lengths down: packs overflow and are repaired.
    counts = histogram(pairs, (6, 5))
    limits = (6, 5, depth)
    placed, result = rounded(counts, limits, time_limit=None, most=most)
    valid(placed, counts, limits)
    assert result.bound <= optimum(counts, limits) <= placed.packs


@settings(max_examples=25, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 8)), min_size=1, max_size=60),
       depth=st.sampled_from([None, 2, 4]))
def test_optimal_bound_at_most_its_packs_at_most_first_fit(pairs, depth):
    # Small histograms: `optimal` runs the two-length LP without a time limit and may take its rounded plan.
    counts = histogram(pairs, (16, 8))
    kwargs = dict(max_length=(16, 8), max_sequences_per_pack=depth, time_limit=None)
    optimal = plan(counts, algorithm="optimal", **kwargs)
    first_fit = plan(counts, algorithm="ffd", **kwargs)
    assert optimal.metrics["lower_bound_packs"] <= optimal.metrics["packs"] <= first_fit.metrics["packs"]


def test_optimal_takes_the_rounded_plan_where_it_has_fewer_packs():
    # Input-heavy and target-heavy pairs, K=4: the templates, blend and ffd plans need 7 packs, the LP's 6.
    pairs = [(3, 3), (2, 4), (1, 3), (3, 3), (7, 2), (9, 2), (3, 4), (6, 1), (1, 6), (1, 5), (9, 1), (1, 4),
             (8, 2), (6, 1), (3, 5)]
    p = plan(histogram(pairs, (12, 8)), max_length=(12, 8), max_sequences_per_pack=4, algorithm="optimal",
             time_limit=None)
    assert (p.metrics["packs"], p.metrics["lower_bound_packs"]) == (6, 6)


def _redirected_cell_by_cell(a, b, n, cls, assigned, slots, grouped, limits):
    """The reference: each cell, largest first, scans every class for the least long dominating one."""
    empty = slots - np.bincount(cls, assigned, slots.size).astype(np.int64)
    left = n - assigned
    weight = grouped.a / limits[0] + grouped.b / limits[1]
    extra = []
    for row in np.flatnonzero(left)[np.argsort(-(a / limits[0] + b / limits[1])[left > 0], kind="stable")]:
        need = int(left[row])
        while need:
            c = cls[row]
            holds = np.flatnonzero((empty > 0) & (grouped.a >= grouped.a[c]) & (grouped.b >= grouped.b[c]))
            if not holds.size:
                break
            target = int(holds[np.argmin(weight[holds])])
            moved = min(need, int(empty[target]))
            empty[target] -= moved
            need -= moved
            extra.append((row, target, moved))
        left[row] = need
    if not extra:
        return a, b, n, cls, assigned
    return _added(a, b, n, cls, left, *(np.array(column, dtype=np.int64) for column in zip(*extra)))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_redirection_walks_as_the_cell_by_cell_scan(data):
    # Classes on a 4 x 3 grid of lengths (ties in weight included), cells of them with pairs and slots.
    size = data.draw(st.integers(1, 6))
    ca = np.array(data.draw(st.lists(st.integers(1, 4), min_size=size, max_size=size)))
    cb = np.array(data.draw(st.lists(st.integers(1, 3), min_size=size, max_size=size)))
    grouped = _lp_bound.Classes(ca, cb, np.zeros(size, np.int64), np.full((4, 3), -1))
    cells_ = data.draw(st.integers(1, 8))
    cls = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=cells_, max_size=cells_)))
    a = ca[cls] + np.array(data.draw(st.lists(st.integers(0, 1), min_size=cells_, max_size=cells_)))
    b = cb[cls] + np.array(data.draw(st.lists(st.integers(0, 1), min_size=cells_, max_size=cells_)))
    n = np.array(data.draw(st.lists(st.integers(1, 5), min_size=cells_, max_size=cells_)))
    assigned = np.minimum(n, np.array(data.draw(st.lists(st.integers(0, 5), min_size=cells_, max_size=cells_))))
    slots = np.bincount(cls, assigned, size).astype(np.int64) + np.array(
        data.draw(st.lists(st.integers(0, 4), min_size=size, max_size=size)))
    args = (a, b, n, cls, assigned, slots, grouped, (8, 6))
    got, want = _redirected(*args), _redirected_cell_by_cell(*args)
    assert [x.tolist() for x in got] == [x.tolist() for x in want]


def test_left_out_pairs_follow_the_lps_flows_where_the_nearest_class_would_strand_one():
    # Limits (8, 8). Classes X (4, 4), Y (4, 2), W (7, 2), Z (1, 4); X and W have an empty slot
    # each; a Y pair and a Z pair are left out. Y's least long dominating class is X, so
    # `_redirected` puts it there and strands Z (only X dominates it); the LP's flows say W -> Y,
    # X -> Z, and following them places both.
    grouped = _lp_bound.Classes(np.array([4, 4, 7, 1]), np.array([4, 2, 2, 4]), np.zeros(4, np.int64),
                                np.full((8, 8), -1))
    args = (np.array([4, 1]), np.array([2, 4]), np.array([1, 1]), np.array([1, 3]), np.array([0, 0]),
            np.array([1, 0, 1, 0]), grouped, (8, 8))
    _, _, n, cls, assigned = _redirected(*args)
    assert (n.tolist(), cls.tolist(), assigned.tolist()) == ([0, 1, 1], [1, 3, 0], [0, 0, 1])  # Z left out
    serving = _lp_bound._serving(grouped.a, grouped.b).toarray()
    flows = np.array([float(serving[2, j] < 0 and serving[1, j] > 0 or serving[0, j] < 0 and serving[3, j] > 0)
                      for j in range(serving.shape[1])])
    _, _, n, cls, assigned = _followed(*args, flows)
    assert (n.tolist(), cls.tolist(), assigned.tolist()) == ([0, 0, 1, 1], [1, 3, 2, 0], [0, 0, 1, 1])
