"""Lower bounds on the packs any two-length plan needs, each valid on its own.

A pack of pairs is, seen from one side, a pack of that side's lengths: the
inputs of a two-length plan form a one-length plan of the input lengths (limit
``Le``, at most ``K`` a pack), and so do the targets. Every lower bound of the
one-length problem on either projection therefore bounds the two-length one:

- ``input_tokens``, ``target_tokens``: ``ceil(tokens / limit)``;
- ``sequences``: ``ceil(pairs / K)``;
- ``input_long``, ``target_long``: Martello and Toth's L2 on a projection
  (`tfpack.packing.algorithms._bounds.long_bound`);
- ``target_conflict``, ``input_conflict``: pairs that cannot share a pack,
  then the volume of the rest (`conflict`); the one bound here that sees
  both lengths of a pair at once (a pair whose target fills ``Ld`` packs
  alone, whatever its input), the others each see one side;
- ``input_lp``, ``target_lp``: the one-length ``optimal``'s bound on a
  projection (its LP relaxation, column generation, valid when stopped early),
  which the ``optimal`` pair planner computes as it plans;
- ``pair_lp``: the LP relaxation over packs of both lengths at once
  (`_lp_bound`: column generation, Farley's bound, valid when stopped early).
  It alone knows that a pack cannot fill both rows with any mix of pairs;
- ``grid_lp``: the same LP with lengths rounded down to ``Le / G`` and
  ``Ld / G`` tokens (`_grid`: every real pack is a pack of rounded-down
  pairs, so its LP bounds every plan; priced exactly on ``G x G`` units,
  Farley's bound, valid when stopped early). ``optimal`` computes it first at
  up to 4 pairs a pack where tokens need about as many packs as places.
  The ``optimal`` pair planner computes it for histograms of up to 5,000
  non-empty cells (past 2,000 its classes round lengths down, which costs
  some of its strength).

The largest is reported, rounded up (a number of packs is an integer).

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[0, 3] = 3  # three (6, 1) and three (1, 4), limits 8 and 4
>>> simple(counts, (8, 4, None))  # a (1, 4) packs alone, no two (6, 1) share: 6 packs
{'input_tokens': 3, 'target_tokens': 4, 'input_long': 3, 'target_long': 4, 'target_conflict': 6, 'input_conflict': 4}
>>> strongest(simple(counts, (8, 4, 2)))
(6, 'target_conflict')
>>> counts[0, 3] = 0; counts[0, 1] = 3  # three (6, 1), three (1, 2): a pack holds one of each
>>> conflict(counts, (8, 4, None))
{'target_conflict': 3, 'input_conflict': 3}
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms._bounds import long_bound

KINDS = ("input_tokens", "target_tokens", "sequences", "input_long", "target_long",
         "target_conflict", "input_conflict", "input_lp", "target_lp", "pair_lp", "grid_lp")


def simple(counts: np.ndarray, limits) -> dict[str, int]:
    """The cheap bounds of the module notes, by kind."""
    max_input, max_target, depth = limits
    inputs, targets = counts.sum(axis=1), counts.sum(axis=0)
    bounds = {
        "input_tokens": -(-int(inputs @ np.arange(1, max_input + 1)) // max_input),
        "target_tokens": -(-int(targets @ np.arange(1, max_target + 1)) // max_target),
    }
    if depth is not None:
        bounds["sequences"] = -(-int(counts.sum()) // depth)
    bounds["input_long"] = long_bound(inputs, max_input)
    bounds["target_long"] = long_bound(targets, max_target)
    bounds.update(conflict(counts, limits))
    return bounds


def conflict(counts: np.ndarray, limits) -> dict[str, int]:
    """Packs the pairs that conflict on one row need alone, plus the volume of the rest on the other.

    ``target_conflict``, for each ``1 <= k <= (Ld + 1) // 2``: the pairs ``J``
    whose target exceeds ``Ld - k`` conflict (two of them hold at least
    ``2 (Ld - k + 1) > Ld`` target tokens), so ``|J|`` packs hold them, one
    each. Such a pack has under ``k`` target tokens of room: no pair with a
    target of ``k`` or more joins it, and the pairs with shorter targets
    (``R``) put at most ``sum over J of (Le - a)`` input tokens there. The
    other packs hold the pairs ``Q`` with targets ``k..Ld - k`` and the rest
    of ``R``'s inputs::

        packs >= |J| + ceil((inputs(Q) + max(0, inputs(R) - sum_J (Le - a))) / Le)

    The largest over ``k``; ``input_conflict`` is the same with the rows
    swapped. Generated pairs cut at a limit make it bite: 2.3% of the
    bimodal family's target-heavy pairs are cut to ``Ld`` and each fills a
    pack's targets alone (232,433 packs where the input tokens prove 225,939).
    """
    return {"target_conflict": _conflict(counts, limits[0], limits[1]),
            "input_conflict": _conflict(counts.T, limits[1], limits[0])}


def _conflict(counts: np.ndarray, max_volume: int, max_conflict: int) -> int:
    """`conflict` with conflicts on the columns of ``counts`` (limit ``max_conflict``), volume on its rows."""
    pairs = counts.sum(axis=0).astype(np.int64)  # by conflicting length 1..max_conflict
    volume = (np.arange(1, max_volume + 1) @ counts).astype(np.int64)
    room = pairs * max_volume - volume
    pairs, volume, room = (np.concatenate([[0], np.cumsum(x)]) for x in (pairs, volume, room))
    k = np.arange(1, (max_conflict + 1) // 2 + 1)
    top = max_conflict - k  # J: lengths past top; Q: k..top; R: below k
    alone = pairs[max_conflict] - pairs[top]
    rest = volume[top] - volume[k - 1] + np.maximum(0, volume[k - 1] - (room[max_conflict] - room[top]))
    return int(np.max(alone + -(-rest // max_volume)))


def strongest(bounds: dict[str, int]) -> tuple[int, str]:
    """The largest bound and its kind (ties: the first in `KINDS`)."""
    value = max(bounds.values())
    return value, next(kind for kind in KINDS if bounds.get(kind) == value)
