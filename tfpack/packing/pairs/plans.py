"""`PairPackingPlan`: which (input, target) length pairs share a pack, and `plan` to make one.

An encoder-decoder pack has two rows: the encoder's (``Le`` tokens) and the
decoder's (``Ld`` tokens); pair ``k`` of a pack puts its input in the encoder
row and its target in the decoder row. A two-length plan says which pairs of
lengths share a pack and how many such packs there are. The histogram is
``counts[i, j]``: pairs of input length ``i + 1`` and target length ``j + 1``.

Reach it through the one entry point, `tfpack.packing.plan`, with
``max_length=(Le, Ld)``:

>>> import numpy as np
>>> from tfpack.packing import plan
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 2] = 2  # two (6, 1) pairs, two (2, 3) pairs
>>> p = plan(counts, max_length=(8, 4), max_sequences_per_pack=2, algorithm="optimal")
>>> p.strategies, p.counts.tolist(), p.metrics["packs"], p.metrics["lower_bound_packs"]
([((6, 1), (2, 3))], [2], 2, 2)
"""

from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing import plan_files
from tfpack.packing.algorithms._budget import collector_paused
from tfpack.packing.histograms import (
    MAX_LENGTH_LIMIT,
    validate_histogram,
    validate_max_length,
    validate_max_sequences_per_pack,
    validate_seed,
)
from tfpack.packing.pairs import algorithms
from tfpack.packing.pairs._packs import strategies_of
from tfpack.packing.pairs.assignment import assign_pairs
from tfpack.packing.pairs.checks import check_pair_plan
from tfpack.packing.pairs.metrics import compute_pair_metrics
from tfpack.params import IntegerPair, declare_fields

__all__ = ["PairPackingPlan", "plan_pairs", "validate_pair_histogram", "validate_pair_max_length"]

FORMAT = "tfpack-pair-plan"
VERSION = 1
MAX_CELLS = 1 << 24  # Le * Ld: the histogram holds one int64 count per cell (128 MB)


