"""Settling a fill (`tfpack.packing.pairs._settle`): its least-filled packs dissolved and re-placed."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.compiled import kernels
from tfpack.packing.pairs._dot import dot_fill
from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._settle import settle, settled_fill


def placed_of(packs: list[list[tuple[int, int]]]) -> Placed:
    rows = [(j, a, b) for j, pack in enumerate(packs) for a, b in pack]
    pack, a, b = (np.array(column, dtype=np.int64) for column in zip(*rows))
    return Placed(pack, a, b, len(packs))


def packs_of(placed: Placed) -> list[list[tuple[int, int]]]:
    packs = [[] for _ in range(placed.packs)]
    for j, a, b in zip(placed.pack.tolist(), placed.a.tolist(), placed.b.tolist()):
        packs[j].append((a, b))
    return [sorted(pack) for pack in packs]


def test_a_pair_goes_into_a_packs_room():
    # Le = Ld = 10, K = 2: the least-filled pack, {(4, 4)}, empties into the room (5, 5) of {(5, 5)}.
    placed = placed_of([[(5, 5)], [(4, 4)]])
    assert packs_of(settle(placed, (10, 10, 2), share=0.5)) == [[(4, 4), (5, 5)]]


def test_a_larger_pair_takes_a_smaller_ones_place():
    # Le = Ld = 10, K = 3: {(3, 3)} is dissolved; no room (2, 2) holds it; it takes the place of
    # (2, 2) (slot (4, 4)), which then fits the room (2, 2) of {(8, 8)}: 3 packs -> 2.
    placed = placed_of([[(6, 6), (2, 2)], [(3, 3)], [(8, 8)]])
    assert packs_of(settle(placed, (10, 10, 3), share=0.34)) == [[(3, 3), (6, 6)], [(2, 2), (8, 8)]]


def test_the_tightest_place_first():
    # Le = Ld = 10, K = 2: (3, 3) fits the room (4, 9) of {(6, 1)} (4 * 10 + 9 * 10 = 130) and the room
    # (5, 3) of {(5, 7)} (80): it goes to the tighter, though the looser comes first by input room.
    placed = placed_of([[(6, 1)], [(3, 3)], [(5, 7)]])
    assert packs_of(settle(placed, (10, 10, 2), share=0.34)) == [[(6, 1)], [(3, 3), (5, 7)]]


def test_kept_only_where_packs_drop():
    # {(6, 6)} fits nowhere else: the pass would leave as many packs; the fill's plan stands.
    placed = placed_of([[(6, 6)], [(7, 7)]])
    assert settle(placed, (10, 10, 2), share=0.5) is placed


def test_places_bind():
    # K = 1: no pack has a place; (1, 1) fits the room (9, 9) but stays where it was.
    placed = placed_of([[(1, 1)], [(1, 1)]])
    assert settle(placed, (10, 10, 1), share=0.5) is placed


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 12), st.integers(2, 12), st.one_of(st.none(), st.integers(1, 6)),
       st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=60),
       st.sampled_from([0.05, 0.2, 0.5, 1.0]))
def test_every_pair_once_within_the_limits(max_input, max_target, depth, pairs, share):
    pairs = [(min(a, max_input), min(b, max_target)) for a, b in pairs]
    counts = np.zeros((max_input, max_target), dtype=np.int64)
    for a, b in pairs:
        counts[a - 1, b - 1] += 1
    limits = (max_input, max_target, depth)
    before = dot_fill(counts, limits)[0]
    after = settle(before, limits, share=share)
    assert after.packs <= before.packs
    assert sorted(zip(after.a.tolist(), after.b.tolist())) == sorted(pairs)
    assert set(after.pack.tolist()) == set(range(after.packs))
    assert np.bincount(after.pack, after.a).max() <= max_input
    assert np.bincount(after.pack, after.b).max() <= max_target
    assert depth is None or np.bincount(after.pack).max() <= depth
    assert settled_fill(counts, limits)[0].packs <= before.packs


def test_a_pair_only_displaces_a_smaller_one():
    # Le = Ld = 10, K = 2: (3, 3) of the dissolved pack fits the slot (5, 5) of (4, 4) in {(4, 4), (5, 5)}
    # (room (1, 1)), but (4, 4) is larger: it stays out (-1), whatever moves are allowed; displacing
    # larger pairs would swap them back and forth.
    def pack(moves):
        return np.frombuffer(kernels.settle(*(np.array(x, dtype=np.int64).tobytes() for x in
                                              ([0, 0, 1], [4, 5, 3], [4, 5, 3])), 2, 10, 10, 2, 1, moves), np.int64)
    assert pack(1).tolist() == pack(101).tolist() == [0, 0, -1]
