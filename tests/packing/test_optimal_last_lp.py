"""`optimal`'s last path, the LP over all lengths: not started too late on many lengths."""

import numpy as np
import pytest

from tfpack.packing.algorithms import _bounds, _budget, _lp_plan, _paths, optimal
from tfpack.packing.algorithms._tuning import Tuning


class _Started(Exception):
    pass


def _search_with(monkeypatch, lengths: int, seconds_left: float) -> bool:
    """Whether `_search` starts the LP over all lengths with ``seconds_left`` on the budget."""
    max_length = 2 * lengths
    histogram = np.zeros(max_length, dtype=np.int64)
    histogram[:lengths] = 3  # lengths 1..n, 3 of each: the tokens bind, depth 4 does not
    monkeypatch.setattr(_paths, "full_packs_first", lambda *a, **k: None)
    monkeypatch.setattr(_paths, "grouped", lambda *a, **k: None)
    monkeypatch.setattr(_paths, "quick", lambda *a, **k: None)

    def plan(*args, **kwargs):
        raise _Started

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search(_bounds.simple(histogram, max_length, 4))
    search.offer({(max_length,): 10 ** 9})  # far from the bound: the search goes on
    budget = _budget.Budget(seconds_left, clock=lambda: 0.0)  # the clock stands still
    nonzero = np.flatnonzero(histogram) + 1
    try:
        optimal._search(search, histogram, nonzero, histogram[nonzero - 1], max_length, 4, budget)
    except _Started:
        return True
    return False


@pytest.mark.parametrize("lengths, seconds_left, started", [
    (Tuning.LAST_LP_LENGTHS + 1, Tuning.LAST_LP_SECONDS / 2, False),
    (Tuning.LAST_LP_LENGTHS + 1, Tuning.LAST_LP_SECONDS * 2, True),
    (Tuning.LAST_LP_LENGTHS, Tuning.LAST_LP_SECONDS / 2, True),
])
def test_the_lp_over_many_lengths_is_not_started_with_little_time_left(
        monkeypatch, lengths, seconds_left, started):
    assert _search_with(monkeypatch, lengths, seconds_left) is started


def test_the_last_grouped_lps_packs_seed_the_lp_over_all_lengths(monkeypatch):
    # The packs kept in `Search.columns` (a grouped LP's, in tokens) are shrunk to the lengths
    # present and grown into their room (`_paths.finer_packs`): (9, 5) over lengths 5 and 8 in
    # packs of 20 becomes (8, 5), which grows to (8, 8) (16 tokens; a third 8 would not fit).
    histogram = np.zeros(20, dtype=np.int64)
    histogram[[4, 7]] = [6, 6]  # six 5s and six 8s
    seen = {}

    def plan(*args, seeds=(), **kwargs):
        seen["seeds"] = list(seeds)
        return {(8, 8): 3, (5, 5, 5): 2}, 5

    monkeypatch.setattr(_lp_plan, "plan", plan)
    search = _paths.Search(_bounds.simple(histogram, 20, 3))
    search.columns = [(9, 5)]
    lengths = np.array([5, 8])
    optimal._search(search, histogram, lengths, histogram[lengths - 1], 20, 3, _budget.Budget(None))
    assert seen["seeds"] == _paths.finer_packs([(9, 5)], lengths, fill=20) == [(8, 8)]
    assert search.packs == 5 and search.bounds["lp"] == 5
