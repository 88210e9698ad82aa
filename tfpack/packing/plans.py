"""`PackingPlan`: which lengths share a pack and how often, and `plan` to make one.

Example:

>>> import numpy as np
>>> from tfpack.packing import plan
>>> counts = np.array([0, 0, 2, 0, 2, 0, 0, 1])  # two 3s, two 5s, one 8
>>> p = plan(counts, max_length=8, max_sequences_per_pack=2, algorithm="spfhp")
>>> p.strategies, p.counts.tolist(), p.metrics["efficiency"]
([(5, 3), (8,)], [2, 1], 1.0)
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import numpy as np

from tfpack import atomic
from tfpack.errors import TfpackError
from tfpack.packing import algorithms
from tfpack.packing.algorithms import _bounds, base
from tfpack.packing.algorithms._budget import collector_paused
from tfpack.packing.assignment import Assignment, assign
from tfpack.packing.checks import check_plan
from tfpack.packing.histograms import (
    validate_histogram,
    validate_max_length,
    validate_max_sequences_per_pack,
)
from tfpack.packing import plan_files
from tfpack.packing.metrics import compute_metrics
from tfpack.params import Anything, Integer, IntegerPair, Real, declare_fields, validate_params

__all__ = ["PackingPlan", "plan", "validate_time_limit", "DEFAULT_TIME_LIMIT"]

FORMAT = "tfpack-plan"
VERSION = 1
DEFAULT_TIME_LIMIT = 1.0  # CPU seconds `optimal` plans for (best fit decreasing included), by default


def validate_time_limit(time_limit) -> float | None:
    """``time_limit`` as seconds (a number >= 0) or ``None``; a clear error otherwise."""
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float, np.integer,
                                                                   np.floating)) \
            or not time_limit >= 0 or time_limit == float("inf"):
        raise TfpackError(f"`time_limit` must be a finite number of seconds >= 0, or None. "
                          f"Received: time_limit={time_limit!r}")
    return float(time_limit)


@declare_fields(plan_files.field_constraints(Integer(1)))
@dataclasses.dataclass(frozen=True, eq=False)
class PackingPlan:
    """A packing plan: strategies (lengths sharing a pack) and their counts.

    Make one with `tfpack.packing.plan`; save it with `to_json`/`save` and
    read it back with `from_json`/`load` (the DESIGN.md plan file); map
    concrete examples to packs with `assign`.

    Attributes:
        max_length: maximum tokens per pack (``L``).
        max_sequences_per_pack: maximum sequences per pack (``K``), or
            ``None`` for no limit.
        algorithm: name of the algorithm that made the plan.
        histogram: int64 ``[max_length]``, sequences of each length 1..L.
        strategies: list of tuples of lengths, longest first, one per strategy.
        counts: int64 ``[len(strategies)]``, packs using each strategy.
        metrics: dict of the numbers in `tfpack.packing.metrics`.

    Example:

    >>> import numpy as np
    >>> from tfpack.packing import plan, PackingPlan
    >>> p = plan(np.array([0, 0, 2, 0, 2, 0, 0, 1]), 8, 2, algorithm="spfhp")
    >>> PackingPlan.from_json(p.to_json()).strategies == p.strategies
    True
    """

    max_length: int
    max_sequences_per_pack: int | None
    algorithm: str
    histogram: np.ndarray
    strategies: list[tuple[int, ...]]
    counts: np.ndarray
    metrics: dict

    def to_json(self) -> str:
        """The plan as a DESIGN.md plan-file JSON string."""
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "max_length": self.max_length,
                "max_sequences_per_pack": self.max_sequences_per_pack,
                "algorithm": self.algorithm,
                "histogram": self.histogram.tolist(),
                "strategies": [list(map(int, s)) for s in self.strategies],
                "counts": self.counts.tolist(),
                "metrics": self.metrics,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> "PackingPlan":
        """Read a plan from a DESIGN.md plan-file JSON string, checking everything."""
        data = plan_files.load_json(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise TfpackError(f"A plan file must have format={FORMAT!r}. Received: format={found!r}")
        if data.get("version") != VERSION:
            raise TfpackError(
                f"This tfpack reads plan files of version {VERSION}. "
                f"Received: version={data.get('version')!r}"
            )
        plan_files.check_fields(data)
        max_length = validate_max_length(data["max_length"])
        max_sequences_per_pack = validate_max_sequences_per_pack(data["max_sequences_per_pack"])
        histogram = validate_histogram(data["histogram"], max_length)
        strategies = data["strategies"]
        if not isinstance(strategies, list) or not all(isinstance(s, list) for s in strategies):
            raise TfpackError(
                f"A plan file's `strategies` must be a list of lists of lengths. "
                f"Received: strategies={str(strategies)[:80]}"
            )
        for index, strategy in enumerate(strategies):
            if not all(type(n) is int for n in strategy):
                raise TfpackError(
                    f"A plan file's strategies must list integer lengths. Received: strategies[{index}]={strategy}"
                )
        counts = np.asarray(data["counts"])
        if counts.ndim != 1 or (counts.size and not np.issubdtype(counts.dtype, np.integer)):
            raise TfpackError(
                f"A plan file's `counts` must be a list of integers. Received: counts={str(data['counts'])[:80]}"
            )
        counts = counts.astype(np.int64)
        strategies = [tuple(s) for s in strategies]
        check_plan(strategies, counts, histogram, max_length=max_length, max_sequences_per_pack=max_sequences_per_pack)
        metrics = compute_metrics(
            strategies, counts, histogram, max_length=max_length, max_sequences_per_pack=max_sequences_per_pack,
            **plan_files.stored_metrics(data, _bounds.KINDS))
        return cls(max_length, max_sequences_per_pack, str(data["algorithm"]), histogram, strategies, counts, metrics)

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan file (`to_json`) to ``path``, complete or not at all.

        The file is written under a hidden temporary name and renamed, so a
        reader (or a killed run) never leaves half a plan. ``path`` may be new
        or an earlier plan file, which is replaced; any other file there is
        kept and the call raises `TfpackError` (a plan never overwrites the
        histogram it came from, or anything else of the user's).
        """
        name = os.fspath(path)
        if os.path.isdir(name):
            raise TfpackError(f"A plan file's path must not be a directory. Received: path={name!r}")
        if os.path.lexists(name) and not _is_plan_file(name):
            raise TfpackError(
                "A plan file's path must be new or hold an earlier plan file, which is replaced; "
                f"it holds another file, kept as it is. Received: path={name!r}"
            )
        atomic.write_atomic(name, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "PackingPlan":
        """Read a plan file written by `save` (or `tfpack plan`)."""
        try:
            with open(path, encoding="utf-8") as file:
                text = file.read()
        except (OSError, UnicodeDecodeError) as error:
            raise TfpackError(f"The plan file must be readable. Received: path={os.fspath(path)!r} ({error})") from None
        return cls.from_json(text)

    def assign(self, lengths, seed: int = 0, *, shuffle: bool = True, balance=None,
               batch_size: int | None = None, replicas: int | None = None,
               token_weight: int = 0) -> Assignment:
        """Map concrete examples (their lengths) to packs; see `tfpack.packing.assign`."""
        return assign(self, lengths, seed=seed, shuffle=shuffle, balance=balance,
                      batch_size=batch_size, replicas=replicas, token_weight=token_weight)

    def summary(self, top: int = 5) -> str:
        """A few readable lines: the limits, the metrics and the most used strategies."""
        m = self.metrics
        depth = "none" if self.max_sequences_per_pack is None else self.max_sequences_per_pack
        lines = [
            f"PackingPlan(algorithm={self.algorithm!r}, max_length={self.max_length}, "
            f"max_sequences_per_pack={depth})",
            f"  {m['sequences']:,} sequences ({m['tokens']:,} tokens) in {m['packs']:,} packs "
            f"(lower bound {m['lower_bound_packs']:,})",
            f"  efficiency {100 * m['efficiency']:.3f}%, padding tokens {m['padding_tokens']:,}",
            f"  packing factor {m['packing_factor']:.4f} (speed-up upper bound "
            f"{m['speedup_upper_bound']:.4f})",
            f"  {m['strategies_used']:,} strategies, max depth used {m['max_depth_used']}, "
            f"solved in {m['solve_seconds']:.3f} s",
        ]
        for strategy, count in list(zip(self.strategies, self.counts))[:top]:
            lines.append(f"    {int(count):>12,} x {list(strategy)}")
        if len(self.strategies) > top:
            lines.append(f"    ... {len(self.strategies) - top:,} more strategies")
        return "\n".join(lines)


def _canonical(strategies, counts) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Merge equal strategies and drop unused ones; most used first, ties in given order."""
    counts = np.asarray(counts, dtype=np.int64)
    # Algorithms return tuples already (base.AlgorithmResult); convert anything else.
    keys = strategies if all(type(s) is tuple for s in strategies) else [tuple(map(int, s)) for s in strategies]
    if len(set(keys)) < len(keys) or np.any(counts == 0):
        merged: dict[tuple[int, ...], int] = {}
        for key, count in zip(keys, counts.tolist()):
            if count:
                merged[key] = merged.get(key, 0) + count
        keys = list(merged)
        counts = np.fromiter(merged.values(), dtype=np.int64, count=len(keys))
    order = np.argsort(-counts, kind="stable")
    return [keys[i] for i in order], counts[order]


@validate_params({
    "histogram": Anything("counts per length (per pair of lengths for two), checked with the limits"),
    "max_length": [Integer(1), IntegerPair(1)],
    "max_sequences_per_pack": [None, Integer(1)],
    "algorithm": Anything("one of `algorithm_names()`, checked by the registry"),
    "seed": Integer(0),
    "time_limit": [None, Real(0)],
})
def plan(
    histogram,
    max_length: int,
    max_sequences_per_pack: int | None,
    algorithm: str = "optimal",
    seed: int = 0,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
) -> PackingPlan:
    """Plan how to pack a dataset given its length histogram.

    Args:
        histogram: counts per length 1..max_length (see `histogram`,
            `read_histogram`).
        max_length: maximum tokens per pack.
        max_sequences_per_pack: maximum sequences per pack, or ``None``.
        algorithm: one of `tfpack.packing.algorithm_names()`.
        seed: a non-negative integer, for algorithms with random choices
            (``greedy``); checked for every algorithm.
        time_limit: seconds of CPU time (the calling thread's) ``optimal``
            may plan for, best fit decreasing included (1 by default: on an
            idle machine, about a second; ``None``: no limit, and the same
            plan on every machine).
            When it ends, the best plan found and the best bound proven so far
            are returned (a first LP is always solved where its size is
            bounded, so the largest histograms take up to about 2 s).
            Other algorithms ignore it.

    Returns:
        A checked `PackingPlan`; with ``max_length=(Le, Ld)`` and a 2-D
        ``histogram[i, j]`` (pairs of input length ``i + 1`` and target
        length ``j + 1``), a `tfpack.packing.pairs.PairPackingPlan` (two
        lengths: encoder-decoder pairs; algorithms ``greedy``, ``ffd``,
        ``optimal``).

    Example:

    >>> import numpy as np
    >>> p = plan(np.array([0, 0, 2, 0, 2, 0, 0, 1]), 8, None, algorithm="lpfhp")
    >>> p.metrics["packs"]
    3
    """
    if isinstance(max_length, (tuple, list)):
        from tfpack.packing.pairs import plan_pairs  # noqa: PLC0415  (pairs imports this module)

        return plan_pairs(histogram, max_length, max_sequences_per_pack, algorithm, seed, time_limit)
    if np.ndim(histogram) == 2:
        raise TfpackError(
            "A 2-D `histogram` counts (input, target) pairs and needs `max_length=(Le, Ld)`. "
            f"Received: max_length={max_length!r} with a histogram of shape {np.shape(histogram)}")
    max_length = validate_max_length(max_length)  # its upper limit; the rest is declared
    max_sequences_per_pack = None if max_sequences_per_pack is None else int(max_sequences_per_pack)
    histogram = validate_histogram(histogram, max_length)
    seed = int(seed)
    if histogram.sum() == 0:
        raise TfpackError(
            "`histogram` must count at least one sequence (the dataset is empty). "
            "Received: histogram with 0 sequences"
        )
    function = algorithms.get(algorithm)
    time_limit = None if time_limit is None else float(time_limit)
    kwargs = {"time_limit": time_limit} if base.takes_time_limit(algorithm) else {}
    with collector_paused():  # the plan and its checks: no scans of the caller's objects
        start = time.perf_counter()
        result = function(histogram, max_length, max_sequences_per_pack, seed=seed, **kwargs)
        seconds = time.perf_counter() - start
        strategies, counts = _canonical(result.strategies, result.counts)
        try:
            check_plan(strategies, counts, histogram, max_length=max_length,
                       max_sequences_per_pack=max_sequences_per_pack)
        except TfpackError as error:
            raise RuntimeError(f"Packing algorithm {algorithm!r} returned an invalid plan: {error}") from None
        metrics = compute_metrics(
            strategies, counts, histogram, max_length=max_length, max_sequences_per_pack=max_sequences_per_pack,
            solve_seconds=seconds, lower_bound_packs=result.lower_bound_packs,
            lower_bound_kind=result.lower_bound_kind,
        )
    return PackingPlan(max_length, max_sequences_per_pack, algorithm, histogram, strategies, counts, metrics)


def _is_plan_file(path: str) -> bool:
    """Whether ``path`` holds a plan file's JSON (any version): one `save` may replace."""
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT
