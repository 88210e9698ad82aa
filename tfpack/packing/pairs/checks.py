"""The invariants every two-length plan satisfies, checked in one place.

`tfpack.packing.pairs.plan` runs them on what a planner returns and
`PairPackingPlan.from_json` on what a file holds:

1. every strategy is a non-empty tuple of ``(input length, target length)``
   pairs in ``1..Le`` x ``1..Ld``, largest first (by input, then target);
2. a strategy's inputs sum to at most ``Le`` and its targets to at most ``Ld``;
3. no strategy holds more than ``max_sequences_per_pack`` pairs (when limited);
4. counts are positive integers, one per strategy;
5. the strategies hold exactly one slot per pair of the histogram: every pair
   has a place, and no pack has an empty one.

>>> import numpy as np
>>> counts = np.zeros((8, 6), dtype=np.int64); counts[4, 1] = 2; counts[2, 3] = 2
>>> check_pair_plan([((5, 2), (3, 4))], np.array([2]), counts, max_length=(8, 6),
...                 max_sequences_per_pack=2)
>>> check_pair_plan([((5, 4), (3, 4))], np.array([2]), counts, max_length=(8, 6),
...                 max_sequences_per_pack=2)
Traceback (most recent call last):
...
tfpack.errors.TfpackError: The targets of a strategy must sum to at most Ld=6. Received: strategies[0]=[(5, 4), (3, 4)]
"""

from __future__ import annotations

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing.compiled import kernels


def check_pair_plan(strategies, counts, histogram: np.ndarray, *, max_length: tuple[int, int],
                    max_sequences_per_pack: int | None) -> None:
    """Raise `TfpackError` naming the first broken invariant; else return None.

    Invariants 1-3 and the slots are checked in one pass over the strategies,
    compiled (``pair_slots`` in `tfpack/packing/_kernels.c`: a plan of 1e6
    pairs has some 2e5 distinct packs, 0.2 s in numpy, under 0.02 s there);
    `_broken` then says which rule the first strategy it refuses breaks.
    """
    max_input, max_target = max_length
    counts = np.asarray(counts)
    if counts.ndim != 1 or len(strategies) != counts.size:
        raise TfpackError("A plan must have one count per strategy. "
                          f"Received: {len(strategies)} strategies and counts of shape {counts.shape}")
    if counts.size and (not np.issubdtype(counts.dtype, np.integer) or counts.min() < 1):
        raise TfpackError(f"Every strategy count must be a positive integer. Received: counts={counts[:10].tolist()}")
    depth = max_sequences_per_pack or np.iinfo(np.int64).max
    index, slots = kernels.pair_slots(strategies, np.ascontiguousarray(counts, dtype=np.int64).tobytes(),
                                      max_input, max_target, max_sequences_per_pack or -1)
    if index >= 0:
        rule = _broken(strategies[index], max_input, max_target, depth)
        raise TfpackError(f"{rule}. Received: strategies[{index}]={list(strategies[index])}")
    slots = np.frombuffer(slots, dtype=np.int64).reshape(max_input, max_target)
    difference = slots - histogram
    for sign, what in ((-1, "without a slot"), (1, "of slots without a pair")):
        where = np.argwhere(sign * difference > 0)
        if where.size:
            i, j = where[0]
            raise TfpackError(
                "A plan must hold exactly one slot for every pair of the histogram. Received: "
                f"{int((sign * difference)[sign * difference > 0].sum())} {what}, e.g. "
                f"{int(abs(difference[i, j]))} of input length {i + 1} and target length {j + 1}")


def _broken(strategy, max_input: int, max_target: int, depth: int) -> str | None:
    """The first invariant (1-3 of the module notes) ``strategy`` breaks, or None."""
    pairs = list(strategy)
    if not pairs or not all(isinstance(p, tuple) and len(p) == 2 and all(type(x) is int for x in p)
                            for p in pairs):
        return "A strategy must be a non-empty tuple of (input length, target length) integer pairs"
    if not all(1 <= a <= max_input and 1 <= b <= max_target for a, b in pairs):
        return f"A strategy's pairs must lie in 1..Le={max_input} and 1..Ld={max_target}"
    if sorted(pairs, reverse=True) != pairs:
        return "A strategy must list its pairs largest first (by input, then target length)"
    if sum(a for a, _ in pairs) > max_input:
        return f"The inputs of a strategy must sum to at most Le={max_input}"
    if sum(b for _, b in pairs) > max_target:
        return f"The targets of a strategy must sum to at most Ld={max_target}"
    if len(pairs) > depth:
        return f"A strategy must hold at most max_sequences_per_pack={depth} pairs"
    return None
