"""Lower bounds on the packs any two-length plan needs, each valid on its own.

A pack of pairs is, seen from one side, a pack of that side's lengths: the
inputs of a two-length plan form a one-length plan of the input lengths (limit
``Le``, at most ``K`` a pack), and so do the targets. Every lower bound of the
one-length problem on either projection therefore bounds the two-length one:

- ``input_tokens``, ``target_tokens``: ``ceil(tokens / limit)``;
- ``sequences``: ``ceil(pairs / K)``;
- ``input_long``, ``target_long``: Martello and Toth's L2 on a projection
  (`tfpack.packing.algorithms._bounds.long_bound`);
- ``input_lp``, ``target_lp``: the one-length ``optimal``'s bound on a
  projection (its LP relaxation, column generation, valid when stopped early),
  which the ``optimal`` pair planner computes as it plans;
- ``pair_lp``: the LP relaxation over packs of both lengths at once
  (`_lp_bound`: column generation, Farley's bound, valid when stopped early).
  It alone knows that a pack cannot fill both rows with any mix of pairs.
  The ``optimal`` pair planner computes it for histograms of up to 5,000
  non-empty cells (past 2,000 its classes round lengths down, which costs
  some of its strength).

The largest is reported, rounded up (a number of packs is an integer).

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[0, 3] = 3  # three (6, 1) and three (1, 4), limits 8 and 4
>>> simple(counts, (8, 4, None))
{'input_tokens': 3, 'target_tokens': 4, 'input_long': 3, 'target_long': 4}
>>> strongest(simple(counts, (8, 4, 2)))
(4, 'target_tokens')
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms._bounds import long_bound

KINDS = ("input_tokens", "target_tokens", "sequences", "input_long", "target_long",
         "input_lp", "target_lp", "pair_lp")


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
    return bounds


def strongest(bounds: dict[str, int]) -> tuple[int, str]:
    """The largest bound and its kind (ties: the first in `KINDS`)."""
    value = max(bounds.values())
    return value, next(kind for kind in KINDS if bounds.get(kind) == value)
