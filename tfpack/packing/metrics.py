"""How good a packing plan is: the numbers of the paper's Table 1.

Definitions (``L`` = max length, ``n`` = sequences, ``T`` = their real tokens,
``P`` = packs):

- ``tokens``: ``T``, real (non-padding) tokens of the dataset.
- ``padding_tokens``: ``P * L - T``.
- ``efficiency``: ``T / (P * L)``, the fraction of real tokens in the packs.
- ``packing_factor``: ``n / P``, sequences per pack on average; also the
  speed-up of this plan over one sequence per row.
- ``speedup_upper_bound``: ``n * L / T``, the speed-up if no padding were
  left at all (the paper's "theoretical speed-up", 2.013 on Wikipedia-512);
  no plan's ``packing_factor`` exceeds it.
- ``lower_bound_packs``: a proven lower bound on ``P`` for any plan under the
  same limits: the larger of the algorithm's own (the LP bound of ``optimal``)
  when it gives one and `simple_lower_bound`.
- ``lower_bound_kind``: what proves it: ``"tokens"`` (``ceil(T / L)``),
  ``"sequences"`` (``ceil(n / K)``), ``"windows"`` (sequences of ``L`` one a
  pack, the others ``K`` a pack), ``"long"`` (sequences longer than
  ``L / 2``, one a pack, and what cannot share their packs), ``"pairs"`` (at
  most two sequences a pack: the optimum itself, which a greedy finds) or
  ``"lp"`` (an LP relaxation: ``optimal``'s column generation, possibly on
  lengths rounded down).

Example:

>>> import numpy as np
>>> m = compute_metrics([(5, 3), (8,)], np.array([2, 1]), np.array([0, 0, 2, 0, 2, 0, 0, 1]),
...                     max_length=8, max_sequences_per_pack=2, solve_seconds=0.0)
>>> m["packs"], m["efficiency"], m["packing_factor"]
(3, 1.0, 1.6666666666666667)
"""

from __future__ import annotations

import numpy as np

__all__ = ["METRIC_NAMES", "compute_metrics", "simple_lower_bound"]

METRIC_NAMES = (
    "packs",
    "sequences",
    "tokens",
    "padding_tokens",
    "efficiency",
    "packing_factor",
    "speedup_upper_bound",
    "strategies_used",
    "max_depth_used",
    "solve_seconds",
    "lower_bound_packs",
    "lower_bound_kind",
)


def simple_lower_bound(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None) -> int:
    """A valid lower bound on the packs any plan needs.

    The largest of: packs to hold all tokens, packs to hold all sequences at
    ``max_sequences_per_pack`` per pack, and the sequences longer than half a pack (no two
    of them share one).
    """
    lengths = np.arange(1, max_length + 1)
    tokens = int(histogram @ lengths)
    sequences = int(histogram.sum())
    bounds = [
        -(-tokens // max_length),  # integers: a float quotient is off past 2**53
        int(histogram[lengths * 2 > max_length].sum()),
    ]
    if max_sequences_per_pack is not None:
        bounds.append(-(-sequences // max_sequences_per_pack))
    return max(bounds)


def compute_metrics(
    strategies,
    counts: np.ndarray,
    histogram: np.ndarray,
    *,
    max_length: int,
    max_sequences_per_pack: int | None,
    solve_seconds: float,
    lower_bound_packs: float | None = None,
    lower_bound_kind: str | None = None,
) -> dict:
    """All DESIGN.md plan metrics, as plain Python numbers (and the bound's kind).

    ``lower_bound_kind`` names what proves the algorithm's ``lower_bound_packs``;
    where `simple_lower_bound` is at least as strong, its kind is reported.
    """
    packs = int(np.sum(counts))
    sequences = int(histogram.sum())
    tokens = int(histogram @ np.arange(1, max_length + 1))
    # Both bounds are valid, so their maximum is too.
    simple = simple_lower_bound(histogram, max_length, max_sequences_per_pack)
    if lower_bound_packs is None or lower_bound_kind is None or simple >= lower_bound_packs:
        lower_bound_kind = _simple_kind(histogram, max_length, max_sequences_per_pack, simple)
    lower_bound_packs = simple if lower_bound_packs is None else max(simple, lower_bound_packs)
    return {
        "packs": packs,
        "sequences": sequences,
        "tokens": tokens,
        "padding_tokens": packs * max_length - tokens,
        "efficiency": tokens / (packs * max_length),
        "packing_factor": sequences / packs,
        "speedup_upper_bound": sequences * max_length / tokens,
        "strategies_used": len(strategies),
        "max_depth_used": max(map(len, strategies)),
        "solve_seconds": float(solve_seconds),
        "lower_bound_packs": float(lower_bound_packs) if not float(lower_bound_packs).is_integer()
        else int(lower_bound_packs),
        "lower_bound_kind": lower_bound_kind,
    }


def _simple_kind(histogram, max_length, max_sequences_per_pack, simple: int) -> str:
    """Which bound of `simple_lower_bound` is ``simple`` (the first that is, in its order)."""
    lengths = np.arange(1, max_length + 1)
    if -(-int(histogram @ lengths) // max_length) == simple:
        return "tokens"
    if max_sequences_per_pack is not None and \
            -(-int(histogram.sum()) // max_sequences_per_pack) == simple:
        return "sequences"
    return "long"
