import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing import Assignment, algorithm_names, histogram, plan
from tfpack.packing.assignment import layout
from tfpack.packing.permutation import Permutations
from tfpack.packing.placement import length_ranks, placement


def check_assignment(assignment, lengths, max_length, max_sequences_per_pack):
    n = len(lengths)
    assert assignment.order.dtype == np.int64 and assignment.splits.dtype == np.int64
    assert np.array_equal(np.sort(assignment.order), np.arange(n))  # each example exactly once
    assert assignment.splits[0] == 0 and assignment.splits[-1] == n
    sizes = np.diff(assignment.splits)
    assert np.all(sizes >= 1) and np.all(sizes <= (max_sequences_per_pack or max_length))
    pack_of = assignment.pack_of()
    assert np.bincount(pack_of, weights=lengths, minlength=assignment.num_packs).max() <= max_length
    for p in range(assignment.num_packs):
        inside = lengths[assignment.pack(p)]
        assert np.all(np.diff(inside) <= 0)  # longest first
        assert np.all(pack_of[assignment.pack(p)] == p)


def test_assignment_accessors():
    a = Assignment(order=np.array([2, 0, 1], dtype=np.int64), splits=np.array([0, 1, 3], dtype=np.int64))
    assert a.num_packs == 2
    assert a.pack(0).tolist() == [2] and a.pack(1).tolist() == [0, 1]
    assert a.pack_of().tolist() == [1, 1, 0]


def test_assign_by_hand():
    lengths = np.array([8, 3, 5, 3, 5])
    p = plan(histogram(lengths, 8), 8, 2, algorithm="lpfhp")
    a = p.assign(lengths, seed=0)
    check_assignment(a, lengths, 8, 2)
    assert sorted(lengths[a.pack(i)].tolist() for i in range(a.num_packs)) == [[5, 3], [5, 3], [8]]


def test_assign_is_deterministic_per_seed_and_varies_with_it():
    lengths = np.random.default_rng(0).integers(1, 65, size=2000)
    p = plan(histogram(lengths, 64), 64, 3, algorithm="lpfhp")
    a, b, c = p.assign(lengths, seed=1), p.assign(lengths, seed=1), p.assign(lengths, seed=2)
    assert np.array_equal(a.order, b.order) and np.array_equal(a.splits, b.splits)
    assert not np.array_equal(a.order, c.order)


def test_packs_of_one_strategy_are_not_adjacent():
    # 600 identical (1, 1) packs and 600 (2,) packs: shuffled, not in two blocks.
    lengths = np.array([1] * 1200 + [2] * 600)
    p = plan(histogram(lengths, 2), 2, 2, algorithm="ffd")
    a = p.assign(lengths, seed=0)
    first = lengths[a.order[a.splits[:-1]]]  # longest length of each pack
    changes = np.count_nonzero(np.diff(first))
    assert changes > 300  # two blocks would give 1


def test_lengths_not_in_plan_still_get_a_pack():
    p = plan(np.array([0, 0, 0, 4, 0, 0, 0, 0]), 8, 2, algorithm="lpfhp")  # (4, 4) x 2
    lengths = np.array([4, 3, 3, 8, 1, 2, 7])
    a = p.assign(lengths, seed=0)
    check_assignment(a, lengths, 8, 2)
    # Three unused 4-slots take the longest surplus that fits (3, 3, 2);
    # 8, 7 and 1 get new packs by first fit decreasing.
    assert sorted(lengths[a.pack(i)].tolist() for i in range(a.num_packs)) == [[3, 3], [4, 2], [7, 1], [8]]


def test_fewer_examples_than_slots_drops_empty_packs():
    p = plan(np.array([0, 0, 0, 10, 0, 0, 0, 0]), 8, 2, algorithm="lpfhp")
    a = p.assign(np.array([4, 4, 4]), seed=0)
    assert a.num_packs == 2 and np.diff(a.splits).tolist().count(2) == 1


@pytest.mark.parametrize(
    "lengths, pattern",
    [
        ([3, 9], r"between 1 and max_length=8.*Received: lengths\[1\]=9"),
        ([0], r"Received: lengths\[0\]=0"),
        ([2, -1], r"Received: lengths\[1\]=-1"),
        ([], r"at least one example \(the dataset is empty\)"),
    ],
)
def test_assign_rejects_bad_lengths(lengths, pattern):
    p = plan(np.array([0, 1, 0, 0, 0, 0, 0, 1]), 8, 2, algorithm="spfhp")
    with pytest.raises(TfpackError, match=pattern):
        p.assign(np.array(lengths, dtype=np.int64))


cases = st.integers(1, 20).flatmap(
    lambda max_length: st.tuples(
        st.just(max_length),
        st.lists(st.integers(1, max_length), min_size=1, max_size=60),
        st.lists(st.integers(1, max_length), min_size=1, max_size=60),
        st.one_of(st.none(), st.integers(1, 4)),
        st.sampled_from(algorithm_names()),
        st.integers(0, 3),
    )
)


