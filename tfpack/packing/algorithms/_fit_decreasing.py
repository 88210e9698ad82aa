"""Per-sequence first/best fit decreasing, run on groups: the engine of ``ffd``/``bfd``.

First fit decreasing (FFD) sorts the sequences longest first and puts each
into the first pack, in opening order, that still has room (tokens and
depth), opening a new pack when none has; best fit decreasing (BFD) picks the
pack with the least free space that fits instead (ties: the earliest opened).
multipack and TRL do this sequence by sequence, O(n log n).

Because lengths are integers <= L, equal sequences arrive together and the
packs fall into few groups of identical packs that are contiguous in opening
order. A sequence of length ``l`` entering a pack with free space ``s`` keeps
it the first (FFD) or tightest (BFD) fit until it holds
``min(s // l, depth left)`` of them, so each group of packs takes its
sequences in bulk and splits into at most three groups (full, one partial,
untouched). The result is exactly that of the per-sequence algorithm, in
O(n + L * groups) with groups = O(L), i.e. independent of n after the
histogram.

Best fit keeps the groups that still fit something sorted by (free space,
opening order) instead (`_best_fit_decreasing`, in blocks: `_Sorted`): a
length finds its tightest fit by bisection and touches only the groups it fills, so a
histogram with every length of L=65,536 takes a second, not a minute (the
array scan above costs O(L x groups) there). A group's opening order is the
index of its first pack among all packs opened: a split group's pieces start
at its first, first + full packs, and so on.
"""

from __future__ import annotations

import bisect

import numpy as np

from tfpack.packing.algorithms import base


