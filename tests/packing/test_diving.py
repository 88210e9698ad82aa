"""Diving on the master LP: plans that cover the demand, and the master left as found."""

import math

import numpy as np
import pytest
import scipy.sparse

from tfpack.packing.algorithms import _best_fit, _column_generation, _diving, _lp, _rounding, optimal
from tfpack.packing.algorithms._tuning import Tuning
from tfpack.packing.checks import slot_counts


def incremental_master(demand, fixed=None):
    master = _lp.Master(np.asarray(demand, dtype=np.float64), fixed)
    if not master.incremental:
        pytest.skip("no HiGHS object in this SciPy")
    return master


def test_a_dive_rounds_up_the_most_fractional_pack_when_none_reaches_up_from():
    # Demand 3 and 2: pairs of row 0, singles of row 1, one of each. LP: half a pair + 2 mixed.
    master = incremental_master([3.0, 2.0])
    master.add([(np.array([0]), np.array([2])), (np.array([1]), np.array([1])),
                (np.array([0, 1]), np.array([1, 1]))])
    value, x, _ = master.solve()
    np.testing.assert_allclose(x, [0.5, 0.0, 2.0])
    # 0.5 < 0.6: the two mixed packs, then one pair (the most fractional): 3 packs.
    whole = _diving.dive(master, x, value, at_most=4, up_from=0.6)
    assert whole.tolist() == [1, 0, 2]
    # 0 packs fixed + ceil(2.5) reach at_most=3: the dive gives up at once.
    assert _diving.dive(master, x, value, at_most=3, up_from=0.6) is None


def test_a_surplus_of_longer_slots_serves_shorter_sequences():
    # Row 1 (longer) may serve row 0 through a zero-cost column; packs hold two of row 1
    # or one of row 0. Demand 3 and 1: two packs of two longer slots, nothing rounded up.
    shift = scipy.sparse.csc_array(np.array([[1.0], [-1.0]]))
    master = incremental_master([3.0, 1.0], shift)
    master.add([(np.array([1]), np.array([2])), (np.array([0]), np.array([1]))])
    value, x, _ = master.solve()
    assert value == pytest.approx(2.0)
    assert _diving.dive(master, x, value, at_most=3, up_from=0.9).tolist() == [2, 0]


@pytest.mark.parametrize("up_from", [0.6, 0.9])
def test_dives_cover_the_demand_and_leave_the_master_as_found(up_from):
    rng = np.random.default_rng(5)
    lengths = np.unique(rng.integers(20, 900, 120))
    demand = rng.integers(1, 30, len(lengths))
    counts = dict(zip(lengths.tolist(), demand.tolist()))
    heuristic = _best_fit.fill(counts, {}, 1024, 8)
    lp = _column_generation.run(lengths, demand, 1024, 8, heuristic, 0)
    assert lp.master.incremental
    whole = _diving.dive(lp.master, lp.x, lp.value, at_most=10**9, up_from=up_from)
    assert whole.dtype == np.int64 and whole.min() >= 0
    assert whole.sum() >= lp.lower_bound
    supply = np.zeros(len(lengths), dtype=np.int64)
    for (rows, copies), number in zip(lp.patterns, whole):
        supply[rows] += copies * number
    # Longest first, every length finds a slot at least as long.
    assert np.all(np.cumsum((supply - demand)[::-1]) >= 0)
    plan = _rounding.settle(lp.patterns, whole, lengths, demand, 1024, 8)
    assert sum(plan.values()) <= whole.sum()
    value, x, _ = lp.master.solve()  # as found: same demand, same optimum
    np.testing.assert_array_equal(lp.master.demand, demand)
    assert value == pytest.approx(lp.value)
    assert _diving.dive(lp.master, x, value, at_most=math.ceil(value - 1e-9),
                        up_from=up_from) is None


def test_a_dive_meets_the_bound_where_rounding_does_not(monkeypatch):
    # 1,024 tokens, 32 a pack, ~300 lengths with heavy-tailed counts: one plan of many drawn,
    # with the first LP solved by simplex (by interior point, rounding alone meets the bound).
    monkeypatch.setattr(_lp, "_IPM_ROWS", 2048)
    rng = np.random.default_rng(1053)
    assert (int(rng.choice([512, 1024, 2048, 4096])), int(rng.choice([4, 8, 16, 32]))) == (1024, 32)
    lengths = rng.choice(np.arange(1, 1025), size=int(rng.integers(50, 500)), replace=False)
    histogram = np.zeros(1024, dtype=np.int64)
    histogram[lengths - 1] = np.maximum(1, (rng.pareto(1.5, len(lengths)) * 5).astype(np.int64))
    result = optimal.pack(histogram, 1024, 32, seed=0)
    assert result.counts.sum() == result.lower_bound_packs == 2020
    assert np.all(slot_counts(result.strategies, result.counts, 1024) >= histogram)
    monkeypatch.setattr(Tuning, "DIVE_UP_FROM", ())
    assert optimal.pack(histogram, 1024, 32, seed=0).counts.sum() == 2021
