"""Where the depth binds, `optimal` proves bounds in finer units with the time its plan leaves.

The grouped plan there converges in a round or two; the bound on lengths rounded
down to units of tokens (`_units.in_units`) drops the sequences shorter than a unit,
each a pack's slot where the depth binds. `_units.finer_units` takes the finest unit whose
LP fits in the time left (issue 35, item 5: `planners_long_context.py --seed 3`, case 10,
0.49% -> 0.11%). Checked by hand, and against the brute-force optimum.
"""

import pytest
from hypothesis import given, settings

from test_optimal import brute_force_packs, make_histogram
from test_optimal_long_context import narrow_instances
from tfpack.packing.algorithms import _budget, _column_generation, _paths, _units


def finer_bounds(histogram, max_length, depth, unit, monkeypatch, limit=60.0):
    """The units `finer_units` tried and the bound it proved (plan far above the bound)."""
    units = []
    run = _column_generation.run
    monkeypatch.setattr(_column_generation, "run", lambda lengths, demand, length, *a, **k: (
        units.append(max_length // length), run(lengths, demand, length, *a, **k))[1])
    search = _paths.Search({"tokens": 1})
    search.packs = 100
    _units.finer_units(search, histogram, max_length, depth, unit, _budget.Budget(limit))
    return units, search.bounds.get("lp", 0)


def test_six_threes_are_dropped_in_units_of_4_and_counted_in_units_of_2(monkeypatch):
    """Six 3s in packs of 16, at most 2 a pack: 3 packs. Rounded down to units of 8 or 4
    (group starts 1, 9 / 1, 5, ...), each is shorter than a unit and dropped: nothing
    proven. From units of 8, with time for any, `finer_units` takes the finest, 2 (3 = 2 + 1:
    one unit each, six sequences two a pack: 3), then stops (a unit of 1 is the LP over all
    lengths)."""
    histogram = make_histogram(16, {3: 6})
    units, bound = finer_bounds(histogram, 16, 2, 8, monkeypatch)
    assert units == [2] and bound == 3  # units of 4 leave no sequence: no LP
    assert brute_force_packs(histogram, 16, 2) == 3


def test_no_finer_units_without_a_time_limit_or_once_the_plan_is_proven(monkeypatch):
    histogram = make_histogram(16, {3: 6})
    search = _paths.Search({"tokens": 1})
    search.packs = 100
    _units.finer_units(search, histogram, 16, 2, 8, _budget.Budget(None))
    assert "lp" not in search.bounds  # the LP over all lengths proves it then
    search = _paths.Search({"tokens": 1, "sequences": 3})
    search.packs = 3
    units = []
    monkeypatch.setattr(_column_generation, "run", lambda *a, **k: units.append(a))
    _units.finer_units(search, histogram, 16, 2, 8, _budget.Budget(60.0))
    assert units == []


def test_grouped_proves_in_finer_units_where_the_depth_binds(monkeypatch):
    """`grouped` calls it where the depth binds among many lengths (not where the tokens do)."""
    calls = []
    monkeypatch.setattr(_units, "finer_units", lambda *a, **k: calls.append(a[4]))
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


def test_the_finest_unit_whose_lp_fits_in_the_time_left():
    """An LP in units of ``d`` takes ``unit / d`` times the last one's time (in ``unit``),
    times `Tuning.FINER_GROWTH` (1.2): from 12 at L=12,288 after 0.1 s, units of 3 need
    0.48 s, 4 0.36 s, 6 0.24 s, 8 0.18 s."""
    assert _units.finer_unit(12288, 12, 0.1, 0.5) == 3
    assert _units.finer_unit(12288, 12, 0.1, 0.4) == 4
    assert _units.finer_unit(12288, 12, 0.1, 0.3) == 6
    assert _units.finer_unit(12288, 12, 0.1, 0.2) == 8
    assert _units.finer_unit(12288, 12, 0.1, 0.15) == 1  # none fits
    assert _units.finer_unit(16384, 2, 0.0, 1.0) == 1  # none finer but 1
    assert _units.finer_unit(24, 12, 16.0, 60.0) == 4  # 4: 57.6 s; 3 needs 76.8 s


def test_finer_units_goes_straight_to_the_finest_that_fits(monkeypatch):
    """Six 5s in packs of 24, two a pack (3 packs). From units of 12, after an LP of 16 s,
    60 s fit units of 4 (57.6 s) but not 3 (76.8 s): 4 first, then (its LP fast) 2; halving
    tried 6 then 3."""
    histogram = make_histogram(24, {5: 6})
    units = []
    run = _column_generation.run
    monkeypatch.setattr(_column_generation, "run", lambda lengths, demand, length, *a, **k: (
        units.append(24 // length), run(lengths, demand, length, *a, **k))[1])
    search = _paths.Search({"tokens": 1})
    search.packs = 100
    _units.finer_units(search, histogram, 24, 2, 12, _budget.Budget(60.0), took=16.0)
    assert units == [4, 2] and search.bounds["lp"] == 3 == brute_force_packs(histogram, 24, 2)