@settings(max_examples=150)
@given(cases)
def test_assign_places_each_example_once_within_limits(case):
    max_length, planned, actual, max_sequences_per_pack, name, seed = case
    p = plan(histogram(planned, max_length), max_length, max_sequences_per_pack, algorithm=name)
    for lengths in (np.array(planned), np.array(actual)):  # as planned, and different lengths
        check_assignment(p.assign(lengths, seed=seed), lengths, max_length, max_sequences_per_pack)


def test_assign_as_planned_uses_the_plans_packs():
    lengths = np.random.default_rng(3).integers(1, 129, size=5000)
    p = plan(histogram(lengths, 128), 128, 3, algorithm="spfhp")
    a = p.assign(lengths, seed=0)
    check_assignment(a, lengths, 128, 3)
    assert a.num_packs == p.metrics["packs"]


# -- placement: an example's pack is a function of (length, rank), plan, histogram, seed


@settings(max_examples=100)
@given(cases, st.integers(1, 5), st.randoms(use_true_random=False))
def test_placement_of_parts_equals_assign_of_the_whole(case, parts, random):
    # Workers that each see one "file" and know only the per-file histograms
    # place their examples exactly where `assign` places them.
    max_length, planned, actual, max_sequences_per_pack, name, seed = case
    p = plan(histogram(planned, max_length), max_length, max_sequences_per_pack, algorithm=name)
    lengths = np.array(actual)
    cuts = sorted(random.randint(0, len(lengths)) for _ in range(parts - 1))
    files = np.split(lengths, cuts)
    per_file = np.array([np.bincount(f, minlength=max_length + 1) for f in files])
    starts = np.cumsum(per_file, axis=0) - per_file  # examples of each length in earlier files
    rule = placement(p, per_file.sum(axis=0)[1:], seed=seed)
    placed = [rule.place(f, length_ranks(f, max_length, start=s)) for f, s in zip(files, starts)]
    pack = np.concatenate([a for a, _ in placed])
    position = np.concatenate([b for _, b in placed])
    whole = p.assign(lengths, seed=seed)
    assert np.array_equal(pack, whole.pack_of())
    assert rule.num_packs == whole.num_packs
    again = layout(pack, position, lengths, rule.pack_depths())
    assert np.array_equal(again.order, whole.order) and np.array_equal(again.splits, whole.splits)
    # Each (pack, slot) holds at most one example, within the pack's depth.
    assert np.unique(pack * (max_length + 1) + position).size == len(lengths)
    assert np.all(position < rule.pack_depths()[pack])


def test_placement_needs_no_array_over_the_examples():
    # 10 examples of length 3 among a million: placed alone, as in the whole.
    lengths = np.random.default_rng(0).integers(1, 9, size=1_000_000)
    p = plan(histogram(lengths, 8), 8, 3, algorithm="lpfhp")
    rule = placement(p, histogram(lengths, 8), seed=5)
    whole = p.assign(lengths, seed=5).pack_of()
    threes = np.flatnonzero(lengths == 3)[-10:]
    ranks = np.arange(np.count_nonzero(lengths == 3))[-10:]
    pack, _ = rule.place(np.full(10, 3), ranks)
    assert np.array_equal(pack, whole[threes])


def test_placement_refuses_ranks_beyond_the_histogram():
    p = plan(np.array([0, 2, 0, 0]), 4, 2, algorithm="ffd")
    rule = placement(p, np.array([0, 2, 0, 0]), seed=0)
    with pytest.raises(TfpackError, match=r"did the input change\?\). Received: an example of length 2 with rank 2 of 2"):
        rule.place(np.array([2]), np.array([2]))


def test_unshuffled_packs_follow_the_plan_order():
    lengths = np.array([1] * 6 + [2] * 3)
    p = plan(histogram(lengths, 2), 2, 2, algorithm="ffd")  # strategies in plan order
    a = p.assign(lengths, seed=0, shuffle=False)
    firsts = [tuple(lengths[a.pack(i)].tolist()) for i in range(a.num_packs)]
    expected = [s for s, c in zip(p.strategies, p.counts) for _ in range(c)]
    assert firsts == expected


@settings(max_examples=60)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=4), st.integers(0, 2**32))
def test_permutations_are_bijections(sizes, seed):
    perms = Permutations(seed, sizes)
    for stream, size in enumerate(sizes):
        image = perms(np.arange(size), np.full(size, stream))
        assert np.array_equal(np.sort(image), np.arange(size))


def test_permutations_depend_on_seed_and_stream():
    perms = Permutations(1, [1000, 1000])
    a, b = perms(np.arange(1000), np.zeros(1000)), perms(np.arange(1000), np.ones(1000))
    c = Permutations(2, [1000, 1000])(np.arange(1000), np.zeros(1000))
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    assert abs(np.corrcoef(np.arange(1000), a)[0, 1]) < 0.2
