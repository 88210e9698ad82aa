"""The two-length LP bound (`tfpack.packing.pairs._lp_bound`): never above the optimum, the LP when it converges.

Optima of tiny instances by brute force (every partition of the pairs into
packs, a subset DP); the LP itself by enumerating every feasible pack and
solving with `scipy.optimize.linprog`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import scipy.optimize
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tfpack.packing import plan
from tfpack.packing.algorithms._budget import Budget
from tfpack.packing.pairs import _lp_bound
from tfpack.packing.pairs._packs import cells, pairs_of


def optimum(counts, limits) -> int:
    """Fewest packs, by a DP over subsets of the pairs (at most ~10 pairs)."""
    a, b = pairs_of(counts)
    n = a.size
    fits = np.zeros(1 << n, dtype=bool)
    for mask in range(1, 1 << n):
        members = [i for i in range(n) if mask >> i & 1]
        fits[mask] = (a[members].sum() <= limits[0] and b[members].sum() <= limits[1]
                      and (limits[2] is None or len(members) <= limits[2]))
    best = [0] + [n + 1] * ((1 << n) - 1)
    for mask in range(1, 1 << n):
        low = mask & -mask
        sub = mask
        while sub:
            if sub & low and fits[sub]:
                best[mask] = min(best[mask], best[mask ^ sub] + 1)
            sub = (sub - 1) & mask
    return best[-1]


def lp_value(counts, limits) -> float:
    """The LP relaxation over every feasible pack, by enumeration."""
    a, b, n = cells(counts)
    patterns = [p for p in itertools.product(*(range(int(k) + 1) for k in n))
                if any(p) and np.dot(p, a) <= limits[0] and np.dot(p, b) <= limits[1]
                and (limits[2] is None or sum(p) <= limits[2])]
    matrix = np.array(patterns, dtype=np.float64).T
    result = scipy.optimize.linprog(np.ones(len(patterns)), A_ub=-matrix, b_ub=-n.astype(np.float64),
                                    bounds=(0, None), method="highs")
    return float(result.fun)


def histogram(pairs, shape):
    counts = np.zeros(shape, dtype=np.int64)
    for a, b in pairs:
        counts[a - 1, b - 1] += 1
    return counts


def test_both_rows_binding_beats_every_one_length_bound():
    # (6, 1) and (1, 4) never share a pack of (8, 4): 6 packs, while tokens say 3 and 4.
    counts = histogram([(6, 1)] * 3 + [(1, 4)] * 3, (8, 4))
    result = _lp_bound.lp_bound(counts, (8, 4, None))
    assert (result.bound, result.converged) == (6, True)
    p = plan(counts, max_length=(8, 4), max_sequences_per_pack=None, algorithm="optimal", time_limit=None)
    # The conflict bound (a (1, 4) packs alone, no two (6, 1) share) proves it before the LP runs.
    assert (p.metrics["packs"], p.metrics["lower_bound_packs"], p.metrics["lower_bound_kind"]) == \
        (6, 6, "target_conflict")


def test_fractional_lp_rounds_up():
    # Three (3, 3) pairs, (6, 6) limits: two fit a pack; the LP is 1.5, the bound 2.
    counts = histogram([(3, 3)] * 3, (6, 6))
    result = _lp_bound.lp_bound(counts, (6, 6, None))
    assert result.bound == 2 and math.isclose(result.value, 1.5)


pairs = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 5)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(pairs=pairs, depth=st.sampled_from([None, 1, 2, 3]))
@example(pairs=[(1, 1), (6, 1)], depth=None)  # the 2-D tables' pack took (1, 1) twice: one exists
def test_converged_bound_is_the_lp_and_at_most_the_optimum(pairs, depth):
    counts = histogram(pairs, (6, 5))
    limits = (6, 5, depth)
    result = _lp_bound.lp_bound(counts, limits)
    assert result.converged
    assert math.isclose(result.value, lp_value(counts, limits), rel_tol=1e-6, abs_tol=1e-6)
    assert result.bound == math.ceil(lp_value(counts, limits) - 1e-6)
    assert result.bound <= optimum(counts, limits)


class Ticks:
    """A clock that moves one second a read: a budget of k seconds stops after about k reads."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


@settings(max_examples=60, deadline=None)
@given(pairs=pairs, depth=st.sampled_from([None, 2, 3]), reads=st.integers(0, 12),
       most=st.integers(1, 6))
def test_stopped_early_or_coarse_classes_the_bound_stays_proven(pairs, depth, reads, most):
    counts = histogram(pairs, (6, 5))
    limits = (6, 5, depth)
    result = _lp_bound.lp_bound(counts, limits, Budget(reads, clock=Ticks()), most=most)
    assert 0 <= result.bound <= optimum(counts, limits)
    assert result.classes <= most


@settings(max_examples=30, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 8)), min_size=1, max_size=10),
       depth=st.sampled_from([None, 2, 4]))
def test_planner_bound_at_most_its_packs_and_the_optimum(pairs, depth):
    counts = histogram(pairs, (12, 8))
    p = plan(counts, max_length=(12, 8), max_sequences_per_pack=depth, algorithm="optimal", time_limit=None)
    assert p.metrics["lower_bound_packs"] <= optimum(counts, (12, 8, depth)) <= p.metrics["packs"]


def test_classes_round_down_and_cover_every_cell():
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.3, size=(40, 30)).astype(np.int64)
    grouped = _lp_bound.classes(counts, most=25)
    a, b, n = cells(counts)
    c = grouped.index(a, b)
    assert grouped.n.size <= 25 and grouped.n.sum() == n.sum()
    assert np.all(grouped.a[c] <= a) and np.all(grouped.b[c] <= b)
    np.testing.assert_array_equal(np.bincount(c, n, grouped.n.size), grouped.n)


def test_plan_patterns_seed_the_lp():
    counts = histogram([(5, 1), (3, 3), (5, 1), (3, 3), (2, 2)], (8, 4))
    grouped = _lp_bound.classes(counts)
    a, b = pairs_of(counts)
    pack = np.array([0, 0, 1, 2, 2])  # a, b row-major: (2,2), (3,3), (3,3), (5,1), (5,1)
    columns = _lp_bound.patterns_of(grouped, pack, a, b)
    got = sorted((tuple(grouped.a[r].tolist()), tuple(c.tolist())) for r, c in columns)
    assert got == [((2, 3), (1, 1)), ((3,), (1,)), ((5,), (2,))]


def test_a_larger_instance_converges_to_a_bound_below_the_plan():
    rng = np.random.default_rng(1)
    counts = np.zeros((32, 16), dtype=np.int64)
    for a, b in zip(rng.integers(1, 20, 200), rng.integers(1, 10, 200)):
        counts[a - 1, b - 1] += 1
    p = plan(counts, max_length=(32, 16), max_sequences_per_pack=3, algorithm="optimal", time_limit=None)
    result = _lp_bound.lp_bound(counts, (32, 16, 3))
    assert result.converged and result.bound <= p.metrics["packs"]
    assert p.metrics["lower_bound_packs"] >= result.bound
