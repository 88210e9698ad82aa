"""Hand-computed plans for tiny histograms and invariants of every algorithm."""

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing import PackingPlan, algorithm_names, plan
from tfpack.packing.algorithms import _fit_decreasing, base
from tfpack.packing.algorithms._nnls import enumerate_strategies, packing_matrix
from tfpack.packing.checks import slot_counts


def make_histogram(max_length, counts_by_length):
    counts = np.zeros(max_length, dtype=np.int64)
    for length, count in counts_by_length.items():
        counts[length - 1] = count
    return counts


def packs(result):
    return collections.Counter(dict(zip(map(tuple, result.strategies), np.asarray(result.counts).tolist())))


# Two 6s, three 4s, four 2s, max length 8: 32 tokens, 4 packs at best.
SIXES_FOURS_TWOS = make_histogram(8, {6: 2, 4: 3, 2: 4})


def test_paper_table_4_strategy_matrix_for_length_8():
    strategies = enumerate_strategies(8, 3)
    assert [sorted(s) for s in strategies] == [
        [1, 1, 6], [1, 2, 5], [1, 3, 4], [1, 7], [2, 2, 4], [2, 3, 3], [2, 6], [3, 5], [4, 4], [8],
    ]
    # Rows are lengths 1..8, columns the strategies above (the paper's table 4).
    assert packing_matrix(strategies, 8).tolist() == [
        [2, 1, 1, 1, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 2, 1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 2, 0, 1, 0, 0],
        [0, 0, 1, 0, 1, 0, 0, 0, 2, 0],
        [0, 1, 0, 0, 0, 0, 0, 1, 0, 0],
        [1, 0, 0, 0, 0, 0, 1, 0, 0, 0],
        [0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    ]
    assert all(sum(s) == 8 and list(s) == sorted(s, reverse=True) for s in strategies)


def test_strategy_count_matches_paper_for_length_512():
    assert len(enumerate_strategies(512, 3)) == 22102


def test_spfhp_worst_fit_by_hand():
    # 6,6 -> two packs; 4,4,4 fit nowhere -> three packs with 4 free;
    # the 2s go to the emptiest packs (the 4s), newest group first.
    result = base.get("spfhp")(SIXES_FOURS_TWOS, 8, None, seed=0)
    assert packs(result) == {(6,): 2, (4, 2): 2, (4, 2, 2): 1}


def test_lpfhp_best_fit_with_count_splitting_by_hand():
    # Two 4s share a pack (count splitting); the 2s go to the fullest packs first.
    result = base.get("lpfhp")(SIXES_FOURS_TWOS, 8, None, seed=0)
    assert packs(result) == {(6, 2): 2, (4, 4): 1, (4, 2, 2): 1}


@pytest.mark.parametrize("name", ["ffd", "bfd"])
def test_fit_decreasing_by_hand(name):
    result = base.get(name)(SIXES_FOURS_TWOS, 8, None, seed=0)
    assert packs(result) == {(6, 2): 2, (4, 4): 1, (4, 2, 2): 1}


def test_depth_limit_by_hand():
    # At depth 2 the last pack cannot take two 2s.
    result = base.get("lpfhp")(SIXES_FOURS_TWOS, 8, 2, seed=0)
    assert packs(result) == {(6, 2): 2, (4, 4): 1, (4, 2): 1, (2,): 1}
    assert packs(base.get("ffd")(SIXES_FOURS_TWOS, 8, 2, seed=0)) == packs(result)


def test_none_is_one_sequence_per_pack():
    assert packs(base.get("none")(SIXES_FOURS_TWOS, 8, 3, seed=0)) == {(6,): 2, (4,): 3, (2,): 4}


def test_nnlshp_finds_the_exact_mixture():
    # 48 tokens fill 6 packs exactly, in one way only.
    histogram = make_histogram(8, {1: 3, 2: 1, 6: 2, 7: 1, 8: 3})
    result = base.get("nnlshp")(histogram, 8, 3, seed=0)
    assert packs(result) == {(6, 1, 1): 1, (6, 2): 1, (7, 1): 1, (8,): 3}
    p = plan(histogram, 8, 3, algorithm="nnlshp")
    assert p.metrics["packs"] == 6 and p.metrics["efficiency"] == 1.0


def test_nnlshp_leftovers_get_their_own_pack():
    # One 7 cannot be matched (no 1s): NNLS leaves it out, it gets a pack alone.
    histogram = make_histogram(8, {7: 1, 8: 2})
    p = plan(histogram, 8, 3, algorithm="nnlshp")
    assert p.metrics["packs"] == 3
    assert slot_counts(p.strategies, p.counts, 8)[6] >= 1


def test_greedy_is_next_fit_in_shuffled_order():
    from tfpack.packing.algorithms.greedy import pack_boundaries

    # 5 | 5 3 | 2 6 : the second 5 does not fit after the first; next fit
    # never looks back, so the 2 does not join the first pack either.
    assert pack_boundaries(np.array([5, 5, 3, 2, 6]), 8, None).tolist() == [0, 1, 3, 5]
    assert pack_boundaries(np.array([1, 1, 1, 1]), 8, 3).tolist() == [0, 3, 4]
    a = base.get("greedy")(SIXES_FOURS_TWOS, 8, None, seed=1)
    b = base.get("greedy")(SIXES_FOURS_TWOS, 8, None, seed=1)
    assert packs(a) == packs(b)


def test_greedy_refuses_more_sequences_than_it_can_hold_before_allocating():
    from tfpack.errors import TfpackError
    from tfpack.packing.algorithms.greedy import MAX_SEQUENCES

    histogram = np.array([0, MAX_SEQUENCES + 1, 10**15, 0, 0, 0, 0, 0], dtype=np.int64)  # 1.8 PiB
    with pytest.raises(TfpackError, match=r"plans at most 33,554,432 sequences.*Received: "
                                          r"1,000,000,033,554,433 sequences"):
        plan(histogram, 8, 3, algorithm="greedy")
    assert plan(histogram, 8, 3, algorithm="bfd").metrics["sequences"] == 10**15 + MAX_SEQUENCES + 1


def reference_fit_decreasing(lengths, max_length, max_sequences_per_pack, best_fit):
    """Per-sequence first/best fit decreasing, the textbook way."""
    depth = max_sequences_per_pack or max_length
    bins = []  # [free space, lengths]
    for length in sorted(lengths, reverse=True):
        fits = [i for i, (space, items) in enumerate(bins) if space >= length and len(items) < depth]
        if not fits:
            bins.append([max_length, []])
            fits = [len(bins) - 1]
        i = min(fits, key=lambda i: (bins[i][0], i)) if best_fit else fits[0]
        bins[i][0] -= length
        bins[i][1].append(length)
    return collections.Counter(tuple(items) for _, items in bins)


histograms = st.integers(1, 24).flatmap(
    lambda max_length: st.tuples(
        st.just(max_length),
        st.lists(st.integers(0, 6), min_size=max_length, max_size=max_length).filter(any),
        st.one_of(st.none(), st.integers(1, 5)),
    )
)


@settings(max_examples=150)
@given(histograms)
def test_ffd_and_bfd_equal_the_per_sequence_algorithms(case):
    max_length, counts, max_sequences_per_pack = case
    lengths = np.repeat(np.arange(1, max_length + 1), counts)
    for name, best_fit in (("ffd", False), ("bfd", True)):
        result = base.get(name)(np.array(counts), max_length, max_sequences_per_pack, seed=0)
        assert packs(result) == reference_fit_decreasing(lengths.tolist(), max_length, max_sequences_per_pack, best_fit)


# Many copies of few lengths: groups split, and a split's partial or untouched
# packs go back among the spaces the current length still takes from (the zone
# of `_fit_decreasing._best_fit_decreasing`), as do new packs' partial last pack.
crowded = st.integers(4, 30).flatmap(
    lambda max_length: st.tuples(
        st.just(max_length),
        st.dictionaries(st.integers(1, max_length), st.integers(1, 25), min_size=1, max_size=5),
        st.one_of(st.none(), st.integers(2, 8)),
    )
)


@settings(max_examples=100)
@given(crowded)
def test_bfd_with_split_groups_equals_the_per_sequence_algorithm(case):
    max_length, by_length, max_sequences_per_pack = case
    counts = np.zeros(max_length, dtype=np.int64)
    for length, number in by_length.items():
        counts[length - 1] = number
    lengths = np.repeat(np.arange(1, max_length + 1), counts)
    result = base.get("bfd")(counts, max_length, max_sequences_per_pack, seed=0)
    assert packs(result) == reference_fit_decreasing(lengths.tolist(), max_length,
                                                     max_sequences_per_pack, True)


def test_bfd_by_hand_with_every_kind_of_move():
    # 7, 7 open (7) (7), spaces 3 3; a 5 opens (5), the next 5 fills it; the 4 fits nowhere:
    # (4), space 6; the 3s take the tightest: the two (7)s (space 3, earliest first), then (4).
    histogram = make_histogram(10, {7: 2, 5: 2, 4: 1, 3: 3})
    result = base.get("bfd")(histogram, 10, None, seed=0)
    assert result.strategies == [(7, 3), (5, 5), (4, 3)] and result.counts.tolist() == [2, 1, 1]
    assert packs(result) == reference_fit_decreasing([7, 7, 5, 5, 4, 3, 3, 3], 10, None, True)


@settings(max_examples=150)
@given(histograms, st.sampled_from(algorithm_names()))
def test_every_algorithm_plans_every_sequence_within_limits(case, name):
    max_length, counts, max_sequences_per_pack = case
    counts = np.array(counts, dtype=np.int64)
    p = plan(counts, max_length, max_sequences_per_pack, algorithm=name, seed=3)
    assert all(sum(s) <= max_length for s in p.strategies)
    assert all(len(s) <= (max_sequences_per_pack or max_length) for s in p.strategies)
    assert np.all(slot_counts(p.strategies, p.counts, max_length) >= counts)
    assert np.all(p.counts > 0)
    m = p.metrics
    assert m["sequences"] == counts.sum() and m["packs"] == p.counts.sum()
    assert m["lower_bound_packs"] <= m["packs"]
    assert 0 < m["efficiency"] <= 1 and m["packing_factor"] <= m["speedup_upper_bound"] + 1e-12
    back = PackingPlan.from_json(p.to_json())
    assert back.strategies == p.strategies and back.metrics == p.metrics


def test_first_fit_and_best_fit_differ_by_hand():
    # Packs of 7: 5 -> A (2 free); 3, 3 -> B (1 free). The 1 goes to the first
    # pack with room under FFD (A) and to the tightest under BFD (B).
    histogram = make_histogram(7, {5: 1, 3: 2, 1: 1})
    assert packs(base.get("ffd")(histogram, 7, None, seed=0)) == {(5, 1): 1, (3, 3): 1}
    assert packs(base.get("bfd")(histogram, 7, None, seed=0)) == {(5,): 1, (3, 3, 1): 1}


def test_strategy_counts_match_the_enumeration():
    from tfpack.packing.algorithms._nnls import count_strategies

    for max_length in (1, 2, 7, 8, 30):
        for depth in (1, 2, 3, 4):
            assert count_strategies(max_length, depth) == len(enumerate_strategies(max_length, depth))


@pytest.mark.parametrize("name", ["nnlshp", "ennlshp"])
def test_nnls_planners_refuse_huge_matrices(name):
    from tfpack.errors import TfpackError

    histogram = make_histogram(2048, {100: 1, 2048: 1})
    with pytest.raises(TfpackError, match=r"use `lpfhp` or `optimal`.*Received: max_length=2048 \(350,550 strategies"):
        plan(histogram, 2048, 3, algorithm=name)
