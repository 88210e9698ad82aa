"""Replicas balanced by attention cost: the packs of a step split so no replica waits long.

Data-parallel replicas share each step and wait for the slowest. Once
attention skips cross-sequence work (`"segmented"`, `"flash"`), a pack of
sequences `l_1..l_k` costs about

    cost = sum(l_i^2) + token_weight * sum(l_i)

(attention scores, and the per-token rest: projections and MLP cost about
`6 * hidden_dim` score-pairs' worth per token, so `token_weight ~
6 * hidden_dim`; 0 keeps attention alone). Two packs of `L` tokens can
differ in cost `K`-fold. `split_replicas` reorders the packs *inside* each
step of `batch_size` consecutive packs (the order `arrange` made, which it
keeps step by step) so that the `replicas` slices of `batch_size /
replicas` packs, each replica's share under `tf.distribute`, cost as
nearly the same as the packs allow.

How, for every step at once (numpy, vectorized over steps):

1. Serpentine deal of the step's packs by cost, largest first, to the
   replicas (forward, then backward, round after round): the costliest and
   the cheapest replica then differ by at most `max - min` of the step's
   pack costs (the proof of `tfpack.packing.balance`, step 2).
2. Swaps: the costliest replica of each step swaps with the cheapest the
   pair of packs whose difference `d` comes closest to half their gap `g`
   (`0 < d < g`): both end strictly inside their old range, so the most
   any replica costs never grows and the sum of squares falls; until no
   step improves or `rounds`.

Bound: no split of a step can beat `bound = max(ceil(total / replicas),
largest + the m - 1 cheapest other packs)` (`m = batch_size / replicas`
packs a replica): the costliest replica holds at least the mean, and the
replica holding the largest pack holds `m - 1` others. `split_replicas`
reaches at most `bound + (max - min)` (step 1), and
`tests/packing/test_replicas.py` checks both against brute force.

Example: a step of 4 packs on 2 replicas, costs 100, 90, 10, 5:

>>> import numpy as np
>>> positions, report = split_replicas(np.array([100, 10, 90, 5]), 4, 2)
>>> slices = np.empty(4, int); slices[positions] = [100, 10, 90, 5]
>>> slices.reshape(2, 2).sum(axis=1).tolist(), report.bound_max
([105, 100], 105.0)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["ReplicaBalance", "pack_costs", "replica_bound", "split_replicas"]

_BLOCK = 1 << 22  # elements of one pairwise-difference block [steps, m, m]


@dataclasses.dataclass(frozen=True)
class ReplicaBalance:
    """How evenly `split_replicas` spread the cost over the replicas of each step.

    Ratios are the cost of a step (its costliest replica) over the mean
    replica cost of that step (1.0: nobody waits); `total_*` sum over steps,
    so they are the run's time over the time with perfect splits.

    Attributes:
        replicas: replicas a step (`R`).
        steps: full steps (the last, partial one is left as it was).
        mean_before, worst_before: mean and worst ratio in the order given.
        mean_after, worst_after: the same after the split.
        mean_bound, worst_bound: the same for the lower bound: no split
            can do better than this in any step.
        total_before, total_after, total_bound: sum over steps of the
            costliest replica (before, after, bound) over the sum of means.
        bound_max: the bound of the last full step (cost units).
    """

    replicas: int
    steps: int
    mean_before: float
    worst_before: float
    mean_after: float
    worst_after: float
    mean_bound: float
    worst_bound: float
    total_before: float
    total_after: float
    total_bound: float
    bound_max: float

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)


def pack_costs(sequence_lengths, splits, *, token_weight: int = 0) -> np.ndarray:
    """int64 ``[packs]``: ``sum(l^2) + token_weight * sum(l)`` of each pack.

    >>> pack_costs(np.array([3, 1, 4]), np.array([0, 2, 3])).tolist()
    [10, 16]
    >>> pack_costs(np.array([3, 1, 4]), np.array([0, 2, 3]), token_weight=2).tolist()
    [18, 24]

    Args:
        sequence_lengths: int ``[sequences]``, pack after pack.
        splits: int ``[packs + 1]``: pack ``p`` holds sequences
            ``splits[p]:splits[p + 1]``.
        token_weight: non-negative integer, the per-token cost in
            score-pairs (about ``6 * hidden_dim``).
    """
    if isinstance(token_weight, bool) or not isinstance(token_weight, (int, np.integer)) \
            or token_weight < 0:
        raise TfpackError("`token_weight` must be a non-negative integer. "
                          f"Received: token_weight={token_weight!r}")
    lengths = np.asarray(sequence_lengths, np.int64)
    splits = np.asarray(splits, np.int64)
    per = lengths * lengths + token_weight * lengths
    total = np.concatenate([[0], np.cumsum(per)])
    return total[splits[1:]] - total[splits[:-1]]


def replica_bound(step_costs, replicas: int) -> np.ndarray:
    """float ``[steps]``: the least the costliest replica of each step can cost.

    >>> replica_bound(np.array([[100, 90, 10, 5]]), 2).tolist()
    [105.0]
    >>> replica_bound(np.array([[4, 4, 4, 4]]), 2).tolist()
    [8.0]
    """
    costs = np.sort(np.asarray(step_costs, np.int64), axis=1)
    per_replica = costs.shape[1] // replicas
    mean = -(-costs.sum(axis=1) // replicas)
    # The replica with the largest pack holds per_replica - 1 others.
    with_largest = costs[:, -1] + costs[:, :per_replica - 1].sum(axis=1)
    return np.maximum(mean, with_largest).astype(np.float64)


def _check(costs, batch_size, replicas):
    for name, value in (("batch_size", batch_size), ("replicas", replicas)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise TfpackError(f"`{name}` must be a positive integer. "
                              f"Received: {name}={value!r}")
    if batch_size % replicas:
        raise TfpackError("`replicas` must divide `batch_size` (each replica takes "
                          "an equal slice of a step). Received: "
                          f"batch_size={batch_size}, replicas={replicas}")
    if costs.ndim != 1 or (costs < 0).any():
        raise TfpackError("`costs` must be a 1-D array of non-negative pack costs. "
                          f"Received: costs of shape {costs.shape}")


def _deal(step_costs, replicas, rng):
    """Serpentine deal, column indices ``[steps, R, m]``."""
    steps, batch = step_costs.shape
    # Seeded tie-breaking, then largest first.
    shuffled = rng.permuted(np.tile(np.arange(batch), (steps, 1)), axis=1)
    ranked = np.take_along_axis(
        shuffled, np.argsort(-np.take_along_axis(step_costs, shuffled, axis=1),
                             axis=1, kind="stable"), axis=1)
    rounds = ranked.reshape(steps, batch // replicas, replicas)
    rounds[:, 1::2] = rounds[:, 1::2, ::-1]
    return rounds.transpose(0, 2, 1).copy()


def _swap(groups, step_costs, rounds):
    """Step 2 of the module docstring, in place on ``groups`` ``[steps, R, m]``."""
    steps, _, m = groups.shape
    rows = np.arange(steps)
    for _ in range(rounds):
        values = np.take_along_axis(step_costs[:, None, :], groups.reshape(steps, 1, -1),
                                    axis=2).reshape(groups.shape)
        sums = values.sum(axis=2)
        hi, lo = sums.argmax(axis=1), sums.argmin(axis=1)
        gap = sums[rows, hi] - sums[rows, lo]
        d = values[rows, hi][:, :, None] - values[rows, lo][:, None, :]
        gain = np.where((d > 0) & (d < gap[:, None, None]),
                        np.minimum(d, gap[:, None, None] - d), 0).reshape(steps, -1)
        pick = gain.argmax(axis=1)
        moving = np.flatnonzero(gain[rows, pick] > 0)
        if moving.size == 0:
            break
        i, j = pick[moving] // m, pick[moving] % m
        a = groups[moving, hi[moving], i].copy()
        groups[moving, hi[moving], i] = groups[moving, lo[moving], j]
        groups[moving, lo[moving], j] = a
    return groups


def _ratios(sums, means):
    ratio = np.where(means > 0, sums / np.where(means > 0, means, 1), 1.0)
    return float(ratio.mean()), float(ratio.max())


def split_replicas(costs, batch_size: int, replicas: int, *, seed: int = 0,
                   rounds: int = 64) -> tuple[np.ndarray, ReplicaBalance]:
    """The place of each pack once every step's packs are split among replicas by cost.

    Args:
        costs: int ``[packs]`` in step order (`pack_costs`): steps are
            consecutive groups of ``batch_size``; a last partial step stays.
        batch_size: packs a step (all replicas together).
        replicas: replicas a step; must divide ``batch_size``. Replica
            ``r`` of a step takes its packs ``r * m .. (r + 1) * m - 1``,
            ``m = batch_size / replicas``.
        seed: tie-breaking; same costs and seed, same places.
        rounds: swap rounds at most.

    Returns:
        ``(positions, report)``: int64 ``[packs]`` (pack ``i`` goes to place
        ``positions[i]``, inside its own step) and a `ReplicaBalance`.
    """
    costs = np.asarray(costs, np.int64)
    _check(costs, batch_size, replicas)
    steps = costs.size // batch_size
    step_costs = costs[:steps * batch_size].reshape(steps, batch_size)
    m = batch_size // replicas
    rng = np.random.default_rng(seed)
    chunk = max(1, _BLOCK // (m * m))
    groups = np.concatenate(
        [_swap(_deal(step_costs[s:s + chunk], replicas, rng), step_costs[s:s + chunk],
               rounds) for s in range(0, steps, chunk)]
        or [np.zeros((0, replicas, m), np.int64)])
    order = groups.reshape(steps, batch_size) + (np.arange(steps) * batch_size)[:, None]
    positions = np.arange(costs.size, dtype=np.int64)
    positions[order.ravel()] = np.arange(steps * batch_size)
    if steps == 0:
        return positions, ReplicaBalance(replicas, 0, *(1.0,) * 9, 0.0)
    means = step_costs.sum(axis=1) / replicas
    before = step_costs.reshape(steps, replicas, m).sum(axis=2).max(axis=1)
    after = np.take_along_axis(step_costs, groups.reshape(steps, -1), axis=1) \
        .reshape(steps, replicas, m).sum(axis=2).max(axis=1)
    bound = replica_bound(step_costs, replicas)
    total = means.sum() or 1.0
    return positions, ReplicaBalance(
        replicas, steps, *_ratios(before, means), *_ratios(after, means),
        *_ratios(bound, means), float(before.sum() / total), float(after.sum() / total),
        float(bound.sum() / total), float(bound[-1]))