@declare_fields(plan_files.field_constraints(IntegerPair(1)))
@dataclasses.dataclass(frozen=True, eq=False)
class PairPackingPlan:
    """A two-length packing plan: strategies (pairs sharing a pack) and their counts.

    Attributes:
        max_length: ``(Le, Ld)``, encoder and decoder tokens per pack.
        max_sequences_per_pack: pairs per pack at most (``K``), or ``None``.
        algorithm: name of the planner that made it.
        histogram: int64 ``[Le, Ld]``, pairs of each (input, target) length.
        strategies: one tuple of ``(input length, target length)`` pairs per
            strategy, largest first: the pairs of one pack. The inputs of a
            pack fill its encoder row and its targets its decoder row, pair
            ``k``'s input beside pair ``k``'s target.
        counts: int64 ``[len(strategies)]``, packs using each strategy.
        metrics: dict of the numbers in `tfpack.packing.pairs.metrics`.

    Example:

    >>> import numpy as np
    >>> from tfpack.packing import plan
    >>> counts = np.zeros((8, 4), dtype=np.int64); counts[5, 0] = 2; counts[1, 2] = 2
    >>> p = plan(counts, max_length=(8, 4), max_sequences_per_pack=2)
    >>> PairPackingPlan.from_json(p.to_json()).strategies == p.strategies
    True
    """

    max_length: tuple[int, int]
    max_sequences_per_pack: int | None
    algorithm: str
    histogram: np.ndarray
    strategies: list[tuple[tuple[int, int], ...]]
    counts: np.ndarray
    metrics: dict

    def to_json(self) -> str:
        """The plan as JSON (DESIGN.md "Plan file": the two-length format)."""
        i, j = np.nonzero(self.histogram)
        return json.dumps({
            "format": FORMAT, "version": VERSION,
            "max_length": list(self.max_length),
            "max_sequences_per_pack": self.max_sequences_per_pack,
            "algorithm": self.algorithm,
            "histogram": np.stack([i + 1, j + 1, self.histogram[i, j]], axis=1).tolist(),
            "strategies": [[list(pair) for pair in s] for s in self.strategies],
            "counts": self.counts.tolist(),
            "metrics": self.metrics,
        })

    @classmethod
    def from_json(cls, text: str) -> "PairPackingPlan":
        """Read a plan written by `to_json`, checking everything."""
        data = plan_files.load_json(text)
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        if found != FORMAT or data.get("version") != VERSION:
            raise TfpackError(f"A two-length plan file must have format={FORMAT!r} and version={VERSION}. "
                              f"Received: format={found!r}, version={data.get('version')!r}"
                              if isinstance(data, dict) else
                              f"A two-length plan file must be a JSON object. Received: {found}")
        plan_files.check_fields(data)
        max_length = validate_pair_max_length(data["max_length"])
        depth = validate_max_sequences_per_pack(data["max_sequences_per_pack"])
        histogram = _histogram_of_cells(data["histogram"], max_length)
        try:
            strategies = [tuple(tuple(pair) for pair in s) for s in data["strategies"]]
            counts = np.asarray(data["counts"], dtype=np.int64)
        except (TypeError, ValueError):
            raise TfpackError("A two-length plan file's strategies must be lists of [input, target] pairs "
                              "and its counts integers. "
                              f"Received: strategies={str(data['strategies'])[:80]}") from None
        check_pair_plan(strategies, counts, histogram, max_length=max_length, max_sequences_per_pack=depth)
        metrics = compute_pair_metrics(strategies, counts, histogram, max_length=max_length,
                                       max_sequences_per_pack=depth, **plan_files.stored_metrics(data))
        return cls(max_length, depth, str(data["algorithm"]), histogram, strategies, counts, metrics)

    def assign(self, input_lengths, target_lengths, seed: int = 0):
        """Map concrete pairs to packs; see `tfpack.packing.pairs.assignment`."""
        return assign_pairs(self, input_lengths, target_lengths, seed=seed)

    def summary(self) -> str:
        """Two readable lines: the limits and the packs against the bound."""
        m = self.metrics
        return (f"PairPackingPlan(algorithm={self.algorithm!r}, max_length={self.max_length}, "
                f"max_sequences_per_pack={self.max_sequences_per_pack})\n"
                f"  {m['sequences']:,} pairs in {m['packs']:,} packs (lower bound {m['lower_bound_packs']:,}, "
                f"{m['lower_bound_kind']}); efficiency inputs {100 * m['input_efficiency']:.2f}%, "
                f"targets {100 * m['target_efficiency']:.2f}%")


def validate_pair_max_length(max_length) -> tuple[int, int]:
    """``(Le, Ld)`` as two positive ints with at most `MAX_CELLS` cells; a clear error otherwise."""
    if not isinstance(max_length, (tuple, list)) or len(max_length) != 2:
        raise TfpackError("`max_length` for pairs must be a pair (Le, Ld) of positive integers. "
                          f"Received: max_length={max_length!r}")
    try:
        lengths = tuple(validate_max_length(x) for x in max_length)
    except TfpackError:
        raise TfpackError("`max_length` for pairs must be a pair (Le, Ld) of positive integers, each at most "
                          f"{MAX_LENGTH_LIMIT:,}. Received: max_length={max_length!r}") from None
    if lengths[0] * lengths[1] > MAX_CELLS:
        raise TfpackError(f"`max_length` for pairs must have Le * Ld at most {MAX_CELLS:,} (the histogram "
                          f"holds a count per pair of lengths). Received: max_length={max_length!r}")
    return lengths


def validate_pair_histogram(counts, max_length: tuple[int, int]) -> np.ndarray:
    """``counts`` as int64 ``[Le, Ld]``; a clear error when it is malformed."""
    array = np.asarray(counts)
    if array.shape != tuple(max_length):
        raise TfpackError(
            "`histogram` for pairs must be a 2-D array of counts of shape (Le, Ld) = "
            f"{tuple(max_length)}: counts[i, j] pairs of input length i + 1 and target length j + 1. "
            f"Received: histogram with shape {array.shape}")
    return validate_histogram(array.reshape(-1)).reshape(array.shape)


