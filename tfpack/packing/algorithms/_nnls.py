"""Shared pieces of ``nnlshp`` and ``ennlshp``: strategies, packing matrix, leftovers.

The NNLS planners list every *strategy* (multiset of lengths) that fills a
pack of ``max_length`` exactly with at most ``depth`` sequences, one column of
the packing matrix ``A`` each (``A[i, j]`` = sequences of length ``i + 1`` in
strategy ``j``), and look for a mixture ``x >= 0`` with ``A x`` close to the
histogram. For ``max_length = 8`` and depth 3 (the paper's table 4) the
columns are::

    [1,1,6] [1,2,5] [1,3,4] [1,7] [2,2,4] [2,3,3] [2,6] [3,5] [4,4] [8]

Example:

>>> enumerate_strategies(4, 2), count_strategies(4, 2)
([(3, 1), (2, 2), (4,)], 3)
"""

from __future__ import annotations

import numpy as np

from tfpack.errors import TfpackError

# A dense packing matrix above this many entries would not fit comfortably in memory.
MAX_MATRIX_ENTRIES = 64_000_000
# Depth 4 already has ~940K strategies at max length 512 (the paper's G.1).
MAX_DEPTH = 3


def enumerate_strategies(max_length: int, depth: int) -> list[tuple[int, ...]]:
    """Every multiset of at most ``depth`` lengths summing exactly to ``max_length``.

    Ordered as the paper's table 4 (lexicographic on the lengths sorted
    ascending); each returned tuple lists its lengths longest first.
    """
    found: list[tuple[int, ...]] = []

    def extend(prefix: list[int], smallest: int, left: int, slots: int) -> None:
        if slots == 1:
            if left >= smallest:
                found.append(tuple(reversed(prefix + [left])))
            return
        # The next length is at most what leaves room for itself once more.
        for length in range(smallest, left // 2 + 1):
            extend(prefix + [length], length, left - length, slots - 1)
        if left >= smallest:
            found.append(tuple(reversed(prefix + [left])))

    extend([], 1, max_length, depth)
    return found


def count_strategies(max_length: int, depth: int) -> int:
    """How many strategies `enumerate_strategies` lists: partitions of ``max_length`` into <= ``depth`` parts."""
    # parts[k][m]: partitions of m into exactly k parts = parts[k][m - k] + parts[k - 1][m - 1].
    previous = [1] + [0] * max_length
    total = 0
    for k in range(1, depth + 1):
        current = [0] * (max_length + 1)
        for m in range(k, max_length + 1):
            current[m] = current[m - k] + previous[m - 1]
        total += current[max_length]
        previous = current
    return total


def check_size(max_length: int, depth: int) -> None:
    """A clear error when the dense packing matrix would be too large."""
    strategies = count_strategies(max_length, depth)
    if max_length * strategies > MAX_MATRIX_ENTRIES:
        raise TfpackError(
            "The NNLS planners build a dense matrix of max_length x strategies entries, at most "
            f"{MAX_MATRIX_ENTRIES:,}; use `lpfhp` or `optimal` for long packs. "
            f"Received: max_length={max_length} ({strategies:,} strategies of depth <= {depth})"
        )


def packing_matrix(strategies: list[tuple[int, ...]], max_length: int) -> np.ndarray:
    """float64 ``[max_length, len(strategies)]``: slots of each length per strategy."""
    matrix = np.zeros((max_length, len(strategies)))
    for column, strategy in enumerate(strategies):
        for length in strategy:
            matrix[length - 1, column] += 1
    return matrix


def problem(max_length: int, max_sequences_per_pack: int | None) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Strategies of depth ``min(max_sequences_per_pack, 3)`` filling ``max_length`` exactly, and their matrix."""
    depth = MAX_DEPTH if max_sequences_per_pack is None else min(max_sequences_per_pack, MAX_DEPTH)
    check_size(max_length, depth)
    strategies = enumerate_strategies(max_length, depth)
    return strategies, packing_matrix(strategies, max_length)


def with_leftovers(
    histogram: np.ndarray, strategies: list[tuple[int, ...]], matrix: np.ndarray, counts: np.ndarray
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Used strategies plus one pack per sequence the rounded mixture leaves out.

    As in the paper's code, a length ``l`` with ``r > 0`` sequences left
    without a slot gets ``r`` packs ``(l,)`` (its pack is filled with padding).
    """
    residual = histogram - matrix @ counts
    used = np.flatnonzero(counts > 0)
    left = np.flatnonzero(residual > 0)
    return (
        [strategies[j] for j in used] + [(int(i) + 1,) for i in left],
        np.concatenate([counts[used], residual[left]]).astype(np.int64),
    )
