"""Numpy side of packing: plan a window, shuffle, shard and check assignments.

An assignment is ``(order, splits)`` as in `tfpack.packing.Assignment`: pack
``p`` holds examples ``order[splits[p]:splits[p + 1]]``. These helpers turn
the planner's assignment into the stream a worker emits (whole packs
shuffled, padded or cut to a multiple, strided across workers) and check it
against ``L``, ``K`` and ``M`` before any tensor is built. No TensorFlow.

Example:

>>> import numpy as np
>>> order, splits = np.array([2, 0, 1]), np.array([0, 2, 3])
>>> permute_packs(order, splits, np.array([1, 0]))
(array([1, 2, 0]), array([0, 1, 3]))
>>> fit_to_multiple(order, splits, 3, "pad")[1]
array([0, 2, 3, 3])
"""

from __future__ import annotations

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing.histograms import histogram
from tfpack.packing.plans import plan as make_plan
from tfpack.params import Anything, InstanceOf, Integer, validate_params

__all__ = ["plan_window", "streaming_metrics", "permute_packs", "fit_to_multiple",
           "take_worker", "check_lengths", "check_predictions", "empty_dataset_error",
           "length_error", "predictions_error",
           "DEFAULT_ALGORITHM"]

# Planner used when neither `plan` nor `algorithm` is given.
DEFAULT_ALGORITHM = "optimal"


def empty_dataset_error() -> TfpackError:
    """The error for a dataset without examples."""
    return TfpackError(
        "The dataset to pack must hold at least one example. Received: an empty dataset")


def check_lengths(lengths: np.ndarray, max_length: int, first_index: int) -> None:
    """Every length in ``[1, max_length]``, else an error naming the first bad example."""
    bad = np.flatnonzero((lengths > max_length) | (lengths < 1))
    if bad.size:
        i = int(bad[0])
        raise length_error(bad.size, first_index + i, int(lengths[i]), max_length)


def length_error(count: int, index: int, length: int, max_length: int) -> TfpackError:
    """The error for ``count`` examples outside ``[1, max_length]``, the first at ``index``."""
    return TfpackError(
        f"Every example must hold 1 to max_length={max_length} tokens; "
        f"{count} do not (pass truncate=True to cut long ones). "
        f"Received: example {index} with length={length}")


def check_predictions(counts: np.ndarray, order, splits, M, first_index: int = 0):
    """``M`` checked (or, when ``None``, computed) from per-example counts.

    ``first_index``: the stream index of ``counts[0]``, for the message.
    """
    totals = np.concatenate([[0], np.cumsum(np.asarray(counts)[order])])
    per_pack = totals[splits[1:]] - totals[splits[:-1]]  # empty packs count 0
    most = int(per_pack.max()) if per_pack.size else 0
    if M is None:
        return max(most, 1)
    if most > M:
        p = int(np.argmax(per_pack))
        raise predictions_error(M, p, (order[splits[p]:splits[p + 1]] + first_index).tolist(),
                                most)
    return M


def predictions_error(M: int, pack: int, examples: list[int], most: int) -> TfpackError:
    """The error for pack ``pack`` (holding ``examples``) with ``most`` > ``M`` predictions."""
    return TfpackError(
        f"Every pack must hold at most max_predictions_per_pack={M} masked-LM "
        f"predictions. Received: pack {pack} (examples {examples}) with {most} predictions")


def plan_window(lengths, max_length, max_sequences_per_pack, algorithm, *, seed=0,
                first_index=0):
    """Plan and assign one window of example lengths (numpy in, numpy out).

    Returns ``(order, splits)`` as in `tfpack.packing.Assignment`.

    >>> import numpy as np
    >>> order, splits = plan_window(np.array([3, 5, 2]), 8, 2, "ffd")
    >>> len(splits) - 1
    2
    """
    lengths = np.asarray(lengths, np.int64)
    check_lengths(lengths, max_length, first_index)
    plan = make_plan(histogram(lengths, max_length), max_length,
                     max_sequences_per_pack, algorithm=algorithm, seed=seed)
    assignment = plan.assign(lengths, seed=seed)
    return (np.asarray(assignment.order, np.int64), np.asarray(assignment.splits, np.int64))


@validate_params({
    "lengths": Anything("sequence lengths (a 1-D array), checked by the planner"),
    "max_length": Integer(1), "max_sequences_per_pack": [None, Integer(1)],
    "window": Integer(1),
    "algorithm": [None, InstanceOf(str, description="a planner name (tfpack.packing)")],
    "seed": Integer(0),
})
def streaming_metrics(lengths, max_length, max_sequences_per_pack, window, algorithm=None,
                      *, seed=0) -> dict:
    """Packs and efficiency that streaming mode reaches on ``lengths``.

    Runs the same per-window planning as ``pack(window=...)`` without
    TensorFlow, so it can be compared with an offline plan on the same data.

    >>> import numpy as np
    >>> streaming_metrics(np.array([3, 5, 2, 6]), 8, 2, window=2, algorithm="ffd")["packs"]
    2
    """
    lengths = np.asarray(lengths, np.int64)
    packs = 0
    for index, start in enumerate(range(0, len(lengths), window)):
        rng_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        _, splits = plan_window(lengths[start:start + window], max_length,
                                max_sequences_per_pack, algorithm or DEFAULT_ALGORITHM,
                                seed=rng_seed,
                                first_index=start)
        packs += len(splits) - 1
    return {"packs": packs, "sequences": int(len(lengths)),
            "efficiency": float(lengths.sum() / (packs * max_length)),
            "packing_factor": float(len(lengths) / packs)}


def permute_packs(order, splits, perm):
    """Reorder whole packs: new pack ``i`` is old pack ``perm[i]``."""
    sizes = np.diff(splits)[perm]
    new_splits = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    starts = np.repeat(splits[:-1][perm], sizes)
    within = np.arange(new_splits[-1]) - np.repeat(new_splits[:-1], sizes)
    return order[starts + within], new_splits


def fit_to_multiple(order, splits, multiple, remainder):
    """Pad with empty packs (or drop the last ones) to a multiple of packs."""
    packs = len(splits) - 1
    extra = -packs % multiple
    if extra == 0:
        return order, splits, 0, 0
    if remainder == "pad":
        return order, np.concatenate([splits, np.full(extra, splits[-1])]), extra, 0
    keep = packs - packs % multiple
    return order[:splits[keep]], splits[:keep + 1], 0, packs - keep


def take_worker(order, splits, worker, num_workers):
    """Packs ``worker, worker + num_workers, ...``: this worker's disjoint share."""
    if num_workers == 1:
        return order, splits
    return permute_packs(order, splits, np.arange(worker, len(splits) - 1, num_workers))
