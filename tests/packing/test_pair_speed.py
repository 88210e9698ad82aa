"""Work the two-length planner spares: a plan counted on sorted tables, a grid plan not rounded where a plan beats it."""

from __future__ import annotations

import collections
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.pairs import _grid
from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._packs import pairs_of, strategies_of

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


def assign_in_numpy(counts, slot_pack, slot_length):
    """`_templates._assign` as it was in numpy (23cab29): lengths and ranks in a Python loop."""
    order = np.lexsort((slot_pack, slot_length))
    sorted_pack, sorted_length = slot_pack[order], slot_length[order]
    start = np.ones(order.size, dtype=bool)
    start[1:] = (sorted_length[1:] != sorted_length[:-1]) | (sorted_pack[1:] != sorted_pack[:-1])
    rank = np.arange(order.size) - np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    bounds = np.searchsorted(sorted_length, np.arange(1, counts.shape[0] + 2))
    load = np.zeros(int(slot_pack.max()) + 1, dtype=np.int64)
    widths = np.arange(1, counts.shape[1] + 1)
    mean = (counts @ widths) / np.maximum(counts.sum(axis=1), 1)
    out_pack, out_a, out_b = [], [], []
    for length in np.argsort(-mean, kind="stable").tolist():
        row = counts[length]
        if not row.any():
            continue
        targets = np.repeat(widths[::-1], row[::-1])
        lo, hi = bounds[length], bounds[length + 1]
        packs, ranks = sorted_pack[lo:hi], rank[lo:hi]
        done = 0
        for r in range(int(ranks.max()) + 1 if hi > lo else 0):
            if done == targets.size:
                break
            these = packs[ranks == r]
            these = these[np.argsort(load[these], kind="stable")][:targets.size - done]
            chunk = targets[done:done + these.size]
            load[these] += chunk
            out_pack.append(these)
            out_b.append(chunk)
            out_a.append(np.full(these.size, length + 1, dtype=np.int64))
            done += these.size
    return np.concatenate(out_pack), np.concatenate(out_a), np.concatenate(out_b)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.sampled_from([(6, 4, 3), (12, 5, 4), (40, 9, None), (8, 1000, 3)]))
def test_pairs_go_into_slots_as_the_numpy_loop_put_them(data, limits):
    # Templates: a one-length plan of the inputs; the pairs then into its slots, pair for pair as before
    # (Ld=1000: loads too spread for the counting sort, sorted as keys).
    from tfpack.packing import plan
    from tfpack.packing.pairs._templates import _assign, _slots
    cells = data.draw(st.lists(st.tuples(st.integers(1, limits[0]), st.integers(1, limits[1])), min_size=1,
                               max_size=60))
    counts = np.zeros(limits[:2], dtype=np.int64)
    for a, b in cells:
        counts[a - 1, b - 1] += 1
    algorithm = data.draw(st.sampled_from(["ffd", "optimal"]))
    templates = plan(counts.sum(axis=1), limits[0], limits[2], algorithm, time_limit=None)
    slot_pack, slot_length = _slots(templates.strategies, templates.counts)
    got, want = _assign(counts, slot_pack, slot_length), assign_in_numpy(counts, slot_pack, slot_length)
    assert [x.tolist() for x in got] == [x.tolist() for x in want]


@pytest.mark.parametrize("burn, next_starts", [(0.4, True), (0.8, False)])
def test_a_candidate_starts_only_where_the_time_left_covers_the_last_ones_overhead(monkeypatch, burn, next_starts):
    # Balanced pairs at K=16: the settled fill (share 0.3 of 1 s) first, then compounds. The fill here
    # burns `burn` CPU seconds and gives one pack a pair: past its share by 0.1 s with 0.6 s left,
    # compounds start; past it by 0.5 s with 0.2 s left, they do not.
    from test_pair_grid import balanced

    from tfpack.packing.pairs import algorithms
    counts = balanced(300, (32, 16))
    tried = []

    def slow_and_poor(counts, limits, time_limit=None, beat=None):
        tried.append("settled_fill")
        start = time.process_time()
        while time.process_time() - start < burn:
            pass
        a, b = pairs_of(counts)
        return Placed(np.arange(a.size), a, b, a.size), None

    monkeypatch.setattr(algorithms, "settled_fill", slow_and_poor)
    monkeypatch.setattr(algorithms, "_SETTLE_PAIRS", 0)  # the best plan kept as the candidates left it
    monkeypatch.setattr(algorithms, "_SETTLE_ABOVE", float("inf"))  # (no settling pass at all)
    monkeypatch.setattr(algorithms, "subset_fill", lambda *args, **kwargs: None)
    for name in ("compound", "compound_swapped"):
        original = getattr(algorithms, name)
        monkeypatch.setattr(algorithms, name, lambda *a, _name=name, _f=original, **k: tried.append(_name) or _f(*a, **k))
    placed, _, _ = algorithms.optimal(counts, (32, 16, 16), seed=0, time_limit=1.0)
    assert tried[0] == "settled_fill" and (len(tried) > 1) == next_starts
    assert placed.packs < counts.sum() if next_starts else placed.packs == counts.sum()


def fitting_in_rounds(pack, b, max_target, packs):
    """`_templates._fitting` as it was in numpy (23cab29): rounds over all pairs, one pair a pack each."""
    keep = np.ones(pack.size, dtype=bool)
    while True:
        load = np.bincount(pack[keep], b[keep], packs).astype(np.int64)
        excess = load - max_target
        if not np.any(excess > 0):
            return keep
        rows = np.flatnonzero(keep & (excess[pack] > 0))
        rows = rows[np.lexsort((b[rows], pack[rows]))]
        key = pack[rows] * (max_target + 1) + b[rows]
        owners = np.unique(pack[rows])
        at = np.searchsorted(key, owners * (max_target + 1) + excess[owners])
        last = np.searchsorted(pack[rows], owners, side="right") - 1
        inside = (at < rows.size)
        inside[inside] = pack[rows[at[inside]]] == owners[inside]
        keep[rows[np.where(inside, at, last)]] = False


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 6)), min_size=1, max_size=40), st.integers(6, 12))
def test_overflowing_packs_give_back_what_the_numpy_rounds_gave_back(rows, max_target):
    from tfpack.packing.pairs._templates import _fitting
    pack, b = (np.array(column, dtype=np.int64) for column in zip(*rows))
    assert _fitting(pack, b, max_target, 6).tolist() == fitting_in_rounds(pack, b, max_target, 6).tolist()
