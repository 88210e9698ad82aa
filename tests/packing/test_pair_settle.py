"""Settling a fill (`tfpack.packing.pairs._settle`): its least-filled packs dissolved and re-placed."""

from __future__ import annotations

import numpy as np
import pytest
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


def kernel_pass(pack, a, b, packs, limits, dissolve, moves=10_000, by_column=False, sample=0):
    return np.frombuffer(kernels.settle(*(np.array(x, dtype=np.int64).tobytes() for x in (pack, a, b)), packs,
                                        limits[0], limits[1], -1 if limits[2] is None else limits[2], dissolve,
                                        moves, 0.0, by_column, sample), np.int64).tolist()


def test_a_sample_dissolves_packs_spread_evenly_over_the_ids():
    # Le = 10, Ld = K = 1 (one length, one sequence a pack): six packs of a 5, none dissolved as the
    # least used; a sample of 2 dissolves packs (2i + 1) * 6 // 4 = 1 and 4, of 3 packs 1, 3 and 5,
    # of 6 (or more) every pack. A sequence dissolved finds no place (every other pack full): -1.
    one_each = ([0, 1, 2, 3, 4, 5], [5] * 6, [1] * 6, 6, (10, 1, 1), 0)
    assert kernel_pass(*one_each, sample=2) == [0, -1, 2, 3, -1, 5]
    assert kernel_pass(*one_each, sample=3) == [0, -1, 2, -1, 4, -1]
    assert kernel_pass(*one_each, sample=6) == kernel_pass(*one_each, sample=60) == [-1] * 6
    assert kernel_pass(*one_each) == [0, 1, 2, 3, 4, 5]  # no sample: nothing dissolved
    assert model_pass(*one_each, sample=2) == [0, -1, 2, 3, -1, 5]


@pytest.mark.parametrize("by_column", [False, True])
def test_a_larger_pairs_slot_passed_over_is_dropped(by_column):
    # Le = Ld = 10, K = 2: {(3, 3)} is dissolved. Its one place is the slot (4, 4) of (2, 2) in pack 0;
    # the 20 packs {(3, 3), (6, 6)} after it put the slot (4, 4) of their (3, 3), not smaller, at the
    # head of that cell. The search drops them as it passes them and reaches pack 0's. (Seen failing
    # with the walk of a cell stopped after 16 entries: (3, 3) stayed out.)
    packs = [[(6, 6), (2, 2)]] + [[(3, 3), (6, 6)]] * 20 + [[(3, 3)]]
    placed = placed_of(packs)
    pack = kernel_pass(placed.pack, placed.a, placed.b, placed.packs, (10, 10, 2), 1, by_column=by_column)
    assert pack[-1] == 0 and pack[1] == -1  # (3, 3) in pack 0, (2, 2) out
    assert pack[:1] + pack[2:-1] == placed.pack.tolist()[:1] + placed.pack.tolist()[2:-1]


def test_a_pack_reslotted_lists_its_smaller_pairs_slots():
    # Le = Ld = 11, K = 3: {(3, 3), (3, 2)} is dissolved. (3, 3) goes into the room (4, 4) of
    # {(5, 5), (2, 2)}, which is reslotted with room (1, 1): the slot (3, 3) of (2, 2), smaller than
    # (3, 3), is listed; (3, 2) then takes it and (2, 2) finds no place. (Seen failing with the
    # slots of pairs under half the last size placed left unlisted: (3, 2) stayed out.)
    placed = placed_of([[(5, 5), (2, 2)], [(3, 3), (3, 2)]])
    assert kernel_pass(placed.pack, placed.a, placed.b, 2, (11, 11, 3), 1) == [0, -1, 0, 0]


