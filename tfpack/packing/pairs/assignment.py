"""Map concrete (input, target) pairs to the packs of a two-length plan.

A `PairPackingPlan` says how many packs hold which pairs of lengths; a
`PairAssignment` says which examples go into each pack. For inputs
``[6, 2, 6, 2]``, targets ``[1, 3, 1, 3]`` and the plan ``2 x ((6, 1), (2, 3))``
(limits 8 and 4), one assignment is::

    order  = [0, 1, 2, 3]   # examples, pack by pack, largest pair first
    splits = [0, 2, 4]      # pack p holds order[splits[p]:splits[p + 1]]

Examples of one (input, target) length are spread at random (``seed``) over
the slots of that length, and packs are shuffled. The lengths must be those
the plan was made for: an example without a slot is refused.

>>> import numpy as np
>>> from tfpack.packing import plan
>>> inputs, targets = np.array([6, 2, 6, 2]), np.array([1, 3, 1, 3])
>>> counts = np.zeros((8, 4), dtype=np.int64); np.add.at(counts, (inputs - 1, targets - 1), 1)
>>> a = plan(counts, max_length=(8, 4), max_sequences_per_pack=2).assign(inputs, targets, seed=0)
>>> a.num_packs, [sorted(inputs[a.pack(p)].tolist()) for p in range(a.num_packs)]
(2, [[2, 6], [2, 6]])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["PairAssignment", "assign_pairs"]


@dataclasses.dataclass(frozen=True, eq=False)
class PairAssignment:
    """Which examples share each pack.

    Attributes:
        order: int64 ``[n]``, every example index once, grouped pack by pack,
            largest pair (input, then target length) first within a pack.
        splits: int64 ``[num_packs + 1]``; pack ``p`` holds ``order[splits[p]:splits[p + 1]]``.
    """

    order: np.ndarray
    splits: np.ndarray

    @property
    def num_packs(self) -> int:
        return self.splits.size - 1

    def pack(self, p: int) -> np.ndarray:
        """Indices of the examples in pack ``p``."""
        return self.order[self.splits[p]:self.splits[p + 1]]


def assign_pairs(plan, input_lengths, target_lengths, seed: int = 0) -> PairAssignment:
    """Examples to packs of ``plan`` (a `PairPackingPlan`): see the module notes."""
    max_input, max_target = plan.max_length
    inputs, targets = np.asarray(input_lengths), np.asarray(target_lengths)
    if inputs.ndim != 1 or inputs.shape != targets.shape or not (
            np.issubdtype(inputs.dtype, np.integer) and np.issubdtype(targets.dtype, np.integer)):
        raise TfpackError("`input_lengths` and `target_lengths` must be 1-D integer arrays of one length. "
                          f"Received: shapes {inputs.shape} and {targets.shape}")
    outside = (inputs < 1) | (inputs > max_input) | (targets < 1) | (targets > max_target)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise TfpackError(f"Every pair's lengths must lie in 1..{max_input} and 1..{max_target} (the plan's "
                          f"max_length). Received: pair {i} = ({int(inputs[i])}, {int(targets[i])})")
    codes = (inputs.astype(np.int64) - 1) * max_target + targets - 1
    have = np.bincount(codes, minlength=max_input * max_target)
    extra = np.flatnonzero(have > plan.histogram.reshape(-1))
    if extra.size:
        code = int(extra[0])
        raise TfpackError(
            "The pairs must be those the plan was made for: every pair needs a slot of its lengths. "
            f"Received: {int(have[code])} pairs of input length {code // max_target + 1} and target length "
            f"{code % max_target + 1}, for {int(plan.histogram.reshape(-1)[code])} slots")
    rng = np.random.default_rng(seed)
    depths = np.array([len(s) for s in plan.strategies], dtype=np.int64)
    slot_code = np.concatenate([np.tile([(a - 1) * max_target + b - 1 for a, b in s], int(c))
                                for s, c in zip(plan.strategies, plan.counts.tolist())])
    packs = int(plan.counts.sum())
    rename = rng.permutation(packs)  # packs shuffled, so one strategy's packs are not adjacent
    slot_pack = rename[np.repeat(np.arange(packs), np.repeat(depths, plan.counts))]
    slot_rank = np.arange(slot_code.size) - np.repeat(np.cumsum(np.repeat(depths, plan.counts)) -
                                                      np.repeat(depths, plan.counts), np.repeat(depths, plan.counts))
    # Slots of one code and examples of it (shuffled), matched in order.
    slots = np.lexsort((slot_pack, slot_code))
    examples = np.lexsort((rng.permutation(codes.size), codes))
    first = np.searchsorted(slot_code[slots], codes[examples])  # first slot of each example's code
    rank = np.arange(codes.size) - np.searchsorted(codes[examples], codes[examples])
    chosen = slots[first + rank]
    by_pack = np.lexsort((slot_rank[chosen], slot_pack[chosen]))
    order = examples[by_pack]
    splits = np.searchsorted(slot_pack[chosen][by_pack], np.arange(packs + 1))
    return PairAssignment(order.astype(np.int64), splits.astype(np.int64))
