"""Rounding the `optimal` planner's LP into packs that give every sequence a slot.

The LP solution ``x`` says how many packs of each column (``(rows, copies)``:
copies of the lengths of those rows) to use, fractionally. `round_lp` floors
it, which leaves at most (basic columns) x (depth) sequences without a slot,
then rounds packs up, most fractional first, where slots still needed hold at
least ``fill`` of their tokens. `settle` turns whole copies of columns into a
plan: slots beyond the histogram serve shorter sequences still without one
(as the LP's substitution columns do), slots nobody needs are dropped, and
the sequences still left go into free space by best fit.

Lengths 2 and 3 (one and two sequences), the LP takes a pack [3, 2] and half
a pack [3, 3]; half of that pack's tokens are still needed, so with
``fill=0.5`` it is rounded up, and its spare slot is dropped:

>>> import numpy as np
>>> patterns = [(np.array([1]), np.array([2])), (np.array([0, 1]), np.array([1, 1]))]
>>> round_lp(patterns, np.array([0.5, 1.0]), np.array([2, 3]), np.array([1, 2]),
...          max_length=6, max_sequences_per_pack=3, fill=0.5)
{(3, 2): 1, (3,): 1}
"""

from __future__ import annotations

import bisect

import numpy as np

from tfpack.packing.algorithms import _best_fit


def round_lp(patterns, x, lengths, demand, max_length, max_sequences_per_pack,
             fill: float) -> dict[tuple[int, ...], int]:
    """Round the LP solution ``x`` over ``patterns`` and give every sequence a slot.

    Packs are rounded down, then up (most fractional first) where slots still
    needed hold at least ``fill`` of their tokens; then `settle`.
    """
    whole = np.floor(x + 1e-6).astype(np.int64)
    extra = -demand.copy()  # slots minus sequences, by length
    for j in np.flatnonzero(whole):
        rows, copies = patterns[j]
        extra[rows] += copies * whole[j]
    # Round up, most fractional first, the packs whose every slot is still needed.
    fraction = x - whole
    for j in np.argsort(-fraction, kind="stable"):
        if fraction[j] <= 1e-6:
            break
        rows, copies = patterns[j]
        tokens = copies * lengths[rows]
        needed = np.minimum(copies, np.maximum(-extra[rows], 0)) * lengths[rows]
        if needed.sum() >= fill * tokens.sum():
            whole[j] += 1
            extra[rows] += copies
    return settle(patterns, whole, lengths, demand, max_length, max_sequences_per_pack)


def settle(patterns, whole, lengths, demand, max_length,
           max_sequences_per_pack) -> dict[tuple[int, ...], int]:
    """``whole[j]`` packs ``patterns[j]``, with every sequence given a slot.

    Slots the packs hold beyond the histogram serve shorter sequences
    still without one (`cover`); the sequences still left go into free space
    with best fit.
    """
    packs, missing = cover(patterns, whole, lengths, demand)
    filled = _best_fit.fill(missing, packs, max_length, max_sequences_per_pack)
    return {p: c for p, c in filled.items() if p and c}


def cover(patterns, whole, lengths, demand) -> tuple[dict[tuple[int, ...], int], dict[int, int]]:
    """``whole[j]`` packs ``patterns[j]``, and the sequences they leave without a slot.

    Slots the packs hold beyond the histogram serve shorter sequences
    still without one (longest first, each taking the shortest such slot that
    fits, as the LP's substitution columns do); slots nobody needs are
    dropped. Returns the packs and the sequences left, by length.

    Two packs [3, 2] for four 2s and a 3: the spare 3 serves one 2, the
    other is left.

    >>> cover([(np.array([0, 1]), np.array([1, 1]))], np.array([2]), np.array([2, 3]),
    ...       np.array([4, 1]))
    ({(3, 2): 1, (2, 2): 1}, {2: 1})
    """
    extra = -demand.copy()  # slots minus sequences, by length
    for j in np.flatnonzero(whole):
        rows, copies = patterns[j]
        extra[rows] += copies * whole[j]
    spare = [int(r) for r in np.flatnonzero(extra > 0)]  # ascending rows
    packs = _Packs(set(lengths[spare].tolist()))  # only spare slots are replaced
    for j in np.flatnonzero(whole):
        rows, copies = patterns[j]
        packs.add(_strategy(lengths[rows], copies), int(whole[j]))
    for r in np.flatnonzero(extra < 0)[::-1]:
        at = bisect.bisect_right(spare, r)
        while extra[r] < 0 and at < len(spare):
            s = spare[at]
            number = int(min(-extra[r], extra[s]))
            packs.replace(int(lengths[s]), int(lengths[r]), number)
            extra[s] -= number
            extra[r] += number
            if extra[s] == 0:
                spare.pop(at)
    for s in spare:
        packs.replace(int(lengths[s]), None, int(extra[s]))
    missing = {int(lengths[r]): int(-extra[r]) for r in np.flatnonzero(extra < 0)}
    return {p: c for p, c in packs.counts.items() if p and c}, missing


class _Packs:
    """Groups of identical packs, indexed by the ``tracked`` lengths they hold.

    Only tracked lengths can be `replace`d (indexing every length of every
    pack cost most of a rounding at depth 32).
    """

    def __init__(self, tracked: set[int]) -> None:
        self.counts: dict[tuple[int, ...], int] = {}
        self._tracked = tracked
        self._holding: dict[int, dict[tuple[int, ...], None]] = {v: {} for v in tracked}

    def add(self, pack: tuple[int, ...], number: int) -> None:
        if pack not in self.counts:
            self.counts[pack] = 0
            for length in self._tracked.intersection(pack):
                self._holding[length][pack] = None
        self.counts[pack] += number

    def _remove(self, pack: tuple[int, ...], number: int) -> None:
        self.counts[pack] -= number
        if not self.counts[pack]:
            del self.counts[pack]
            for length in self._tracked.intersection(pack):
                del self._holding[length][pack]

    def replace(self, old: int, new: int | None, number: int) -> None:
        """In ``number`` packs, one slot of length ``old`` becomes ``new`` (or goes)."""
        while number:
            pack = next(iter(self._holding[old]))
            moved = min(number, self.counts[pack])
            rest = list(pack)
            rest.remove(old)
            if new is not None:
                rest.append(new)
            self._remove(pack, moved)
            self.add(tuple(sorted(rest, reverse=True)), moved)
            number -= moved


def _strategy(lengths: np.ndarray, copies: np.ndarray) -> tuple[int, ...]:
    """The lengths of a pack, longest first, from ascending ``lengths`` and copies."""
    return tuple(int(v) for v in np.repeat(lengths, copies)[::-1])
