"""Finer grouped plans started from the last plan's packs where the bound is proven first (issue 35).

Where `_paths.prove_down` runs (stretched long contexts), `_paths.refine`'s plans on
finer groups start from the packs of the last grouped plan's LP (`plan_up` with
``warm``), shrunk to the finer lengths (`_paths.finer_packs`): on the long-context
suite's L=16,384 depth 4 case, units of 8 took 11 rounds instead of 47 (0.23 s of CPU
instead of 0.54 s), so a finer plan fits in the budget beside the bound.
"""

import pytest

import numpy as np
from hypothesis import given, settings

from test_groups import groups_everywhere
from test_optimal import assert_valid, brute_force_packs, make_histogram
from test_optimal_long_context import narrow_instances
from tfpack.packing.algorithms import _column_generation, _lp_plan, _paths, optimal
from tfpack.packing.algorithms._tuning import Tuning


def test_a_warm_plan_starts_from_the_last_packs_shrunk_to_its_lengths(monkeypatch):
    """Hand-checked, in units of 8 tokens on lengths 8 and 16 (units 1 and 2): the last packs
    (24, 16) and (8,) in tokens become (16, 16) and (8,): units (2, 2) and (1,). The LP's own
    packs, (2, 1) in units, are kept in tokens for the next: (16, 8)."""
    calls = []

    def plan(lengths, demand, length, depth, simple, **options):
        calls.append(options)
        if "used" in options:
            options["used"].append((2, 1))
        return {(2, 1): 1}, 1

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search({"tokens": 1})
    search.columns = [(24, 16), (8,)]
    histogram = make_histogram(16, {16: 1, 8: 1})
    starts = np.arange(1, 17, 8)
    args = (histogram, np.array([1, 2]), np.array([1, 1]), 2, None, 1, starts, 8)
    _paths.plan_up(search, *args, _paths._budget.Budget(None), warm=True)
    assert calls[-1]["seeds"] == [(2, 2), (1,)]
    assert search.columns == [(16, 8)]
    assert search.plan == {(16, 8): 1}
    _paths.plan_up(search, *args, _paths._budget.Budget(None))  # not warm: as before
    assert "seeds" not in calls[-1] and "used" not in calls[-1]
    assert search.columns == [(16, 8)]


def test_a_plan_reports_the_packs_of_its_lp_and_takes_more_seeds(monkeypatch):
    """``used`` gets the packs of the LP's solution (each fits); ``seeds`` reach its first LP."""
    lengths, demand = np.array([3, 4, 5, 7]), np.array([7, 5, 4, 3])
    used = []
    packs, bound = _lp_plan.plan(lengths, demand, 12, 3, 6, used=used)
    assert used and all(sum(pack) <= 12 and len(pack) <= 3 for pack in used)
    assert all(set(pack) <= set(lengths.tolist()) for pack in used)
    seen = []
    run = _column_generation.run
    monkeypatch.setattr(_column_generation, "run",
                        lambda *a, **k: (seen.append(list(a[4])), run(*a, **k))[1])
    again, bound_again = _lp_plan.plan(lengths, demand, 12, 3, 6, seeds=used)
    assert all(pack in seen[0] for pack in used)
    assert bound_again == bound and sum(again.values()) == sum(packs.values())


@settings(max_examples=40, deadline=None)
@given(narrow_instances())
def test_warm_finer_plans_are_valid_and_the_bound_holds(instance):
    """Groups on every histogram, the bound proven first (`PROVE_ABOVE` 0), so `refine`
    plans warm: every plan is valid, and bound <= optimum <= plan."""
    histogram, max_length, depth = instance
    warm = []
    plan_up = _paths.plan_up
    with pytest.MonkeyPatch.context() as patch:
        groups_everywhere(patch)
        patch.setattr(Tuning, "PROVE_ABOVE", 0.0)
        patch.setattr(_paths, "plan_up", lambda *a, **k: (warm.append(k.get("warm")),
                                                         plan_up(*a, **k))[1])
        result = optimal.pack(histogram, max_length, depth, seed=0, time_limit=None)
    assert_valid(result, histogram, max_length, depth)
    best = brute_force_packs(histogram, max_length, depth)
    assert result.lower_bound_packs <= best <= result.counts.sum()
    assert all(warm)  # every grouped plan there is warm
