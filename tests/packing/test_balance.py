"""Balanced batches (`tfpack.packing.balance`): exact cases, the proven bound, brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing import histogram, plan
from tfpack.packing.balance import arrange, check_balance
from tfpack.packing.placement import placement


def batch_sums(values, positions, B):
    values = np.asarray(values)
    n = len(values) // B
    full = positions < n * B
    return np.bincount(positions[full] // B, weights=values[full], minlength=n).astype(int)


def best_spread(values, B):
    """The least max - min of batch sums over every split into groups of B (tiny inputs)."""
    best = None

    def split(rest, sums):
        nonlocal best
        if not rest:
            spread = max(sums) - min(sums)
            best = spread if best is None else min(best, spread)
            return
        for others in itertools.combinations(rest[1:], B - 1):
            group = (rest[0],) + others
            split([i for i in rest if i not in group], sums + [sum(values[i] for i in group)])

    split(list(range(len(values))), [])
    return best


def test_by_hand():
    positions, report = arrange(np.array([3, 2, 2, 1, 1, 1]), 2, seed=0)
    assert sorted(batch_sums([3, 2, 2, 1, 1, 1], positions, 2).tolist()) == [3, 3, 4]
    assert (report.batches, report.low, report.high, report.excess) == (3, 3, 4, 0.0)
    assert report.tolerance == 1.0 and report.mean == pytest.approx(10 / 3)


def test_an_unbalanceable_plan_says_by_how_much():
    # Two batches of two from 5, 5, 5, 1: the best is 10 and 6; the mean 8 is 2 off, 1 allowed.
    positions, report = arrange(np.array([5, 5, 5, 1]), 2, seed=0)
    assert sorted(batch_sums([5, 5, 5, 1], positions, 2).tolist()) == [6, 10]
    assert (report.low, report.high, report.excess, report.within_tolerance) == (6, 10, 1.0, False)


def test_the_last_partial_batch_takes_the_remainder():
    values = np.arange(1, 12)  # 11 packs, batches of 4: two full batches and 3 packs
    positions, report = arrange(values, 4, seed=1)
    assert sorted(positions.tolist()) == list(range(11)) and report.batches == 2
    sums = batch_sums(values, positions, 4)
    assert sums.max() - sums.min() <= 1


def test_same_seed_same_order_other_seed_other_order():
    values = np.random.default_rng(0).integers(1, 9, 500)
    a, b, c = (arrange(values, 10, seed=s)[0] for s in (1, 1, 2))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    unshuffled = arrange(values, 10, seed=1, shuffle=False)[0]
    assert np.array_equal(unshuffled, arrange(values, 10, seed=1, shuffle=False)[0])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), st.integers(2, 3), st.integers(1, 7), st.integers(0, 2**16))
def test_reaches_the_best_spread_of_tiny_plans(B, n, K, seed):
    # Brute force over every split: the search finds the least spread here (so it
    # is within the tolerance whenever any arrangement is).
    values = np.random.default_rng(seed).integers(1, K + 1, n * B)
    positions, report = arrange(values, B, seed=seed)
    assert report.high - report.low == best_spread(values.tolist(), B)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 600), st.integers(1, 32), st.integers(0, 2**16),
       st.sampled_from(["sequences", "tokens"]))
def test_a_permutation_within_the_proven_bound(B, P, K, seed, by):
    rng = np.random.default_rng(seed)
    values = rng.integers(1, K + 1, P) if by == "sequences" else rng.integers(1, 513, P)
    positions, report = arrange(values, B, seed=seed, by=by)
    assert np.array_equal(np.sort(positions), np.arange(P))  # nothing lost or repeated
    if report.batches:
        sums = batch_sums(values, positions, B)
        assert (sums.min(), sums.max()) == (report.low, report.high)
        # The serpentine deal's bound; the swaps never widen it.
        assert report.high - report.low <= values.max() - values.min()
        if by == "sequences" and B >= 8 and report.batches >= 4:
            assert report.within_tolerance, report


@pytest.mark.parametrize("by", ["sequences", "tokens"])
@pytest.mark.parametrize("foreign_plan", [False, True])
def test_placement_counts_match_the_packs_it_makes(by, foreign_plan):
    # The arrangement is computed from the plan and histogram alone: its view of
    # each pack (sequences, tokens) must be what the assignment really puts there,
    # surplus examples in longer slots and new packs included.
    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 65, 3000)
    planned = rng.integers(1, 65, 3000) if foreign_plan else lengths
    p = plan(histogram(planned, 64), 64, 4, algorithm="ffd")
    a = p.assign(lengths, seed=5, balance=by, batch_size=7)
    per_pack = np.diff(a.splits) if by == "sequences" else \
        np.bincount(a.pack_of(), weights=lengths).astype(int)
    sums = batch_sums(per_pack, np.arange(a.num_packs), 7)
    assert (sums.min(), sums.max()) == (a.balance.low, a.balance.high)
    assert np.array_equal(np.sort(a.order), np.arange(lengths.size))
    if by == "sequences":
        assert a.balance.within_tolerance and a.balance.high - a.balance.low <= 1
    # Same examples in the same packs as without balance: only the pack order moves.
    plain = p.assign(lengths, seed=5)
    as_sets = lambda x: sorted(tuple(sorted(x.pack(i))) for i in range(x.num_packs))  # noqa
    assert as_sets(a) == as_sets(plain)


def test_placement_is_a_function_of_plan_histogram_and_seed():
    lengths = np.random.default_rng(0).integers(1, 33, 800)
    p = plan(histogram(lengths, 32), 32, 3, algorithm="lpfhp")
    counts = np.bincount(lengths, minlength=33)[1:]
    one = placement(p, counts, seed=4, balance=True, batch_size=6)
    two = placement(p, counts, seed=4, balance="sequences", batch_size=6)
    assert np.array_equal(one.arrangement, two.arrangement)
    assert np.array_equal(np.sort(one.pack_ids(np.arange(one.num_packs))),
                          np.arange(one.num_packs))


def test_bad_arguments_name_themselves():
    with pytest.raises(TfpackError, match=r"`balance` must be .* Received: balance='seqs'"):
        check_balance("seqs", 4)
    with pytest.raises(TfpackError, match=r"needs `batch_size`. Received: .*batch_size=None"):
        check_balance(True, None)
    with pytest.raises(TfpackError, match=r"`batch_size` must be a positive integer. .*=0"):
        check_balance(True, 0)
    with pytest.raises(TfpackError, match=r"`batch_size` orders packs for `balance`"):
        check_balance(False, 8, batch_size_alone=False)
    with pytest.raises(TfpackError, match=r"`batch_size` must be a positive integer"):
        arrange(np.ones(4, np.int64), 0)