def model_pass(pack, a, b, packs, limits, dissolve, sample=0):
    """The kernel's pass, written out without its table: every entry scanned at every search."""
    le, ld, depth = limits
    places = depth or len(a) + 1
    n, size = len(a), [x * ld + y * le for x, y in zip(a, b)]
    use, re, rd, k = [0] * packs, [le] * packs, [ld] * packs, [0] * packs
    for r, j in enumerate(pack):
        use[j] += size[r]; re[j] -= a[r]; rd[j] -= b[r]; k[j] += 1
    dead = set(sorted(range(packs), key=lambda j: (use[j], j))[:dissolve])
    sample = min(sample, packs)
    dead |= {(2 * i + 1) * packs // (2 * sample) for i in range(sample)}
    where, members, heap = list(pack), [[] for _ in range(packs)], []
    for r, j in enumerate(pack):
        if j in dead:
            where[r] = -1
            heap.append(r)
        elif re[j] or rd[j]:
            members[j].insert(0, r)
    for j in dead:
        re[j], rd[j], k[j] = le, ld, 0
    cells, at = {}, {}

    def out(x):
        if x in at:
            cells[at.pop(x)].remove(x)

    def put(x, cell):
        at[x] = cell
        cells.setdefault(cell, []).insert(0, x)

    def reslot(j):
        for r in members[j]:
            out(r)
            if re[j] or rd[j]:
                put(r, (re[j] + a[r], rd[j] + b[r]))
        out(n + j)
        if k[j] < places and re[j] > 0 and rd[j] > 0:
            put(n + j, (re[j], rd[j]))

    for j in range(packs):
        if j not in dead and (re[j] or rd[j]):
            reslot(j)
    while heap:
        r = min(heap, key=lambda q: (-size[q], q))
        heap.remove(r)
        fits = [(x * ld + y * le, x, i, q) for (x, y), entries in cells.items() if x >= a[r] and y >= b[r]
                for i, q in enumerate(entries) if q >= n or size[q] < size[r]]
        if not fits:
            continue
        q = min(fits)[3]
        j = q - n if q >= n else where[q]
        if q < n:
            members[j].remove(q)
            where[q] = -1; re[j] += a[q]; rd[j] += b[q]; k[j] -= 1
            out(q)
            heap.append(q)
        members[j].insert(0, r)
        where[r] = j; re[j] -= a[r]; rd[j] -= b[r]; k[j] += 1
        reslot(j)
    return where


def shuffled_first_fit(pairs, limits, rng) -> Placed:
    """Packs of the pairs (cut to the limits) by first fit in a shuffled order: full ones and others."""
    max_input, max_target, depth = limits
    pairs = [(min(x, max_input), min(y, max_target)) for x, y in pairs]
    rng.shuffle(pairs)
    packs, rooms = [], []
    for x, y in pairs:
        j = next((j for j, (e, d, c) in enumerate(rooms) if e >= x and d >= y and (depth is None or c < depth)), None)
        if j is None:
            packs.append([]); rooms.append((max_input, max_target, 0)); j = len(packs) - 1
        packs[j].append((x, y)); e, d, c = rooms[j]; rooms[j] = (e - x, d - y, c + 1)
    return placed_of(packs)


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12), st.integers(2, 12), st.one_of(st.none(), st.integers(1, 6)),
       st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=40),
       st.integers(1, 8), st.randoms(use_true_random=False), st.booleans(), st.integers(0, 6))
def test_the_pass_is_the_written_out_one(max_input, max_target, depth, pairs, dissolve, rng, by_column, sample):
    # Packs from a shuffled first fit (full ones, and some dissolved among many of equal use), then one
    # pass: the kernel (its table, the slots it drops, the full packs it leaves unlisted, its
    # quickselect), searching by rows or by column, against `model_pass`, pair for pair. Seen failing
    # with the test of a slot's pair inverted, with packs full in the inputs only left unlisted, with
    # the quickselect's sides swapped, and (by column) with the summary words' first mask dropped.
    # A sample of other packs dissolved beside them (0: none), spread over the ids.
    limits = (max_input, max_target, depth)
    placed = shuffled_first_fit(pairs, limits, rng)
    args = (placed.pack.tolist(), placed.a.tolist(), placed.b.tolist(), placed.packs, limits, min(dissolve, placed.packs))
    assert kernel_pass(*args, by_column=by_column, sample=sample) == model_pass(*args, sample=sample)


