"""The grid's pricing and bound past 4 pairs a pack (`tfpack.packing.pairs._grid`, K = 5-16).

`_grid.Tables` prices the best pack of at most ``K`` pairs by max-plus
doubling (``P_1, P_2, P_4, P_8`` and the best split of ``K`` between them); here
it is checked against a plain DP over the number of pairs, and the bound of
the rounded-down LP against the optimum by brute force
(`test_pair_lp_bound.optimum`), on grids where short pairs round down to no
units at all, so that only the places (``K``) limit how many a pack takes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tfpack.packing.pairs import _grid
from tfpack.packing.pairs._rounding import from_solution

from test_pair_grid import assert_valid
from test_pair_lp_bound import histogram, lp_value, optimum


def best_pack(values: np.ndarray, depth: int) -> float:
    """The most a pack of at most ``depth`` cells (repeats allowed) within the table's units is worth."""
    ge, gd = values.shape[0] - 1, values.shape[1] - 1
    best = np.zeros(values.shape)  # best[e, d]: at most k cells within (e, d) units
    for _ in range(depth):
        more = best.copy()
        for e, d in zip(*np.nonzero(values)):
            more[e:, d:] = np.maximum(more[e:, d:], best[:ge + 1 - e, :gd + 1 - d] + values[e, d])
        best = more
    return float(best[-1, -1])


def test_hand_checked_sixteen_places():
    # Units 4 x 4: a pair of no units worth 0.1 and a full pair (4, 4) worth 0.5. At 16 places: the
    # full pair and 15 of no units, 2.0 (16 of no units: 1.6); at 5 places: 0.5 + 0.4.
    values, ids = np.zeros((5, 5)), np.full((5, 5), -1)
    values[0, 0], ids[0, 0] = 0.1, 0
    values[4, 4], ids[4, 4] = 0.5, 1
    for depth, worth in ((16, 2.0), (5, 0.9), (12, 1.6), (9, 1.3)):
        tables = _grid.Tables(values, ids, depth)
        assert abs(tables.worth - worth) < 1e-9
        pack = tables.packs(1)[0]
        assert len(pack) == depth and pack.count(1) == 1


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 5), st.integers(5, 16), st.data())
@example(3, 2, 7, None)
def test_pricing_is_a_best_pack_past_four_pairs(ge, gd, depth, data):
    if data is None:  # hand-made: cheap cells of no or few units, where depth decides
        values = np.zeros((ge + 1, gd + 1))
        values[0, 0], values[1, 0], values[0, 1], values[3, 2] = 0.05, 0.12, 0.11, 0.3
    else:
        choices = [0.0, 0.0, 0.02, 0.05, 0.1, 0.25, 0.4, 0.7]
        values = np.array(data.draw(st.lists(st.sampled_from(choices), min_size=(ge + 1) * (gd + 1),
                                             max_size=(ge + 1) * (gd + 1)))).reshape(ge + 1, gd + 1)
    ids = np.arange(values.size).reshape(values.shape)
    tables = _grid.Tables(values, ids, depth)
    best = best_pack(values, depth)
    assert abs(tables.worth - best) < 1e-9
    for rank, members in enumerate(tables.packs(5)):  # every pack returned fits; the first is worth the best
        e, d = np.divmod(np.asarray(members, dtype=np.int64), gd + 1)
        assert len(members) <= depth and e.sum() <= ge and d.sum() <= gd
        assert rank > 0 or abs(values[e, d].sum() - best) < 1e-9


short = st.tuples(st.integers(1, 4), st.integers(1, 3))


@settings(max_examples=20, deadline=None)
@given(st.lists(short, min_size=5, max_size=9), st.integers(5, 9),
       st.tuples(st.integers(2, 5), st.integers(2, 4)))
@example([(1, 1)] * 7 + [(4, 2), (3, 3)], 7, (2, 2))
def test_bound_below_optimum_below_plan_past_four_pairs(pairs, depth, units):
    # Short pairs (up to 4 of 16 input tokens and 3 of 9 target tokens): many round down to no
    # units, and a pack holds more than 4.
    limits = (16, 9, depth)
    counts = histogram(pairs, limits[:2])
    best = optimum(counts, limits)
    down = _grid.solve(counts, limits, units, None, up=False)
    up = _grid.solve(counts, limits, units, None, up=True)
    assert down.converged and up.converged
    assert down.bound <= best and down.value <= lp_value(counts, limits) + 1e-6
    placed = from_solution(counts, limits, up.columns, up.x, up.grouped)
    assert_valid(placed, counts, limits)
    assert placed.packs >= best
