"""Replicas balanced by attention cost: hand-computed splits, and the bound
checked against brute force on small steps."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing.replicas import pack_costs, replica_bound, split_replicas


def replica_sums(costs, positions, batch_size, replicas):
    placed = np.empty_like(costs)
    placed[positions] = costs
    steps = costs.size // batch_size
    return placed[:steps * batch_size].reshape(steps, replicas, -1).sum(axis=2)


def best_split(costs, replicas):
    """The least cost of the costliest replica, over every split."""
    m = len(costs) // replicas
    return min(max(sum(costs[i] for i in order[r * m:(r + 1) * m])
                   for r in range(replicas))
               for order in itertools.permutations(range(len(costs))))


def test_hand_computed_split():
    # One step of 6 packs on 3 replicas: 2 each. Sorted 9 7 6 3 2 1; the
    # serpentine deal gives (9, 3) (7, 2) (6, 1)... reversed in round 2:
    # (9, 1) (7, 2) (6, 3) = 10, 9, 9: the bound (ceil(28 / 3) = 10).
    costs = np.array([3, 9, 1, 7, 2, 6])
    positions, report = split_replicas(costs, 6, 3)
    assert sorted(replica_sums(costs, positions, 6, 3)[0].tolist()) == [9, 9, 10]
    # The deal alone, no swaps (a plain round-robin gives 12, 9, 7).
    positions, _ = split_replicas(costs, 6, 3, rounds=0)
    assert sorted(replica_sums(costs, positions, 6, 3)[0].tolist()) == [9, 9, 10]
    assert report.bound_max == 10.0
    assert report.worst_after == pytest.approx(10 / (28 / 3))
    # In the given order the slices were (3, 9) (1, 7) (2, 6) = 12, 8, 8.
    assert report.worst_before == pytest.approx(12 / (28 / 3))
    # Places stay inside their step; a last partial step stays as it was.
    costs = np.array([5, 5, 1, 1, 7])
    positions, report = split_replicas(costs, 4, 2)
    assert positions[4] == 4 and sorted(positions[:4].tolist()) == [0, 1, 2, 3]
    assert replica_sums(costs, positions, 4, 2).tolist() == [[6, 6]]
    assert report.steps == 1 and report.worst_before == pytest.approx(10 / 6)


def test_pack_costs_and_bound():
    assert pack_costs([512], [0, 1]).tolist() == [512 ** 2]
    # 8 sequences of 64 in a pack of 512 cost 8x less attention.
    assert pack_costs([64] * 8, [0, 8]).tolist() == [8 * 64 ** 2]
    # The replica with the largest pack holds the cheapest other one too.
    assert replica_bound(np.array([[10, 1, 1, 1]]), 2).tolist() == [11.0]


def test_errors_name_the_parameter():
    with pytest.raises(TfpackError, match=r"Received: batch_size=6, replicas=4"):
        split_replicas(np.ones(6, int), 6, 4)
    with pytest.raises(TfpackError, match=r"Received: replicas=0"):
        split_replicas(np.ones(6, int), 6, 0)
    with pytest.raises(TfpackError, match=r"Received: token_weight=-1"):
        pack_costs([1], [0, 1], token_weight=-1)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from([(2, 1), (2, 2), (4, 2), (6, 2), (6, 3), (6, 6), (4, 4)]),
       st.lists(st.integers(0, 50), min_size=6, max_size=6), st.integers(0, 3))
def test_bound_and_guarantee_against_brute_force(shape, values, seed):
    batch_size, replicas = shape
    costs = np.array(values[:batch_size])
    positions, report = split_replicas(costs, batch_size, replicas, seed=seed)
    got = replica_sums(costs, positions, batch_size, replicas).max()
    best = best_split(costs.tolist(), replicas)
    bound = replica_bound(costs[None], replicas)[0]
    assert bound <= best <= got
    assert got <= bound + costs.max() - costs.min()
    assert report.bound_max == bound


def test_many_steps_never_worse_than_given():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 4096, 20000)
    splits = np.concatenate([[0], np.cumsum(rng.integers(1, 8, 4000))])
    splits = splits[splits <= lengths.size]
    costs = pack_costs(lengths[:splits[-1]], splits, token_weight=6 * 64)
    positions, report = split_replicas(costs, 32, 8, seed=1)
    sums = replica_sums(costs, positions, 32, 8)
    steps = costs.size // 32
    before = costs[:steps * 32].reshape(steps, 8, 4).sum(axis=2)
    assert (sums.max(axis=1) <= before.max(axis=1)).all()
    assert report.total_bound <= report.total_after <= report.total_before
    assert report.total_after < 1.05 < report.total_before


def test_assign_splits_each_balanced_batch_among_replicas():
    from tfpack import packing

    rng = np.random.default_rng(0)
    lengths = np.minimum(rng.lognormal(5.5, 1.0, 3000).astype(int) + 1, 1024)
    plan = packing.plan(packing.histogram(lengths, 1024), 1024, 8, algorithm="ffd")
    kept = plan.assign(lengths, seed=3, balance=True, batch_size=16)
    split = plan.assign(lengths, seed=3, balance=True, batch_size=16, replicas=4)
    report = split.balance.replicas
    assert kept.balance.replicas is None and report.replicas == 4
    # Each batch keeps its packs (so its sequences), only their places move.
    steps = split.num_packs // 16

    def per_batch(assignment, what):
        depth = np.diff(assignment.splits)[:steps * 16]
        return np.sort(depth.reshape(steps, 16), axis=1) if what == "depth" else depth

    assert (per_batch(kept, "depth") == per_batch(split, "depth")).all()
    ordered = lengths[split.order]
    costs = pack_costs(ordered, split.splits)[:steps * 16].reshape(steps, 4, 4)
    worst = costs.sum(axis=2).max(axis=1)
    means = costs.sum(axis=(1, 2)) / 4
    assert report.total_after == pytest.approx(worst.sum() / means.sum())
    assert report.total_bound <= report.total_after < report.total_before
    with pytest.raises(TfpackError, match=r"Received: replicas=4, balance=None"):
        plan.assign(lengths, replicas=4)
