"""A plain Python reference of `_exact_fill.fill` (the C kernel's spec).

The greedy that `tfpack/packing/_kernels.c` (``exact_fill``) replaced, verbatim
but for its module plumbing: every length longest first opens a group of
packs, completed by one sequence, by pairs, or by the shortest joiner that
leaves a completable space (`tfpack/packing/algorithms/_exact_fill.py`'s
module notes). The kernel must give the same packs, in the same order, and
the same rest (tests/packing/test_kernels.py).
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms._budget import Budget, OutOfTime
from tfpack.packing.algorithms._exact_fill import _FILL_DEPTH, TooMuchLeft


def fill(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None,
         budget: Budget | None = None, *, most_left: tuple[int, int] | None = None,
         ) -> tuple[dict[tuple[int, ...], int], np.ndarray]:
    """`_exact_fill.fill`, in Python."""
    depth = _FILL_DEPTH if max_sequences_per_pack is None else min(max_sequences_per_pack,
                                                                   _FILL_DEPTH)
    return _Filler(histogram, max_length, budget).run(depth, most_left)


class _Filler:
    """The greedy of the module docstring, over counts by length.

    The counts are kept twice: a list (fast to read one at a time) and an
    array (fast to search), changed together.
    """

    def __init__(self, histogram: np.ndarray, max_length: int, budget: Budget | None) -> None:
        self.budget = budget
        self.length = max_length
        self.array = np.concatenate([[0], np.asarray(histogram, dtype=np.int64), [0]])
        self.count = self.array.tolist()
        self.packs: dict[tuple[int, ...], int] = {}
        self.shortest, self.longest = 1, max_length  # no available length outside these

    def run(self, depth: int, most_left: tuple[int, int] | None = None,
            ) -> tuple[dict[tuple[int, ...], int], np.ndarray]:
        count = self.count
        rest = np.zeros(self.length, dtype=np.int64)
        most_tokens, most_lengths = most_left or (np.inf, np.inf)
        tokens_left = lengths_left = 0
        for opener in range(self.length, 0, -1):
            number = count[opener]
            if number:
                self._check()
                self._take(opener, number)
                left = self._complete((opener,), self.length - opener, depth - 1, number)
                if left:
                    rest[opener - 1] += left
                    tokens_left += left * opener
                    lengths_left += 1
                    if tokens_left > most_tokens or lengths_left > most_lengths:
                        raise TooMuchLeft
        rest += self.array[1:-1]
        return self.packs, rest

    def _check(self) -> None:
        if self.budget is not None and self.budget.expired():
            raise OutOfTime

    def _take(self, length: int, number: int) -> None:
        self.count[length] -= number
        self.array[length] -= number

    def _put_back(self, length: int, number: int) -> None:
        self.count[length] += number
        self.array[length] += number
        self.shortest = min(self.shortest, length)
        self.longest = max(self.longest, length)

    def _record(self, pack: tuple[int, ...], number: int) -> None:
        pack = tuple(sorted(pack, reverse=True))
        self.packs[pack] = self.packs.get(pack, 0) + number

    def _lowest(self) -> int:
        """The shortest available length (``max_length + 1`` when none)."""
        count, b = self.count, self.shortest
        while b <= self.length and not count[b]:
            b += 1
        self.shortest = b
        return b

    def _highest(self) -> int:
        """The longest available length (0 when none)."""
        count, b = self.count, self.longest
        while b > 0 and not count[b]:
            b -= 1
        self.longest = b
        return b

    def _joiner(self, space: int, slots: int) -> int:
        """The shortest available length below ``space`` that leaves a space
        ``slots`` sequences between the shortest and longest could fill (0 if none)."""
        self._check()
        longest, lowest = self._highest(), self._lowest()
        if not longest:
            return 0
        count = self.count
        for b in range(max(lowest, space - slots * longest), space):  # leaves <= slots x longest
            left = space - b
            if count[b] and -(-left // longest) * lowest <= left:  # and the fewest fit
                return b
        return 0

    def _complete(self, pack: tuple[int, ...], space: int, slots: int, number: int) -> int:
        """Fill ``number`` copies of ``pack`` to exactly ``space`` more tokens.

        Returns how many copies could not be completed; their sequences beyond
        ``pack`` are back in the counts.
        """
        if not space:
            self._record(pack, number)
            return 0
        count = self.count
        if not slots:
            return number
        if space <= self.length and count[space]:  # one sequence fills it
            done = min(number, count[space])
            self._take(space, done)
            self._record(pack + (space,), done)
            number -= done
        if not number or slots == 1:
            return number
        if slots == 2:
            return self._pairs(pack, space, number)
        while number:
            b = self._joiner(space, slots - 1)
            if not b:
                break
            joined = min(number, count[b])
            self._take(b, joined)
            failed = self._complete(pack + (b,), space - b, slots - 1, joined)
            self._put_back(b, failed)
            number -= joined - failed
            if failed:
                break  # the next lengths would fail the same way, mostly: save the time
        return number

    def _pairs(self, pack: tuple[int, ...], space: int, number: int) -> int:
        """Complete copies of ``pack`` with two sequences summing to ``space``, shortest first."""
        count, lowest = self.count, self._lowest()
        half = space // 2 - lowest + 1  # pairs (b, space - b) with lowest <= b <= space // 2
        if half <= 0:
            return number
        window = self.array[lowest: space - lowest + 1] > 0  # lengths lowest..space - lowest
        both = window[:half] & window[::-1][:half]
        for b in (lowest + np.flatnonzero(both)).tolist():
            other = space - b
            done = min(number, count[b] // 2 if b == other else min(count[b], count[other]))
            if done:
                self._take(b, done)
                self._take(other, done)
                self._record(pack + (b, other), done)
                number -= done
                if not number:
                    break
        return number
