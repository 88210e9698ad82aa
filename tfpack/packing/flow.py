"""The offline packing flow, in one place: plan or algorithm, placement, K and M.

Offline packing (the `tfpack.data.pack` transform without ``window``,
``tfpack pack`` on the local engine and on Beam) runs the same steps on the
examples' lengths; each step is here once, numpy only:

1. `choose_plan`: take the given plan (checked against ``L``) or plan the
   histogram with the algorithm (default ``"optimal"``); not both.
2. `tfpack.packing.placement`: each example's pack and slot from its length
   and rank, packs shuffled by ``seed`` (or kept in plan order), so the
   engines place examples identically; with ``balance=`` and
   ``batch_size=``, packs ordered so that every batch of ``batch_size``
   holds the same number of sequences or tokens (`tfpack.packing.balance`).
3. `sequences_per_pack` (``K``) and `predictions_per_pack` (``M``): the
   given limits checked against what the packs need, or inferred from it.

`offline_packs` runs the three on an array of lengths (the tf.data transform
and the local engine); the Beam engine runs them step by step on per-file
data (`tfpack.engines.beam.steps`).

Example:

>>> import numpy as np
>>> p = choose_plan(np.array([0, 2, 0, 1]), max_length=4, max_sequences_per_pack=2,
...                 algorithm="ffd", seed=0)
>>> p.strategies, sequences_per_pack(2, None), predictions_per_pack(0, None)
([(4,), (2, 2)], 2, 1)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.packing.windows import (
    DEFAULT_ALGORITHM,
    check_lengths,
    check_predictions,
    predictions_error,
)
from tfpack.errors import TfpackError
from tfpack.packing.histograms import histogram as length_histogram
from tfpack.packing.plans import plan as make_plan

__all__ = ["OfflinePacks", "offline_packs", "check_source", "check_plan_fits", "choose_plan",
           "sequences_per_pack", "predictions_per_pack", "shard_size"]


@dataclasses.dataclass(frozen=True, eq=False)
class OfflinePacks:
    """The packs of a dataset: pack ``p`` holds examples ``order[splits[p]:splits[p + 1]]``.

    Attributes:
        plan: the `PackingPlan` used.
        order, splits: int64, as `tfpack.packing.Assignment`, packs shuffled
            unless ``shuffle=False``.
        max_sequences_per_pack: ``K``.
        max_predictions_per_pack: ``M`` (``None`` without prediction counts).
        balance: the `tfpack.packing.balance.BatchBalance` of the pack order
            (``balance=`` given), else ``None``.
    """

    plan: object
    order: np.ndarray
    splits: np.ndarray
    max_sequences_per_pack: int
    max_predictions_per_pack: int | None
    balance: object = None


def offline_packs(lengths, predictions=None, *, max_length: int,
                  max_sequences_per_pack: int | None, max_predictions_per_pack: int | None = None,
                  plan=None, algorithm: str | None = None, seed: int = 0,
                  shuffle: bool = True, balance=None,
                  batch_size: int | None = None) -> OfflinePacks:
    """Steps 1-3 on the lengths (and masked-LM prediction counts) of every example.

    >>> packs = offline_packs(np.array([3, 1, 2, 2]), np.array([1, 0, 1, 1]), max_length=4,
    ...                       max_sequences_per_pack=2, algorithm="ffd", shuffle=False)
    >>> packs.order.tolist(), packs.splits.tolist(), packs.max_predictions_per_pack
    ([0, 1, 2, 3], [0, 2, 4], 2)
    """
    lengths = np.asarray(lengths, np.int64)
    check_lengths(lengths, max_length, first_index=0)
    chosen = choose_plan(length_histogram(lengths, max_length), max_length=max_length,
                         max_sequences_per_pack=max_sequences_per_pack, plan=plan,
                         algorithm=algorithm, seed=seed)
    assignment = chosen.assign(lengths, seed=seed, shuffle=shuffle, balance=balance,
                               batch_size=batch_size)
    order = np.asarray(assignment.order, np.int64)
    splits = np.asarray(assignment.splits, np.int64)
    K = sequences_per_pack(int(np.diff(splits).max()), max_sequences_per_pack)
    M = None
    if predictions is not None:
        M = check_predictions(predictions, order, splits, max_predictions_per_pack)
    return OfflinePacks(chosen, order, splits, K, M, assignment.balance)


def shard_size(packs_per_shard: int, batch_size: int | None) -> int:
    """Packs per output shard: whole batches of ``batch_size`` (at least one) when given.

    Shards of whole batches keep each batch in one file, so reading shards
    apart (e.g. one file per worker) keeps the batches.

    >>> shard_size(16384, 48), shard_size(10, 48), shard_size(100, None)
    (16368, 48, 100)
    """
    if not batch_size:
        return packs_per_shard
    return max(packs_per_shard // batch_size, 1) * batch_size


def check_source(plan, algorithm) -> None:
    """A plan or an algorithm, not both."""
    if plan is not None and algorithm is not None:
        raise TfpackError("Pass either `algorithm` or `plan`, not both. "
                          f"Received: algorithm={algorithm!r}, plan=<PackingPlan>")


def check_plan_fits(plan, max_length: int, max_sequences_per_pack: int | None) -> None:
    """A given plan must fit ``L`` and ``K``: checked before any input is read."""
    if plan.max_length > max_length:
        raise TfpackError("`plan.max_length` must be at most `max_length`. "
                          f"Received: plan.max_length={plan.max_length}, max_length={max_length}")
    depth = max((len(s) for s, c in zip(plan.strategies, plan.counts) if c > 0), default=0)
    sequences_per_pack(depth, max_sequences_per_pack)


def choose_plan(histogram, *, max_length: int, max_sequences_per_pack: int | None,
                plan=None, algorithm: str | None = None, seed: int = 0):
    """The `PackingPlan` to pack ``histogram`` with: ``plan`` checked, or a new one."""
    check_source(plan, algorithm)
    if plan is None:
        return make_plan(np.asarray(histogram)[:max_length], max_length,
                         max_sequences_per_pack, algorithm=algorithm or DEFAULT_ALGORITHM,
                         seed=seed)
    if plan.max_length > max_length:
        raise TfpackError("`plan.max_length` must be at most `max_length`. "
                          f"Received: plan.max_length={plan.max_length}, max_length={max_length}")
    return plan


def sequences_per_pack(depth: int, max_sequences_per_pack: int | None) -> int:
    """``K``: the given limit, checked against the deepest pack, or that depth."""
    if max_sequences_per_pack is not None and depth > max_sequences_per_pack:
        raise TfpackError(
            "The plan must put at most `max_sequences_per_pack` sequences in a pack. "
            f"Received: max_sequences_per_pack={max_sequences_per_pack}, plan depth={depth}")
    return int(max_sequences_per_pack or depth)


def predictions_per_pack(most: int, max_predictions_per_pack: int | None, *, pack: int = 0,
                         examples=()) -> int:
    """``M``: the given limit, checked against the most any pack needs, or that (at least 1).

    ``pack`` and ``examples`` name the first pack needing ``most`` in the error.
    """
    if max_predictions_per_pack is None:
        return max(int(most), 1)
    if most > max_predictions_per_pack:
        raise predictions_error(max_predictions_per_pack, pack, list(examples), int(most))
    return int(max_predictions_per_pack)
