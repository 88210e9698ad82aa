"""The class fill (`_class_fill`): packs that follow an LP over size classes.

Where the spread fill runs (`optimal._spread_pays`), its last packs run out of
mid-size sequences; the cutting-stock LP over a few size classes says how many
of each class a pack should take, and the fill follows it.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.algorithms import _budget, _class_fill, _spread_fill


def test_edges_cut_the_tokens_into_about_equal_classes():
    # Lengths 2 x 4, 3 x 2, 4 x 2, 5 x 2, 6 x 2: tokens 8, 6, 8, 10, 12 (44). Three classes cut
    # where the tokens pass 44 / 3 and 88 / 3: after 4 (22 up to it) and after 5 (32).
    counts = np.zeros(11, dtype=np.int64)
    counts[[2, 3, 4, 5, 6]] = [4, 2, 2, 2, 2]
    assert _class_fill.edges(counts, 10, 3).tolist() == [2, 5, 6, 10]
    assert _class_fill.edges(counts, 10, 1).tolist() == [2, 10]


def test_realised_slots_take_the_longest_of_their_class_that_leaves_the_later_means():
    # Two packs of 9 tokens, each a slot of class 1 ([4, 10), mean 6) then one of class 0
    # ([1, 4), mean 2). Slot one: target 9 - 2 = 7 for both, the longest at most 7 (6 and 5;
    # the 8 would leave less than the later slot's mean). Slot two is each pack's last: any
    # class, at most the free space (3 and 4): the 1 and the 3. The 8 is left.
    counts = np.zeros(10, dtype=np.int64)
    counts[[8, 6, 5, 3, 1]] = 1
    slot = np.array([[1, 0], [1, 0]])
    packs = _class_fill._realised(counts, slot, np.array([2, 6]), np.array([1, 4]),
                                  np.array([4, 10]), 9, 2)
    assert sorted(map(sorted, packs.tolist())) == [[1, 6], [3, 5]]
    assert np.flatnonzero(counts).tolist() == [8]


def realised_a_class_at_a_time(counts, slot, means, low, high, max_length, depth):
    """`_class_fill._realised` as first written: each slot's packs a class at a time, each
    class from a pool of its own lengths."""
    packs = np.zeros(slot.shape, dtype=np.int64)
    expected = np.where(slot >= 0, means[np.maximum(slot, 0)], 0)
    later = np.cumsum(expected[:, ::-1], axis=1)[:, ::-1] - expected
    free = np.full(len(slot), max_length, dtype=np.int64)
    last = np.count_nonzero(slot >= 0, axis=1) - 1
    for j in range(depth):
        layer = np.where(last == j, len(low), slot[:, j])
        for k in np.unique(layer[layer >= 0]):
            at = np.flatnonzero(layer == k)
            lo, hi = (low[k], high[k]) if k < len(low) else (0, len(counts))
            target = np.clip(free[at] - later[at, j], 0, hi - 1)
            order = np.argsort(target, kind="stable")
            pool = np.zeros_like(counts)
            pool[lo:hi] = counts[lo:hi]
            taken = _spread_fill._longest_at_most(pool, target[order])
            counts[lo:hi] = pool[lo:hi]
            packs[at[order], j] = taken
            free[at[order]] -= taken
    return packs


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(2, 60), st.integers(1, 5))
def test_realised_takes_what_a_class_at_a_time_takes(data, max_length, depth):
    # All classes of a slot at once (their blocks apart by walls) take the sequences that the
    # class at a time took, tie for tie, and leave the same ones.
    counts = np.array([0] + data.draw(st.lists(st.integers(0, 4), min_size=max_length,
                                               max_size=max_length)), dtype=np.int64)
    counts[max_length] = 0
    present = np.flatnonzero(counts)
    if not len(present):
        return
    inner = data.draw(st.lists(st.integers(present[0] + 1, max_length), max_size=4))
    cut = np.unique(np.array([present[0], *inner, max_length], dtype=np.int64))
    low, high = cut[:-1], cut[1:]
    means = np.maximum(low, (low + high) // 2)
    slot = np.array(data.draw(st.lists(st.lists(st.integers(-1, len(low) - 1), min_size=depth,
                                                max_size=depth), min_size=1, max_size=30)))
    slot = -np.sort(-slot, axis=1)
    mine, theirs = counts.copy(), counts.copy()
    got = _class_fill._realised(mine, slot, means, low, high, max_length, depth)
    want = realised_a_class_at_a_time(theirs, slot, means, low, high, max_length, depth)
    assert got.tolist() == want.tolist() and mine.tolist() == theirs.tolist()


def check_rows(counts, max_length, depth, found):
    assert found.shape[1] == depth
    assert (found.sum(axis=1) <= max_length).all() and (found.sum(axis=1) > 0).all()
    placed = np.bincount(found.ravel(), minlength=max_length + 1)
    assert placed[1:].tolist() == counts[1:].tolist()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=2, max_size=40), st.integers(1, 6),
       st.integers(1, 8), st.integers(1, 8))
def test_every_sequence_in_exactly_one_pack_that_fits(histogram, depth, classes, most):
    counts = np.array([0] + histogram, dtype=np.int64)
    max_length = len(histogram)
    counts[max_length] = 0  # windows of L are packs of their own
    if not counts.any():
        counts[1] = 1
    unit = max(d for d in range(1, most + 1) if max_length % d == 0)  # the LP in units
    found = _class_fill.rows(counts, max_length, depth, classes, 3, None, unit)
    check_rows(counts, max_length, depth, found)


def test_a_budget_that_ends_first_gives_no_rows():
    counts = np.zeros(11, dtype=np.int64)
    counts[[2, 3, 4, 5, 6]] = [4, 2, 2, 2, 2]
    assert _class_fill.rows(counts, 10, 3, 3, 4, _budget.Budget(0.0)) is None
