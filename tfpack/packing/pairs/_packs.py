"""Pairs as arrays, packs as pack ids: the shared plumbing of the two-length planners.

A two-length histogram ``counts[i, j]`` counts pairs of input length ``i + 1``
and target length ``j + 1``. The planners work on flat arrays: one row per
pair (``a``: input length, ``b``: target length) and the pack it lands in
(``pack``: ids ``0..P-1``). `strategies_of` counts identical packs::

    pack = [0, 0, 1, 2, 2], a = [3, 1, 4, 3, 1], b = [2, 2, 1, 2, 2]
    -> strategies [((4, 1),), ((3, 2), (1, 2))], counts [1, 2]

>>> import numpy as np
>>> s, c = strategies_of(np.array([0, 0, 1, 2, 2]), np.array([3, 1, 4, 3, 1]),
...                      np.array([2, 2, 1, 2, 2]), 8)
>>> s, c.tolist()
([((4, 1),), ((3, 2), (1, 2))], [1, 2])
"""

from __future__ import annotations

import itertools

import numpy as np

from tfpack.packing.algorithms.greedy import unique_packs
from tfpack.packing.compiled import kernels

Pair = tuple[int, int]


def cells(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty cells of ``counts``: input lengths, target lengths, pairs (int64)."""
    i, j = np.nonzero(counts)
    return i.astype(np.int64) + 1, j.astype(np.int64) + 1, counts[i, j].astype(np.int64)


def pairs_of(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row per pair: input and target lengths (cell by cell, in row-major order)."""
    a, b, n = cells(counts)
    return np.repeat(a, n), np.repeat(b, n)


def counts_of(a: np.ndarray, b: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The histogram ``[max_input, max_target]`` of pairs of input lengths ``a`` and target
    lengths ``b`` (`pairs_of` undone).

    >>> counts_of(np.array([2, 1, 2]), np.array([1, 3, 1]), (2, 3)).tolist()
    [[0, 0, 1], [2, 0, 0]]
    """
    cell = (np.asarray(a, dtype=np.int64) - 1) * shape[1] + np.asarray(b, dtype=np.int64) - 1
    return np.bincount(cell, minlength=shape[0] * shape[1]).reshape(shape)


def strategies_of(pack: np.ndarray, a: np.ndarray, b: np.ndarray,
                  max_target_length: int) -> tuple[list[tuple[Pair, ...]], np.ndarray]:
    """Identical packs counted: strategies (pairs, largest first) and their counts.

    `unique_packs` on the pairs' codes (their order: by depth, then by the last
    pair first where a pack's codes fit one integer, else by the first pair
    first); the tuples built from the codes compiled (``pair_strategies`` in
    `tfpack/packing/_kernels.c`: a plan of 1e6 pairs has some 2e5 distinct
    packs; a pair a code through a dict took about 0.5 s, column by column
    in numpy 0.1-0.15 s).
    """
    order = np.argsort(pack, kind="stable")
    ids = pack[order]
    boundaries = np.concatenate([[0], np.flatnonzero(np.diff(ids)) + 1, [ids.size]]).astype(np.int64)
    # A pair as one integer, order-preserving: (a, b) before (a, b') when b > b'.
    codes = (a[order] - 1) * max_target_length + b[order]
    strategies: list[tuple[Pair, ...]] = []
    counts: list[np.ndarray] = []
    for unique, number in unique_packs(codes, boundaries, int(codes.max())):
        strategies.extend(kernels.pair_strategies(np.ascontiguousarray(unique, dtype=np.int64).tobytes(),
                                                  *unique.shape, max_target_length))
        counts.append(number)
    return strategies, np.concatenate(counts).astype(np.int64)


def histogram_of(strategies, counts: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """int64 ``shape``: pairs of each (input, target) length over all packs of a plan."""
    depths = np.fromiter(map(len, strategies), dtype=np.int64, count=len(strategies))
    flat = np.fromiter(itertools.chain.from_iterable(itertools.chain.from_iterable(strategies)),
                       dtype=np.int64, count=2 * int(depths.sum())).reshape(-1, 2)
    slots = np.zeros(shape, dtype=np.int64)
    np.add.at(slots, (flat[:, 0] - 1, flat[:, 1] - 1), np.repeat(np.asarray(counts, dtype=np.int64), depths))
    return slots