def fit_decreasing(
    histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, best_fit: bool
) -> base.AlgorithmResult:
    """Pack ``histogram`` as per-sequence FFD (or BFD with ``best_fit``) would."""
    depth_limit = max_length if max_sequences_per_pack is None else max_sequences_per_pack
    if best_fit:
        return _best_fit_decreasing(histogram, max_length, depth_limit)
    # Groups of identical packs, in opening order; full packs simply stop fitting.
    count = np.zeros(0, dtype=np.int64)
    space = np.zeros(0, dtype=np.int64)
    depth = np.zeros(0, dtype=np.int64)
    contents: list[tuple[int, ...]] = []

    for length in range(max_length, 0, -1):
        left = int(histogram[length - 1])
        if left == 0:
            continue
        fits = np.flatnonzero((space >= length) & (depth < depth_limit))
        if best_fit:
            fits = fits[np.argsort(space[fits], kind="stable")]  # ties keep opening order
        per_pack = np.minimum(space[fits] // length, depth_limit - depth[fits])
        room = np.cumsum(count[fits] * per_pack)
        filled = int(np.searchsorted(room, left, side="right"))  # groups taking all they can
        full = fits[:filled]
        space[full] -= per_pack[:filled] * length
        depth[full] += per_pack[:filled]
        for i, k in zip(full.tolist(), per_pack[:filled].tolist()):
            contents[i] += (length,) * k
        left -= int(room[filled - 1]) if filled else 0
        if left and filled < fits.size:
            # The next group takes the rest: split it into full / partial / untouched packs.
            i, k = int(fits[filled]), int(per_pack[filled])
            packs, rest = divmod(left, k)
            pieces = [(packs, k), (int(rest > 0), rest), (int(count[i]) - packs - int(rest > 0), 0)]
            pieces = [(n, m) for n, m in pieces if n > 0]
            count = np.concatenate([count[:i], [n for n, _ in pieces], count[i + 1 :]])
            space = np.concatenate([space[:i], [space[i] - m * length for _, m in pieces], space[i + 1 :]])
            depth = np.concatenate([depth[:i], [depth[i] + m for _, m in pieces], depth[i + 1 :]])
            contents[i : i + 1] = [contents[i] + (length,) * m for _, m in pieces]
            left = 0
        if left:
            # Fits nowhere: new packs, each filled with as many copies as fit.
            k = min(max_length // length, depth_limit)
            packs, rest = divmod(left, k)
            pieces = [(n, m) for n, m in ((packs, k), (int(rest > 0), rest)) if n > 0]
            count = np.append(count, [n for n, _ in pieces])
            space = np.append(space, [max_length - m * length for _, m in pieces])
            depth = np.append(depth, [m for _, m in pieces])
            contents += [(length,) * m for _, m in pieces]
    return base.AlgorithmResult(contents, count)


def _best_fit_decreasing(histogram: np.ndarray, max_length: int,
                         depth_limit: int) -> base.AlgorithmResult:
    """Best fit decreasing on groups kept sorted by (free space, opening order); module notes."""
    groups: dict[int, list] = {}  # first pack's index -> [count, space, depth, contents]
    fits = _Sorted()  # (space, first) of the groups that can take more
    opened = 0  # packs opened so far

    def place(key: int, count: int, space: int, depth: int, contents: tuple) -> None:
        """Record a group (in `fits` if it can take more)."""
        groups[key] = [count, space, depth, contents]
        if space > 0 and depth < depth_limit:
            fits.add((space, key))

    lengths = np.flatnonzero(histogram)[::-1] + 1
    for length, left in zip(lengths.tolist(), np.asarray(histogram)[lengths - 1].tolist()):
        while left:
            # The tightest fit. A group put back below has less space than `length`.
            found = fits.pop_at_least((length,))
            if found is None:
                break
            space, key = found
            count, _, depth, contents = groups.pop(key)
            k = min(space // length, depth_limit - depth)
            if count * k <= left:  # every pack of the group takes k; it fits no more of these
                left -= count * k
                place(key, count, space - k * length, depth + k, contents + (length,) * k)
                continue
            packs, rest = divmod(left, k)  # split: full / partial / untouched
            pieces = [(packs, k), (int(rest > 0), rest), (count - packs - int(rest > 0), 0)]
            for number, taken in pieces:
                if number:
                    place(key, number, space - taken * length, depth + taken,
                          contents + (length,) * taken)
                    key += number
            left = 0
        if left:  # fits nowhere: new packs, each with as many copies as fit
            k = min(max_length // length, depth_limit)
            packs, rest = divmod(left, k)
            for number, taken in ((packs, k), (int(rest > 0), rest)):
                if number:
                    place(opened, number, max_length - taken * length, taken, (length,) * taken)
                    opened += number
    order = sorted(groups)
    return base.AlgorithmResult([groups[key][3] for key in order],
                                np.array([groups[key][0] for key in order], dtype=np.int64))


class _Sorted:
    """A sorted collection in blocks of at most ``2 * _BLOCK`` items.

    `_best_fit_decreasing` keeps tens of thousands of groups that fit more
    (L=65,536, every length); in one sorted list each insertion and removal
    moves half of it (a third of best fit's time there). Blocks bound that to
    a block, for one more bisection over the blocks' first items.

    >>> s = _Sorted()
    >>> for item in [(5, 0), (3, 1), (9, 2)]:
    ...     s.add(item)
    >>> s.pop_at_least((4,)), s.pop_at_least((4,)), s.pop_at_least((4,))
    ((5, 0), (9, 2), None)
    """

    def __init__(self) -> None:
        self._blocks: list[list] = []
        self._firsts: list = []

    def add(self, item) -> None:
        if not self._blocks:
            self._blocks.append([item])
            self._firsts.append(item)
            return
        b = max(0, bisect.bisect_right(self._firsts, item) - 1)
        block = self._blocks[b]
        bisect.insort(block, item)
        self._firsts[b] = block[0]
        if len(block) > 2 * _BLOCK:
            self._blocks[b: b + 1] = [block[:_BLOCK], block[_BLOCK:]]
            self._firsts[b: b + 1] = [block[0], block[_BLOCK]]

    def pop_at_least(self, item):
        """Remove and return the least item ``>= item`` (``None`` if there is none)."""
        b = max(0, bisect.bisect_right(self._firsts, item) - 1)
        while b < len(self._blocks):
            block = self._blocks[b]
            i = bisect.bisect_left(block, item)
            if i < len(block):
                found = block.pop(i)
                if block:
                    self._firsts[b] = block[0]
                else:
                    del self._blocks[b], self._firsts[b]
                return found
            b += 1
        return None


_BLOCK = 256


def packs(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *,
          best_fit: bool) -> dict[tuple[int, ...], int]:
    """`fit_decreasing` as packs (lengths, longest first) -> how many."""
    result = fit_decreasing(histogram, max_length, max_sequences_per_pack, best_fit=best_fit)
    plan: dict[tuple[int, ...], int] = {}
    for strategy, count in zip(result.strategies, result.counts.tolist()):
        plan[strategy] = plan.get(strategy, 0) + count
    return plan
