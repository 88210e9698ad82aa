"""Packs filled to exactly ``max_length`` tokens, for histograms with many lengths and copies.

Used by the `optimal` planner on histograms with thousands of distinct lengths
and many copies of each, where the LP over all lengths is slow (seconds) and
its bound is the token bound: a plan is then near-optimal exactly when nearly
all its packs are full. `fill` builds full packs greedily, a group of
identical packs at a time, and returns the sequences it could not place that
way for the LP to plan (a few hundred lengths, so a fast LP)::

    fill(histogram with {6: 2, 5: 1, 3: 1, 2: 2, 1: 1}, max_length=8, max_sequences_per_pack=3)
    -> packs {(6, 2): 2, (5, 3): 1}, rest {1: 1}

Every length, longest first, opens packs (all its copies at once, as one
group of identical packs). A group with ``s`` tokens and ``k`` sequences still
free is completed by one sequence of length ``s`` where there are any; with
two slots left, by pairs summing to ``s``; else the shortest length that
leaves a completable space joins (as many packs of the group as it has
copies; the rest of the group tries the next length). Taking the shortest
first uses up the short sequences, which a depth limit makes hard to place
at the end. Copies of a group that cannot be completed are left unpacked.

The greedy runs compiled (`tfpack/packing/_kernels.c`, ``exact_fill``; its
Python original is tests/packing/exact_fill_reference.py, which the tests
hold it equal to): on the long-context suite's L=12,288 cases it took
0.1-0.4 s of the planner's second in Python, and gave up on most of them.

Notes:
    Packs hold at most ``_FILL_DEPTH`` sequences even when more are allowed:
    deeper fills use up the short sequences so fast that the lengths left at
    the end cannot be combined exactly, shallower ones leave too many short
    ones. On the lognormal and document histograms of the benchmarks at
    depth 16, the plans end 6-9 packs above the token bound with 8 here, but
    every other value from 6 to 16 leaves a rest the LP cannot pack within
    0.01 pp (so `optimal` falls back to its LP over all lengths). The value
    is a measured sweet spot, not a derived one.
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms._budget import Budget, OutOfTime
from tfpack.packing.compiled import kernels

_FILL_DEPTH = 8  # sequences per exact pack at most; see the notes


class TooMuchLeft(Exception):
    """The sequences left unpacked passed ``most_left`` (`fill`): the caller would not use it."""


def fill(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None,
         budget: Budget | None = None, *, most_left: tuple[int, int] | None = None,
         ) -> tuple[dict[tuple[int, ...], int], np.ndarray]:
    """Full packs (exactly ``max_length`` tokens) and the sequences left over.

    Args:
        histogram: int64 ``[max_length]``, ``histogram[i]`` sequences of length ``i + 1``.
        max_length: tokens per pack.
        max_sequences_per_pack: sequences per pack, or ``None`` for no limit.
        budget: checked every 64 lengths that open packs or searches for a joiner.
        most_left: ``(tokens, lengths)``: give up as soon as the sequences left
            unpacked hold more tokens, or more distinct lengths, than these
            (they only grow as the lengths longest first open packs): on the
            suite's long histograms the greedy ran 1-10 s to leave 3-15% of
            the tokens, which `optimal` then could not use.

    Raises:
        OutOfTime: ``budget`` ended first.
        TooMuchLeft: more was left than ``most_left``.

    Returns:
        ``(packs, rest)``: packs (lengths, longest first) -> how many, each
        summing to ``max_length``; and int64 ``[max_length]``, the sequences
        in no pack. Together they hold exactly the sequences of ``histogram``.
    """
    depth = _FILL_DEPTH if max_sequences_per_pack is None else min(max_sequences_per_pack,
                                                                   _FILL_DEPTH)
    most_tokens, most_lengths = most_left or (_NO_LIMIT, _NO_LIMIT)
    histogram = np.ascontiguousarray(histogram, dtype=np.int64)
    if len(histogram) != max_length:
        raise ValueError(f"histogram has {len(histogram)} lengths, not max_length={max_length}")
    out = kernels.exact_fill(histogram, depth, min(int(most_tokens), _NO_LIMIT),
                             min(int(most_lengths), _NO_LIMIT),
                             None if budget is None else budget.expired)
    if out is None:
        raise OutOfTime
    too_much, width, records, rest = out  # records: ``width - 1`` lengths (0-padded), a count
    if too_much:
        raise TooMuchLeft
    packs: dict[tuple[int, ...], int] = {}
    rows = np.frombuffer(records, dtype=np.int64).reshape(-1, width)
    for row in rows.tolist():
        pack = tuple(length for length in row[:-1] if length)
        packs[pack] = packs.get(pack, 0) + row[-1]
    return packs, np.frombuffer(rest, dtype=np.int64).copy()


_NO_LIMIT = 2 ** 62


