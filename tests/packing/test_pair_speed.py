"""Work the two-length planner spares: a plan counted on sorted tables, a grid plan not rounded where a plan beats it."""

from __future__ import annotations

import collections

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.pairs import _grid
from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._packs import strategies_of

from test_pair_grid import assert_valid
from test_pair_lp_bound import histogram


def reference(pack, a, b, max_target):
    """Identical packs counted pack by pack, in the order `strategies_of` documents: by depth,
    then by the last pair first where a pack's codes fit one integer (digits base the largest
    code + 1), else by the first pair first."""
    packs = collections.defaultdict(list)
    for p, x, y in zip(pack.tolist(), a.tolist(), b.tolist()):
        packs[p].append(((x - 1) * max_target + y, (x, y)))
    counted = collections.Counter(tuple(sorted(pairs, reverse=True)) for pairs in packs.values())
    width = max(code for pairs in packs.values() for code, _ in pairs)

    def order(packed):
        codes = [code for code, _ in packed]
        return len(codes), codes[::-1] if (width + 1) ** len(codes) < 2 ** 62 else codes

    ordered = sorted(counted, key=order)
    return [tuple(p for _, p in packed) for packed in ordered], [counted[packed] for packed in ordered]


def test_strategies_hand_checked():
    # Packs 0 and 2 hold (3, 2) and (1, 2); pack 1 holds (4, 1); pack 3 holds (3, 2) and (3, 1).
    pack, a, b = np.array([0, 0, 1, 2, 2, 3, 3]), np.array([1, 3, 4, 3, 1, 3, 3]), np.array([2, 2, 1, 2, 2, 1, 2])
    strategies, counts = strategies_of(pack, a, b, 8)
    assert strategies == [((4, 1),), ((3, 2), (1, 2)), ((3, 2), (3, 1))] and counts.tolist() == [1, 2, 1]


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from([(9, 5), (3000, 2000)]))
def test_strategies_count_every_pack_in_the_reference_order(data, limits):
    # Small limits: a pack's codes fit one integer (the last pair first); large ones: the first pair first.
    n = data.draw(st.integers(1, 40))
    pack = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)))
    pack = np.unique(pack, return_inverse=True)[1].reshape(-1)
    few = data.draw(st.booleans())  # few distinct lengths: many identical packs
    a = np.array(data.draw(st.lists(st.integers(1, 3 if few else limits[0]), min_size=n, max_size=n)))
    b = np.array(data.draw(st.lists(st.integers(1, 2 if few else limits[1]), min_size=n, max_size=n)))
    strategies, counts = strategies_of(pack, a, b, limits[1])
    assert (strategies, counts.tolist()) == reference(pack, a, b, limits[1])
    # Every pair once: the strategies' pairs, each times its count, are the pairs.
    seen = collections.Counter()
    for strategy, count in zip(strategies, counts.tolist()):
        assert list(strategy) == sorted(strategy, reverse=True)
        for p in strategy:
            seen[p] += count
    assert seen == collections.Counter(zip(a.tolist(), b.tolist()))


def test_the_grid_spares_rounding_a_plan_beaten_by_one_in_hand():
    # (6, 1) x2 and (2, 3) x2 at Le=8, Ld=4, K=2: the LP of rounded-up pairs converges at 2 packs.
    counts = histogram([(6, 1), (6, 1), (2, 3), (2, 3)], (8, 4))
    plain, bound = _grid.grid(counts, (8, 4, 2), None, units=4)
    assert plain.packs == 2 and bound == 2
    assert_valid(plain, counts, (8, 4, 2))
    one = Placed(np.zeros(1, np.int64), np.ones(1, np.int64), np.ones(1, np.int64), 1)  # only its packs count
    beaten, beaten_bound = _grid.grid(counts, (8, 4, 2), None, units=4, beat=one)
    assert beaten is None and beaten_bound == bound  # 2 > 1.002 x 1: not rounded; the bound kept
    two = Placed(np.zeros(1, np.int64), np.ones(1, np.int64), np.ones(1, np.int64), 2)
    kept, _ = _grid.grid(counts, (8, 4, 2), None, units=4, beat=two)
    assert kept is not None and kept.packs == 2  # 2 <= 1.002 x 2: rounded


def test_where_both_rows_bind_no_templates_are_tried(monkeypatch):
    # Balanced pairs at K=16: both rows' tokens need about as many packs; the fill and compounds only.
    # (The fill there is settled: `_settle`.)
    from test_pair_grid import balanced

    from tfpack.packing.pairs import algorithms, bounds
    counts = balanced(300, (32, 16))
    found = bounds.simple(counts, (32, 16, 16))
    assert algorithms._both_bind((found["input_tokens"], found["target_tokens"]))
    tried = []
    for name in ("fill", "swapped", "blend", "_ffd_if_small", "settled_fill", "compound", "compound_swapped"):
        original = getattr(algorithms, name)
        monkeypatch.setattr(algorithms, name, lambda *a, _name=name, _f=original, **k: tried.append(_name) or _f(*a, **k))
    placed, bound, _ = algorithms.optimal(counts, (32, 16, 16), seed=0, time_limit=None)
    assert tried[0] == "settled_fill" and not {"fill", "swapped", "blend", "_ffd_if_small"} & set(tried)
    assert_valid(placed, counts, (32, 16, 16))
    assert bound <= placed.packs
