"""The planner's compiled kernels (tfpack/packing/_kernels.c) against plain references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import knapsack_reference
from tfpack.packing.algorithms import _budget, _knapsack


def same_pricing(lengths, bounds, values, max_length, depth, *, min_value, max_patterns,
                 exact=False):
    """`_knapsack.price` (compiled) equals the numpy reference bit for bit."""
    got = _knapsack.price(lengths, bounds, values, max_length, depth, min_value=min_value,
                          max_patterns=max_patterns, exact=exact)
    best, patterns, worth = knapsack_reference.price(
        lengths, bounds, values, max_length, depth, min_value=min_value,
        max_patterns=max_patterns, exact=exact)
    assert got.best_value == best
    assert [(r.tolist(), c.tolist()) for r, c in got.patterns] == \
        [(r.tolist(), c.tolist()) for r, c in patterns]
    assert got.pattern_values.tolist() == worth.tolist()
    return got


def test_pricing_by_hand():
    """The module example of `_knapsack`: best .95 by [5, 3]; anchors 3 -> [3, 3, 2], 2 -> [2, 2]."""
    lengths, bounds = np.array([2, 3, 5]), np.array([2, 2, 1])
    got = same_pricing(lengths, bounds, np.array([.2, .35, .6]), 8, 3, min_value=0.0,
                       max_patterns=3, exact=True)
    assert got.best_value == pytest.approx(.95)
    assert [(r.tolist(), c.tolist()) for r, c in got.patterns] == [
        ([1, 2], [1, 1]), ([0, 1], [1, 2]), ([0], [2])]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pricing_equals_the_reference(data):
    """Small and wide tables (the vector path runs on rows of 8 cells and more),
    float32 and float64, with and without a depth, values in plateaus or not."""
    max_length = data.draw(st.integers(1, 300), label="max_length")
    n = data.draw(st.integers(1, min(max_length, 24)), label="n")
    lengths = np.sort(np.array(data.draw(st.lists(st.integers(1, max_length), min_size=n,
                                                  max_size=n)), dtype=np.int64))
    bounds = np.array(data.draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)))
    plateaus = data.draw(st.booleans())
    raw = data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    values = np.sort(np.array(raw) / 8.0) if plateaus else \
        np.array(raw) / 8.0 * lengths / max_length + 1e-3 * np.arange(n)
    depth = data.draw(st.one_of(st.none(), st.integers(1, 12)), label="depth")
    same_pricing(lengths, bounds, values, max_length, depth,
                 min_value=data.draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0])),
                 max_patterns=data.draw(st.integers(0, 8)), exact=data.draw(st.booleans()))


def test_pricing_equals_the_reference_on_a_planner_sized_table():
    """A table of the size column generation prices (L=2,048, depth 16, hundreds of lengths)."""
    rng = np.random.default_rng(3)
    lengths = np.unique(rng.integers(1, 2049, 300))
    bounds = rng.integers(1, 17, len(lengths))
    values = np.sort(rng.random(len(lengths))) * lengths / 2048 + 0.02
    got = same_pricing(lengths, bounds, values, 2048, 16, min_value=1.0, max_patterns=64)
    assert len(got.patterns) > 10


def test_pricing_stops_when_the_budget_ends():
    """The kernel asks the budget every 32 lengths and gives up when it has ended."""
    asked = []

    class Ends(_budget.Budget):
        def expired(self):
            asked.append(1)
            return len(asked) >= 2

    lengths = np.arange(1, 101)
    with pytest.raises(_budget.OutOfTime):
        _knapsack.price(lengths, np.ones(100, dtype=np.int64), lengths / 100.0, 100, 4,
                        min_value=0.0, max_patterns=4, budget=Ends(None))
    assert len(asked) == 2  # after lengths 32 and 64


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_dominated_equals_the_reference(data):
    n = data.draw(st.integers(1, 30))
    lengths = np.sort(np.array(data.draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))))
    copies = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    values = np.sort(np.array(data.draw(st.lists(st.integers(0, 4), min_size=n,
                                                 max_size=n)))) / 4.0
    depth = data.draw(st.one_of(st.none(), st.integers(1, 8)))
    assert _knapsack._dominated(lengths, copies, values, 60, depth).tolist() == \
        knapsack_reference.dominated(lengths, copies, values, 60, depth).tolist()
