"""The two-length planners, registered by name: ``greedy``, ``ffd``, ``optimal``.

Each maps a two-length histogram ``counts[Le, Ld]`` and the limits
``(Le, Ld, K or None)`` to placed pairs (`_first_fit.Placed`: the pack of
every pair) and, where it proves one, a lower bound on the packs and its kind
(`bounds.KINDS`). `tfpack.packing.pairs.plan` checks what they return.

- ``greedy``: next fit in (shuffled) input order, as seqio and T5 pack pairs:
  a pack is closed when the next pair overflows its inputs, its targets or
  its places. Holds every pair in memory (at most 2^25).
- ``ffd``: first fit decreasing, pairs with the larger share of a limit
  first (`_first_fit`).
- ``optimal``: templates planned on each side by the one-length ``optimal``,
  the other side fitted into them and repaired (`_templates`); the better of
  the two and ``ffd``, with the strongest of `bounds` and both one-length
  LP bounds.

>>> import numpy as np
>>> counts = np.zeros((8, 5), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 3] = 2  # two (6, 1), two (2, 4); Le=8, Ld=5
>>> placed, bound, kind = get("optimal")(counts, (8, 5, None), seed=0, time_limit=None)
>>> placed.packs, bound, kind
(2, 2, 'input_tokens')
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing.algorithms.greedy import MAX_SEQUENCES, walk
from tfpack.packing.pairs import bounds
from tfpack.packing.pairs._first_fit import Placed, decreasing, first_fit
from tfpack.packing.pairs._packs import cells, pairs_of
from tfpack.packing.pairs._templates import fill, swapped

__all__ = ["get", "names", "register"]

_REGISTRY: dict[str, Callable] = {}
# Share of `time_limit` each one-length plan (inputs, then targets) of `optimal` gets.
_TEMPLATE_SHARE = 0.4


def register(name: str):
    """Decorator registering a two-length planner under ``name``."""
    def decorator(function):
        _REGISTRY[name] = function
        return function
    return decorator


def get(name: str):
    """The two-length planner registered under ``name``; a clear error otherwise."""
    if name not in _REGISTRY:
        raise TfpackError(f"`algorithm` must be one of {names()} for two lengths. Received: algorithm={name!r}")
    return _REGISTRY[name]


def names() -> list[str]:
    """Names of the two-length planners."""
    return sorted(_REGISTRY)


@register("greedy")
def greedy(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """Next fit over the pairs in an order shuffled with ``seed``."""
    if counts.sum() > MAX_SEQUENCES:
        raise TfpackError(f"`greedy` walks every pair, so it plans at most {MAX_SEQUENCES:,} pairs; plan "
                          f"larger histograms with ffd or optimal. Received: {int(counts.sum()):,} pairs")
    a, b = pairs_of(counts)
    order = np.random.default_rng(seed).permutation(a.size)
    a, b = a[order], b[order]
    following = np.arange(a.size) + (limits[2] or a.size)
    for lengths, limit in ((a, limits[0]), (b, limits[1])):
        ends = np.cumsum(lengths)
        np.minimum(following, np.searchsorted(ends, ends - lengths + limit, side="right"), out=following)
    starts = walk(following)
    pack = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    return Placed(pack, a, b, starts.size - 1), None, None


@register("ffd")
def ffd(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """First fit decreasing on groups of packs; deterministic."""
    a, b, n = cells(counts)
    order = decreasing(a, b, limits)
    return first_fit(a[order], b[order], n[order], limits), None, None


@register("optimal")
def optimal(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """The best of the template plans and ``ffd``, with the strongest bound proven."""
    share = None if time_limit is None else _TEMPLATE_SHARE * time_limit
    found = bounds.simple(counts, limits)
    candidates = []
    for kind, make in (("input_lp", fill), ("target_lp", swapped)):
        placed, found[kind] = make(counts, limits, share)
        candidates.append(placed)
    candidates.append(ffd(counts, limits, seed=seed)[0])
    best = min(candidates, key=lambda placed: placed.packs)
    return (best, *bounds.strongest(found))