@pytest.mark.parametrize("by_column", [False, True])
def test_of_equal_slots_the_least_input_room(by_column):
    # Le = Ld = 10, K = 3: {(1, 1)} is dissolved; the rooms (2, 5) of {(8, 5)} and (5, 2) of {(5, 8)} are
    # equal slots (70); the one of less input room takes it, whichever search finds the other first
    # (by column: the column of target room 2 comes first). Seen failing with ties to the first found.
    assert kernel_pass([0, 1, 2], [8, 5, 1], [5, 8, 1], 3, (10, 10, 3), 1, by_column=by_column) == [0, 1, 0]
    assert model_pass([0, 1, 2], [8, 5, 1], [5, 8, 1], 3, (10, 10, 3), 1) == [0, 1, 0]


@settings(max_examples=60, deadline=None)
@given(st.integers(4097, 20_000), st.integers(2, 16), st.integers(2, 40), st.integers(1, 12),
       st.randoms(use_true_random=False))
def test_one_length_by_column_is_the_written_out_one_over_long_rows(max_length, depth, packs, dissolve, rng):
    # One length (`_spread_settle`'s pairs (length, 1), depth 1s a pack) at L above 4,096: the index by
    # column has more than one summary word a column, and the free tokens of packs lie words apart.
    # Packs of random lengths from a few sizes of sequence (a whole pack, a third, a tenth, a 100th).
    lengths = [rng.randint(1, max(1, max_length // rng.choice([1, 3, 10, 100]))) for _ in range(packs * depth)]
    placed = shuffled_first_fit([(n, 1) for n in lengths], (max_length, depth, depth), rng)
    args = (placed.pack.tolist(), placed.a.tolist(), placed.b.tolist(), placed.packs, (max_length, depth, depth),
            min(dissolve, placed.packs))
    assert kernel_pass(*args, by_column=True) == kernel_pass(*args) == model_pass(*args)


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 12), st.integers(2, 12), st.one_of(st.none(), st.integers(1, 6)),
       st.lists(st.tuples(st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=60),
       st.sampled_from([0.05, 0.2, 0.5]), st.randoms(use_true_random=False))
def test_full_packs_left_out_of_the_kernel_change_nothing(max_input, max_target, depth, pairs, share, rng):
    # `_pass` sends the kernel only the pairs of packs with room; the pass on every pair (pair43's
    # `settle`, the kernel checked against `model_pass` above) gives the same packs. Seen failing
    # with the packs full in one row left out too.
    from tfpack.packing.pairs._settle import _pass
    limits = (max_input, max_target, depth)
    placed = shuffled_first_fit(pairs, limits, rng)
    dissolve = int(share * placed.packs)
    after = _pass(placed, limits, share)
    if dissolve < 1:
        assert after is None
        return
    pack = np.array(kernel_pass(placed.pack, placed.a, placed.b, placed.packs, limits, dissolve,
                                int(0.1 * len(placed.pack)) + 64))
    out, live = pack < 0, sorted(set(pack[pack >= 0].tolist()))
    counts = np.bincount((placed.a[out] - 1) * max_target + placed.b[out] - 1, minlength=max_input * max_target)
    refill = dot_fill(counts.reshape(max_input, max_target), limits)[0]
    if len(live) + refill.packs >= placed.packs:
        assert after is None
        return
    expected = [sorted(zip(placed.a[pack == j].tolist(), placed.b[pack == j].tolist())) for j in live]
    assert sorted(packs_of(after)) == sorted(expected + packs_of(refill))
