"""Pricing for the `optimal` planner: a bounded knapsack with at most K items.

Given a value ``y[r]`` for one sequence of length ``lengths[r]`` (the LP duals),
find packs (at most ``max_length`` tokens, at most ``max_sequences_per_pack`` sequences, at
most ``bounds[r]`` copies of length ``lengths[r]``) of largest total value::

    lengths=[2, 3, 5], bounds=[2, 2, 1], values=[.2, .35, .6], max_length=8, depth=3
    -> best value .95 by the pack [5, 3] (rows [1, 2], copies [1, 1]); for the
       anchor 3, [3, 3, 2] (rows [0, 1], copies [1, 2], value .9); for 2, [2, 2]

The dynamic program runs over (sequences used, tokens used) and processes the
lengths in ascending order, each length split into 0/1 items of 1, 2, 4, ...
copies (binary splitting of the copy bound). Because lengths come in ascending
order, the table just before a length is processed gives, for that length as
the *longest* in the pack ("anchor"), the best completion with shorter
sequences. One candidate pack per anchor gives many diverse columns from one
solve, which is what makes column generation converge in few rounds.

Lengths that can never improve a pack are skipped (`_dominated`): a copy of a
length can be swapped for a free copy of a shorter length worth at least as
much, and a pack of at most ``k`` sequences always has one free when ``k`` such
copies exist. Column generation's duals grow with length in plateaus of equal
values, so most lengths of a plateau are skipped; the best value stays exact.
(Ties in ``lengths`` are allowed: "shorter" then means "earlier".)

Two more savings leave the result exact or bounded from above:

- Columns past ``k * l + 1`` (``l`` the longest length so far) are not
  computed: no pack of lengths up to ``l`` fills them, so they repeat the last
  computed column, filled in when a longer length needs them (backtracking
  reads them there too). Short lengths touch a fraction of the table.
- With at most 165 sequences a pack (`OVERSTATES`), the table is float32 (three
  times faster than float64: it moves half the bytes). Every value and every
  multiple of one is rounded *up* to float32, so the table sums overstate the
  values; a sum of at most ``k`` rounded terms is at least the exact sum times
  ``1 - (k + 1) 2**-24``, so the best value is reported multiplied by
  ``1 + 2 (k + 2) 2**-24``: never below the exact best, and at most
  `OVERSTATES` above it. That keeps Farley's bound (``h.y / best``) valid. The
  packs' own values are recomputed in float64 from their copies, and only
  packs worth more than ``min_value`` by that count are returned. ``exact=True``
  runs float64 throughout (the reported best is then exact up to rounding of
  at most ``k`` double additions).

The table, the anchors and the backtracking run compiled
(`tfpack.packing.compiled`, ``tfpack/packing/_kernels.c``: one pass per item
that adds, compares, keeps the larger and records the bit, SSE2 on 8 cells at
a time), and so does `_dominated`'s heap; this module prepares their inputs
(copies, values rounded up, the candidates' threshold) and checks the packs'
values in float64. The kernel makes the same sums and comparisons as the numpy
steps it replaced (tests/packing/knapsack_reference.py, equal bit for bit),
3.5-8x faster on the calls of the suite's plans
(benchmarks/results/planner_kernels.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.packing.algorithms._budget import Budget, OutOfTime
from tfpack.packing.compiled import kernels


@dataclasses.dataclass(frozen=True)
class Pricing:
    """Result of `price`.

    Attributes:
        best_value: the largest value of any feasible pack, or an upper bound
            on it at most `OVERSTATES` (relative) above it (float32 tables; see
            the module notes). With ``exact=True``, exact up to floating point
            rounding of sums of at most depth values.
        patterns: candidate packs, best first, each of value ``> min_value``:
            ``(rows, copies)``, int64 arrays, rows ascending.
        pattern_values: float64 ``[P]`` their values.
    """

    best_value: float
    patterns: list[tuple[np.ndarray, np.ndarray]]
    pattern_values: np.ndarray


def effective_depth(lengths: np.ndarray, bounds: np.ndarray, max_length: int,
                    max_sequences_per_pack: int | None) -> int | None:
    """``max_sequences_per_pack``, or ``None`` when it can never bind (fewer sequences fit anyway)."""
    if max_sequences_per_pack is None:
        return None
    order = np.argsort(lengths, kind="stable")
    copies = np.repeat(lengths[order], np.minimum(bounds[order], max_length))
    most = int(np.searchsorted(np.cumsum(copies), max_length, side="right"))
    return None if most <= max_sequences_per_pack else int(max_sequences_per_pack)


def price(lengths: np.ndarray, bounds: np.ndarray, values: np.ndarray, max_length: int,
          depth: int | None, *, min_value: float, max_patterns: int,
          exact: bool = False, budget: Budget | None = None) -> Pricing:
    """Best packs for the given per-length values.

    Args:
        lengths: int64 ``[n]`` sequence lengths, ascending (distinct, except
            for lengths rounded up to a coarser grid, see `optimal`).
        bounds: int64 ``[n]`` most copies of each length in one pack.
        values: float64 ``[n]`` value of one sequence of each length (>= 0).
        max_length: tokens per pack.
        depth: sequences per pack, or ``None`` for no limit (see
            `effective_depth`).
        min_value: only packs worth more than this are returned.
        max_patterns: at most this many candidate packs (one per anchor).
        exact: run the table in float64 (else in float32 where a pack holds
            few enough sequences for its rounding to stay below ~1e-5).
        budget: checked every 32 lengths.

    Raises:
        OutOfTime: ``budget`` ended first (there is then no result).
    """
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    most = int(max_length // lengths[0]) if depth is None else depth  # sequences in a pack
    single = not exact and 2 * (most + 2) * _F32_EPS <= OVERSTATES
    usable = np.ascontiguousarray(_copies(lengths, bounds, max_length, depth), dtype=np.int64)
    # float32: every value (and every multiple of one) rounded up, so the table
    # only overstates; each of its sums of at most `most` terms is then within
    # (most + 1) * 2**-24 (relative) below the exact sum of those terms.
    priced = _round_up(values, np.float32 if single else np.float64).astype(np.float64)
    skip = _dominated(lengths, usable, priced, max_length, depth)
    slack = 0.0 if not single else 2 * (most + 2) * _F32_EPS * max(1.0, abs(min_value))
    out = kernels.price(lengths, usable, priced, skip.view(np.uint8), int(max_length),
                        -1 if depth is None else int(depth), single, float(min_value - slack),
                        max_patterns if not single else 2 * max_patterns,
                        None if budget is None else budget.expired)
    if out is None:
        raise OutOfTime
    corner, anchor_value, rows, copies, offsets = out
    best_value = max(corner, float(np.frombuffer(anchor_value).max(initial=0.0)))
    if single:
        best_value *= 1 + 2 * (most + 2) * _F32_EPS
    rows, copies = np.frombuffer(rows, dtype=np.int64), np.frombuffer(copies, dtype=np.int64)
    offsets = np.frombuffer(offsets, dtype=np.int64).tolist()
    patterns = [(rows[a:b].copy(), copies[a:b].copy()) for a, b in zip(offsets[:-1], offsets[1:])]
    values = np.asarray(values, dtype=np.float64)
    worth = np.array([c @ values[r] for r, c in patterns], dtype=np.float64)
    keep = np.flatnonzero(worth > min_value)
    keep = keep[np.argsort(-worth[keep], kind="stable")][:max_patterns]
    return Pricing(best_value, [patterns[j] for j in keep], worth[keep])


_F32_EPS = 2.0 ** -24  # unit roundoff of float32
OVERSTATES = 2e-5  # `Pricing.best_value` is at most this much (relative) above the exact best


def _round_up(values, dtype):
    """``values`` in ``dtype``, each rounded up (never below the float64 value)."""
    values = np.asarray(values, dtype=np.float64)
    rounded = values.astype(dtype)
    return np.where(rounded < values, np.nextafter(rounded, np.inf, dtype=dtype), rounded)


def _copies(lengths, bounds, max_length, depth) -> np.ndarray:
    """Most copies of each length one pack can hold."""
    copies = np.minimum(bounds, max_length // lengths)
    return copies if depth is None else np.minimum(copies, depth)


def _dominated(lengths, copies, values, max_length, depth) -> np.ndarray:
    """bool ``[n]``: lengths no best pack needs, as shorter lengths serve instead.

    No pack holds more than ``k`` sequences (the depth, or as many of the
    shortest length as fit), so one holding length ``r`` holds at most ``k - 1``
    others. If shorter lengths offer ``k`` copies (within their ``copies``)
    each worth at least ``values[r]``, one of them is free in that pack and
    replaces ``r``: no more tokens, no more sequences, no less value. Repeating
    this ends (the row drops each time) in an equally good pack without skipped
    lengths, so the best value over the other lengths is the best value.
    """
    n = len(lengths)
    k = int(max_length // lengths[0]) if n else 0
    if depth is not None:
        k = min(k, depth)
    skip = kernels.dominated(np.ascontiguousarray(copies, dtype=np.int64),
                             np.ascontiguousarray(values, dtype=np.float64), k)
    return np.frombuffer(skip, dtype=np.bool_).copy()
