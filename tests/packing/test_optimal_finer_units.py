"""Where the depth binds, `optimal` proves bounds in finer units with the time its plan leaves.

The grouped plan there converges in a round or two; the bound on lengths rounded
down to units of tokens (`_paths.in_units`) drops the sequences shorter than a unit,
each a pack's slot where the depth binds. `_paths.finer_units` halves the unit while
time lasts (issue 35, item 5: `planners_long_context.py --seed 3`, case 10, 0.49% ->
0.27%). Checked by hand, and against the brute-force optimum.
"""

import numpy as np
import pytest
from hypothesis import given, settings

from test_optimal import brute_force_packs, make_histogram
from test_optimal_long_context import narrow_instances
from tfpack.packing.algorithms import _budget, _column_generation, _paths, optimal


def finer_bounds(histogram, max_length, depth, unit, monkeypatch, limit=60.0):
    """The units `finer_units` tried and the bound it proved (plan far above the bound)."""
    units = []
    run = _column_generation.run
    monkeypatch.setattr(_column_generation, "run", lambda lengths, demand, length, *a, **k: (
        units.append(max_length // length), run(lengths, demand, length, *a, **k))[1])
    search = _paths.Search({"tokens": 1})
    search.packs = 100
    _paths.finer_units(search, histogram, max_length, depth, unit, _budget.Budget(limit))
    return units, search.bounds.get("lp", 0)


def test_six_threes_are_dropped_in_units_of_4_and_counted_in_units_of_2(monkeypatch):
    """Six 3s in packs of 16, at most 2 a pack: 3 packs. Rounded down to units of 8 or 4
    (group starts 1, 9 / 1, 5, ...), each is shorter than a unit and dropped: nothing
    proven. From units of 8, `finer_units` tries 4 (nothing), then 2 (3 = 2 + 1: one unit
    each, six sequences two a pack: 3), then stops (a unit of 1 is the LP over all
    lengths)."""
    histogram = make_histogram(16, {3: 6})
    units, bound = finer_bounds(histogram, 16, 2, 8, monkeypatch)
    assert units == [2] and bound == 3  # units of 4 leave no sequence: no LP
    assert brute_force_packs(histogram, 16, 2) == 3


def test_no_finer_units_without_a_time_limit_or_once_the_plan_is_proven(monkeypatch):
    histogram = make_histogram(16, {3: 6})
    search = _paths.Search({"tokens": 1})
    search.packs = 100
    _paths.finer_units(search, histogram, 16, 2, 8, _budget.Budget(None))
    assert "lp" not in search.bounds  # the LP over all lengths proves it then
    search = _paths.Search({"tokens": 1, "sequences": 3})
    search.packs = 3
    units = []
    monkeypatch.setattr(_column_generation, "run", lambda *a, **k: units.append(a))
    _paths.finer_units(search, histogram, 16, 2, 8, _budget.Budget(60.0))
    assert units == []


def test_grouped_proves_in_finer_units_where_the_depth_binds(monkeypatch):
    """`grouped` calls it where the depth binds among many lengths (not where the tokens do)."""
    calls = []
    monkeypatch.setattr(_paths, "finer_units", lambda *a, **k: calls.append(a[4]))
    monkeypatch.setattr(_paths.Tuning, "MANY_LENGTHS", 2)
    monkeypatch.setattr(_paths.Tuning, "UNITS_FROM", 16)
    monkeypatch.setattr(_paths.Tuning, "UNIT_ROWS", 4)
    depth_binds = make_histogram(16, {3: 60, 5: 10, 14: 1})
    search = _paths.Search({"tokens": 18, "sequences": 36})
    search.packs = 40
    _paths.grouped(search, depth_binds, 16, 2, _budget.Budget(60.0))
    assert calls == [4]
    tokens_bind = make_histogram(16, {13: 10, 14: 10})
    search = _paths.Search({"tokens": 17, "sequences": 5})
    search.packs = 40
    monkeypatch.setattr(_paths, "refine", lambda *a, **k: None)
    _paths.grouped(search, tokens_bind, 16, 4, _budget.Budget(60.0))
    assert calls == [4]


@settings(max_examples=60, deadline=None)
@given(narrow_instances())
def test_finer_unit_bounds_never_exceed_the_optimum(instance):
    histogram, max_length, depth = instance
    with pytest.MonkeyPatch.context() as patch:
        _, bound = finer_bounds(histogram, max_length, depth, max_length, patch)
    assert bound <= brute_force_packs(histogram, max_length, depth)
