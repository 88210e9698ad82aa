"""How good a two-length plan is: the one-length metrics, per side.

With ``P`` packs of ``Le`` encoder and ``Ld`` decoder tokens, ``n`` pairs,
``Te`` input and ``Td`` target tokens:

- ``packs``, ``sequences`` (pairs), ``input_tokens``, ``target_tokens``;
- ``input_padding_tokens`` = ``P * Le - Te``, ``target_padding_tokens`` likewise;
- ``input_efficiency`` = ``Te / (P * Le)``, ``target_efficiency`` likewise;
- ``packing_factor`` = ``n / P``: the speed-up over one pair a row;
- ``strategies_used``, ``max_depth_used``, ``solve_seconds``;
- ``lower_bound_packs``: a proven lower bound on ``P`` for any plan under the
  same limits, the larger of the planner's and `bounds.simple`;
  ``lower_bound_kind`` names what proves it (`bounds.KINDS`).

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64); counts[5, 0] = 2; counts[1, 2] = 2
>>> m = compute_pair_metrics([((6, 1), (2, 3))], np.array([2]), counts, max_length=(8, 4),
...                          max_sequences_per_pack=2, solve_seconds=0.0)
>>> m["packs"], m["input_efficiency"], m["target_efficiency"], m["lower_bound_packs"]
(2, 1.0, 1.0, 2)
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.pairs import bounds

__all__ = ["PAIR_METRIC_NAMES", "compute_pair_metrics"]

PAIR_METRIC_NAMES = (
    "packs", "sequences", "input_tokens", "target_tokens", "input_padding_tokens", "target_padding_tokens",
    "input_efficiency", "target_efficiency", "packing_factor", "strategies_used", "max_depth_used",
    "solve_seconds", "lower_bound_packs", "lower_bound_kind",
)


def compute_pair_metrics(strategies, counts, histogram: np.ndarray, *, max_length, max_sequences_per_pack,
                         solve_seconds: float, lower_bound_packs=None, lower_bound_kind=None) -> dict:
    """All the metrics of the module notes, as plain Python numbers.

    A stored ``lower_bound_packs`` counts only with a known kind (`bounds.KINDS`).
    """
    max_input, max_target = max_length
    packs = int(np.sum(counts))
    tokens = (int(histogram.sum(axis=1) @ np.arange(1, max_input + 1)),
              int(histogram.sum(axis=0) @ np.arange(1, max_target + 1)))
    found = bounds.simple(histogram, (max_input, max_target, max_sequences_per_pack))
    if lower_bound_kind in bounds.KINDS and isinstance(lower_bound_packs, int) and not isinstance(
            lower_bound_packs, bool):
        found[lower_bound_kind] = max(found.get(lower_bound_kind, 0), lower_bound_packs)
    bound, kind = bounds.strongest(found)
    return {
        "packs": packs,
        "sequences": int(histogram.sum()),
        "input_tokens": tokens[0],
        "target_tokens": tokens[1],
        "input_padding_tokens": packs * max_input - tokens[0],
        "target_padding_tokens": packs * max_target - tokens[1],
        "input_efficiency": tokens[0] / (packs * max_input),
        "target_efficiency": tokens[1] / (packs * max_target),
        "packing_factor": int(histogram.sum()) / packs,
        "strategies_used": len(strategies),
        "max_depth_used": max(map(len, strategies)),
        "solve_seconds": float(solve_seconds),
        "lower_bound_packs": int(bound),
        "lower_bound_kind": kind,
    }
