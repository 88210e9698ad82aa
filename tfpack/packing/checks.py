"""The invariants every packing plan satisfies, checked in one place.

`tfpack.packing.plan` runs them on what an algorithm returns and
`PackingPlan.from_json` on what a file holds:

1. every strategy is a non-empty tuple of lengths in ``1..max_length``,
   longest first, summing to at most ``max_length``;
2. no strategy holds more than ``max_sequences_per_pack`` sequences (when limited);
3. counts are positive integers, one per strategy;
4. the strategies hold at least as many slots of each length as the
   histogram has sequences of it (extra slots become padding).

Example:

>>> import numpy as np
>>> from tfpack.packing.checks import check_plan
>>> check_plan([(5, 3), (8,)], np.array([2, 1]), np.array([0, 0, 2, 0, 2, 0, 0, 1]),
...            max_length=8, max_sequences_per_pack=2)
"""

from __future__ import annotations

import itertools

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["check_plan", "flatten", "slot_counts"]


def flatten(strategies) -> tuple[np.ndarray, np.ndarray]:
    """Strategies as flat int64 lengths and int64 ``[len(strategies) + 1]`` offsets."""
    depths = np.fromiter(map(len, strategies), dtype=np.int64, count=len(strategies))
    offsets = np.zeros(len(strategies) + 1, dtype=np.int64)
    np.cumsum(depths, out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(strategies), dtype=np.int64, count=int(offsets[-1]))
    return flat, offsets


def slot_counts(strategies, counts: np.ndarray, max_length: int) -> np.ndarray:
    """int64 ``[max_length]``: slots of each length over all packs of the plan."""
    flat, offsets = flatten(strategies)
    weights = np.repeat(np.asarray(counts, dtype=np.int64), np.diff(offsets))
    # Summed in int64, not by `np.bincount`'s float64 weights: counts past 2**53 (a
    # histogram may count up to ~2**62 sequences) lost their last units there, and a
    # correct plan was refused for "sequences without a slot".
    slots = np.zeros(max_length + 1, dtype=np.int64)
    np.add.at(slots, flat, weights)
    return slots[1:]


def check_plan(
    strategies,
    counts: np.ndarray,
    histogram: np.ndarray,
    *,
    max_length: int,
    max_sequences_per_pack: int | None,
) -> None:
    """Raise `TfpackError` naming the first broken invariant; else return None."""
    counts = np.asarray(counts)
    if counts.ndim != 1 or len(strategies) != counts.size:
        raise TfpackError(
            "A plan must have one count per strategy. "
            f"Received: {len(strategies)} strategies and counts of shape {counts.shape}"
        )
    if counts.size and (not np.issubdtype(counts.dtype, np.integer) or counts.min() < 1):
        raise TfpackError(
            f"Every strategy count must be a positive integer. Received: counts={counts[:10].tolist()}"
        )
    try:
        flat, offsets = flatten(strategies)
    except (TypeError, ValueError):
        raise TfpackError(
            "Every strategy must be a list of integer lengths. "
            f"Received: strategies starting {list(strategies)[:3]}"
        ) from None
    depths = np.diff(offsets)
    if np.any(depths < 1):
        index = int(np.flatnonzero(depths < 1)[0])
        raise TfpackError(f"A strategy must hold at least one length. Received: strategies[{index}]=[]")
    owner = np.repeat(np.arange(len(strategies)), depths)
    sums = np.add.reduceat(flat, offsets[:-1]) if flat.size else np.zeros(0, np.int64)
    descending = np.ones(flat.size, dtype=bool)
    descending[1:] = (flat[1:] <= flat[:-1]) | (owner[1:] != owner[:-1])
    problems = [
        (np.bincount(owner[(flat < 1) | (flat > max_length)], minlength=len(strategies)) > 0,
         f"A strategy must list lengths between 1 and max_length={max_length}"),
        (sums > max_length,
         f"The lengths of a strategy must sum to at most max_length={max_length}"),
        (depths > (max_sequences_per_pack or np.iinfo(np.int64).max),
         f"A strategy must hold at most max_sequences_per_pack={max_sequences_per_pack} sequences"),
        (np.bincount(owner[~descending], minlength=len(strategies)) > 0,
         "A strategy must list its lengths longest first"),
    ]
    for bad, rule in problems:
        if np.any(bad):
            index = int(np.flatnonzero(bad)[0])
            raise TfpackError(f"{rule}. Received: strategies[{index}]={list(strategies[index])}")
    missing = np.asarray(histogram) - slot_counts(strategies, counts, max_length)
    short = np.flatnonzero(missing > 0)
    if short.size:
        length = int(short[0]) + 1
        raise TfpackError(
            "A plan must hold a slot for every sequence of the histogram. "
            f"Received: {int(missing[short].sum())} sequences without a slot, "
            f"e.g. {int(missing[short[0]])} of length {length}"
        )
