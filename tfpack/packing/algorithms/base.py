"""The one interface every packing algorithm implements.

An algorithm maps a length histogram to packing *strategies* (the lengths that
share one pack) and how many packs use each strategy::

    histogram: int64 [max_length], histogram[i] = number of sequences of length i + 1
    -> AlgorithmResult(strategies=[(5, 3), (8,)], counts=[2, 1])

Algorithms register themselves with `register`; `tfpack.packing.plan` looks them
up by name with `get`, runs them and checks the result with the invariant checks
in `tfpack.packing.checks` before building a `PackingPlan`.

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms import base
>>> @base.register("my_singletons")
... def pack(histogram, max_length, max_sequences_per_pack, *, seed):
...     lengths = [i + 1 for i in np.flatnonzero(histogram)]
...     return base.AlgorithmResult([(n,) for n in lengths], histogram[histogram > 0])
>>> base.get("my_singletons") is pack
True
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["AlgorithmResult", "Algorithm", "register", "get", "names", "depth_cap",
           "takes_time_limit"]


@dataclasses.dataclass(frozen=True)
class AlgorithmResult:
    """What a packing algorithm returns.

    Attributes:
        strategies: one tuple of sequence lengths per strategy, longest first;
            the lengths of a strategy sum to at most ``max_length`` and there
            are at most ``max_sequences_per_pack`` of them.
        counts: int64 ``[len(strategies)]``, packs using each strategy
            (all positive). Together they hold at least as many slots of each
            length as the histogram has sequences of it.
        lower_bound_packs: a proven lower bound on the number of packs any plan
            needs under the same limits, when the algorithm computes one
            (``optimal`` does); else ``None``.
        lower_bound_kind: what proves ``lower_bound_packs`` (``optimal``:
            ``"tokens"``, ``"sequences"``, ``"windows"``, ``"long"``, ``"pairs"`` or
            ``"lp"``; see
            `tfpack.packing.algorithms._bounds`), or ``None``.
    """

    strategies: list[tuple[int, ...]]
    counts: np.ndarray
    lower_bound_packs: float | None = None
    lower_bound_kind: str | None = None


class Algorithm(Protocol):
    """Signature of a packing algorithm.

    Args:
        histogram: int64 ``[max_length]``, validated, not all zero.
        max_length: maximum tokens per pack.
        max_sequences_per_pack: maximum sequences per pack, or ``None`` for no limit.
        seed: for algorithms with random choices (e.g. the input order of
            ``greedy``); deterministic algorithms ignore it.
        time_limit: only for algorithms registered with ``time_limit=True``
            (``optimal``): seconds, or ``None`` for no limit.
    """

    def __call__(
        self, histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, seed: int
    ) -> AlgorithmResult: ...


_REGISTRY: dict[str, Algorithm] = {}
_DEPTH_CAPS: dict[str, int] = {}
_TIME_LIMITED: set[str] = set()


def register(name: str, *, depth_cap: int | None = None,
             time_limit: bool = False) -> Callable[[Algorithm], Algorithm]:
    """Decorator registering a packing algorithm under ``name``.

    Args:
        name: the name `get` and ``tfpack plan --algorithm`` use.
        depth_cap: for algorithms that never put more than this many
            sequences in a pack whatever ``max_sequences_per_pack`` allows (``nnlshp``: 3),
            so that callers know larger limits give the same plan.
        time_limit: the algorithm takes a ``time_limit=`` keyword (seconds or
            ``None``) and returns its best plan when it ends.
    """

    def decorator(function: Algorithm) -> Algorithm:
        if name in _REGISTRY and _REGISTRY[name] is not function:
            raise ValueError(f"A packing algorithm named {name!r} is already registered.")
        _REGISTRY[name] = function
        if depth_cap is not None:
            _DEPTH_CAPS[name] = depth_cap
        if time_limit:
            _TIME_LIMITED.add(name)
        return function

    return decorator


def depth_cap(name: str) -> int | None:
    """The most sequences algorithm ``name`` puts in a pack, if it caps depth itself."""
    get(name)
    return _DEPTH_CAPS.get(name)


def takes_time_limit(name: str) -> bool:
    """Whether algorithm ``name`` takes ``time_limit=`` (see `register`)."""
    get(name)
    return name in _TIME_LIMITED


def get(name: str) -> Algorithm:
    """The algorithm registered under ``name``; a clear error otherwise."""
    if name not in _REGISTRY:
        raise TfpackError(
            f"`algorithm` must be one of {names()}. Received: algorithm={name!r}"
        )
    return _REGISTRY[name]


def names() -> list[str]:
    """Names of the registered algorithms."""
    return sorted(_REGISTRY)
