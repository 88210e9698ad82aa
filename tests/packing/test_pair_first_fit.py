"""Packs grouped by their room (`tfpack.packing.pairs._first_fit`): the groups and the renumbering of `refit`."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.pairs._first_fit import Groups, Placed, floor, refit


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=20),
       st.sampled_from([2, 3, 8]))
def test_packs_group_by_room_as_records_do(pairs, depth):
    # Groups of equal (input, target, places) room, in the order `np.unique` sorts rooms as records.
    pack, a, b = (np.array(column, dtype=np.int64) for column in zip(*pairs))
    keep = np.bincount(pack, minlength=6) <= depth
    pack, a, b = pack[keep[pack]], a[keep[pack]], b[keep[pack]]
    limits = (4 * depth, 3 * depth, depth)  # every pack fits: rooms are never negative
    groups = Groups.of_packs(limits, pack, a, b, 6)
    room = np.stack([limits[0] - np.bincount(pack, a, 6), limits[1] - np.bincount(pack, b, 6),
                     depth - np.bincount(pack, minlength=6)]).astype(np.int64)
    keys, inverse = np.unique(room, axis=1, return_inverse=True)
    assert groups.room[:, :groups.size].tolist() == keys.tolist()
    assert [m.tolist() for m in groups.members] == [np.flatnonzero(inverse.reshape(-1) == g).tolist()
                                                    for g in range(keys.shape[1])]


def test_refit_numbers_the_packs_that_hold_pairs_in_order():
    # Packs 0, 2, 5 of 6 hold pairs (Le=8, 2 a pack); the pair left out, (7, 1), fits in none of
    # them (5 and 6 input tokens free; pack 2 is full) and goes to the first empty one, 1:
    # packs 0, 1, 2, 5 hold pairs and become 0, 1, 2, 3.
    placed = Placed(np.array([5, 0, 2, 2, 0]), np.array([2, 3, 1, 5, 7]), np.array([1, 1, 1, 1, 1]), 6)
    keep = np.array([True, True, True, True, False])
    out = refit(placed, keep, (8, 4, 2), (8, 4))
    assert (out.pack.tolist(), out.a.tolist(), out.packs) == ([3, 0, 2, 2, 1], [2, 3, 1, 5, 7], 4)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 8), st.integers(1, 4), st.booleans()), min_size=1,
                max_size=24), st.sampled_from([1, 2, 3, None]))
def test_the_floor_is_at_most_what_refit_gives(rows, depth):
    # Packs 0..5 (some empty), pairs kept or given back; the kept ones fit their packs.
    pack, a, b, keep = (np.array(column) for column in zip(*rows))
    limits = (8, 4, depth)
    kept = np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64), np.zeros(6, dtype=np.int64)
    for r in range(pack.size):  # a kept pair that would overflow its pack is given back instead
        p = pack[r]
        if keep[r] and (kept[0][p] + a[r] > 8 or kept[1][p] + b[r] > 4 or kept[2][p] + 1 > (depth or 8)):
            keep[r] = False
        elif keep[r]:
            kept[0][p] += a[r]; kept[1][p] += b[r]; kept[2][p] += 1
    placed = Placed(pack.astype(np.int64), a.astype(np.int64), b.astype(np.int64), 6)
    least = floor(placed, keep, limits)
    out = refit(placed, keep, limits, (8, 4))
    assert least <= out.packs
    assert refit(placed, keep, limits, (8, 4), beat=least) is None
    assert refit(placed, keep, limits, (8, 4), beat=least + 1).packs == out.packs


def test_the_floor_counts_pairs_that_fit_no_room():
    # Le=8, Ld=4, K=3. Pack 0 holds (5, 1): room (3, 3), 2 places. Given back: (4, 1), (4, 1), (2, 3).
    # Tokens and places beyond the room: 10 - 3 inputs, one pack.
    placed = Placed(np.array([0, 0, 0, 0]), np.array([5, 4, 4, 2]), np.array([1, 1, 1, 3]), 1)
    keep = np.array([True, False, False, False])
    assert floor(placed, keep, (8, 4, 3)) == 2 == refit(placed, keep, (8, 4, 3), (8, 4)).packs
    # At Le=7: 10 - 2 inputs, two packs.
    assert floor(placed, keep, (7, 4, 3)) == 3 == refit(placed, keep, (7, 4, 3), (7, 4)).packs
    # Packs (1, 3) and (7, 1), rooms (7, 1) and (1, 3): room enough in all, but (2, 2) fits neither.
    placed = Placed(np.array([0, 1, 1]), np.array([1, 7, 2]), np.array([3, 1, 2]), 2)
    keep = np.array([True, True, False])
    assert floor(placed, keep, (8, 4, 3)) == 3 == refit(placed, keep, (8, 4, 3), (8, 4)).packs