def _histogram_of_cells(rows, max_length) -> np.ndarray:
    """A plan file's histogram (rows ``[input, target, count]``) as int64 ``[Le, Ld]``."""
    try:
        cells = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
    except (TypeError, ValueError):
        raise TfpackError("A two-length plan file's histogram must list [input, target, count] rows. "
                          f"Received: histogram={str(rows)[:80]}") from None
    inside = (cells[:, :2] >= 1).all(axis=1) & (cells[:, 0] <= max_length[0]) & (cells[:, 1] <= max_length[1])
    if not inside.all() or (cells[:, 2] < 0).any():
        raise TfpackError("A two-length plan file's histogram rows must have lengths in 1..(Le, Ld) and "
                          f"counts >= 0. Received: row {cells[np.flatnonzero(~inside | (cells[:, 2] < 0))[0]].tolist()}")
    histogram = np.zeros(max_length, dtype=np.int64)
    np.add.at(histogram, (cells[:, 0] - 1, cells[:, 1] - 1), cells[:, 2])
    return histogram


def plan_pairs(histogram, max_length, max_sequences_per_pack, algorithm: str = "optimal", seed: int = 0,
               time_limit: float | None = 1.0) -> PairPackingPlan:
    """Plan packs of (input, target) pairs; `tfpack.packing.plan` with ``max_length=(Le, Ld)``.

    Args:
        histogram: int ``[Le, Ld]``, ``histogram[i, j]`` pairs of input length
            ``i + 1`` and target length ``j + 1``.
        max_length: ``(Le, Ld)``: encoder and decoder tokens per pack.
        max_sequences_per_pack: pairs per pack at most, or ``None``.
        algorithm: one of `tfpack.packing.pairs.algorithms.names()`:
            ``greedy`` (seqio's next fit), ``ffd``, ``optimal``.
        seed: for ``greedy``'s order.
        time_limit: CPU seconds (the calling thread's) ``optimal`` tries candidates for (the
            binding side's first two one-length plans get 70% and 45% of
            it, later ones 30% of what is left), or ``None`` (all
            candidates, the same plan on every machine). The candidate running
            when it ends finishes, and one starts only where the time left
            covers the work past its share the one before had: on 1e6
            generated pairs with ``time_limit=1``, 0.17-1.26 s in all
            (building and checking a plan of 2e5 distinct packs, 0.1 s,
            comes after it; `benchmarks/results/pair_planner.md`).

    Returns:
        A checked `PairPackingPlan`.
    """
    max_length = validate_pair_max_length(max_length)
    depth = validate_max_sequences_per_pack(max_sequences_per_pack)
    histogram = validate_pair_histogram(histogram, max_length)
    seed = validate_seed(seed)
    if histogram.sum() == 0:
        raise TfpackError("`histogram` must count at least one pair (the dataset is empty). "
                          "Received: histogram with 0 pairs")
    function = algorithms.get(algorithm)
    from tfpack.packing.plans import validate_time_limit  # noqa: PLC0415  (plans dispatches here)

    time_limit = validate_time_limit(time_limit)
    with collector_paused():  # the plan and its checks: no scans of the caller's objects
        start = time.perf_counter()
        placed, bound, kind = function(histogram, (*max_length, depth), seed=seed, time_limit=time_limit)
        strategies, counts = strategies_of(placed.pack, placed.a, placed.b, max_length[1])
        seconds = time.perf_counter() - start
        order = np.argsort(-counts, kind="stable")
        strategies, counts = [strategies[i] for i in order], counts[order]
        try:
            check_pair_plan(strategies, counts, histogram, max_length=max_length, max_sequences_per_pack=depth)
        except TfpackError as error:
            raise RuntimeError(f"Pair planner {algorithm!r} returned an invalid plan: {error}") from None
        metrics = compute_pair_metrics(strategies, counts, histogram, max_length=max_length,
                                       max_sequences_per_pack=depth, solve_seconds=seconds,
                                       lower_bound_packs=bound, lower_bound_kind=kind)
    return PairPackingPlan(max_length, depth, algorithm, histogram, strategies, counts, metrics)
