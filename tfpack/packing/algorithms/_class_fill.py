"""Packs that follow an LP over size classes, filled by the spread fill's slot rule.

Where the spread fill (`_spread_fill`) runs, its last packs run out of the
mid-size sequences that would fill them: it takes them early, where a long
sequence and a few short ones would have done. The cutting-stock LP over a few
size classes (lengths ``edges[j] <= n < edges[j + 1]``, each standing for its
mean rounded up) says how many of each class each pack should take so that
every class is used up evenly. `rows` solves it (`_column_generation.run`;
with ``unit``, in units of that many tokens: each class's mean and
``max_length`` divided, the means rounded up, so its packs fit the real means
too, and classes whose means round up alike merged), takes ``floor(x)`` packs of each
of its patterns (a basic solution: at most one pattern a class), and fills
their slots, longest class first: each slot takes the longest sequence of its
class at most the pack's free space less the means of its later slots
(`_spread_fill._longest_at_most`, all packs of a slot and class at once). What
is left (the rounding, slots whose class ran out) goes to the spread fill's
pass, the packs with free slots reopened among its openers.

>>> import numpy as np
>>> counts = np.zeros(11, dtype=np.int64)
>>> counts[[6, 5, 4, 3, 2]] = [2, 2, 2, 2, 4]  # in packs of 10 tokens, 3 sequences
>>> edges(counts, 10, 3).tolist()  # classes 2-4, 5 and 6
[2, 5, 6, 10]
>>> sorted(map(tuple, rows(counts, 10, 3, 3, 4, None).tolist()))  # 44 tokens: 5 packs
[(4, 3, 2), (4, 3, 2), (5, 5, 0), (6, 2, 0), (6, 2, 0)]
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import _budget, _column_generation, _spread_fill

__all__ = ["edges", "rows"]


def edges(counts: np.ndarray, max_length: int, classes: int) -> np.ndarray:
    """Class edges (ascending, from the shortest length to ``max_length``): up to ``classes``
    classes of about equal tokens, each at least one length.

    The module example: tokens 8, 6, 8, 10, 12 of lengths 2-6 (44 in all) cut where they pass
    44 / 3 and 88 / 3, after the 4 (22 up to it) and after the 5 (32).
    """
    lengths = np.arange(len(counts), dtype=np.int64)
    tokens = np.cumsum(lengths * counts)
    present = np.flatnonzero(counts)
    # Class j ends after the length where the tokens pass j / classes of them.
    cuts = np.searchsorted(tokens, tokens[-1] * np.arange(1, classes) / classes, side="left") + 1
    inner = cuts[(cuts > present[0]) & (cuts <= present[-1])]
    return np.unique(np.concatenate([[present[0]], inner, [max_length]]))


def rows(counts: np.ndarray, max_length: int, depth: int, classes: int, batch: int,
         budget: _budget.Budget | None, unit: int = 1) -> np.ndarray | None:
    """The packs of the module notes, a row each (0: an empty slot); ``None`` where the
    budget ends first. ``counts[n]``: sequences of length ``n`` (``counts[max_length]`` 0);
    the LP in units of ``unit`` tokens (a divisor of ``max_length``).

    In units of 2, the module example's class means (3, 5, 6) are 2, 3 and 3 units: the 5s
    and 6s merge (mean 6, 3 units) and a pack of 5 units holds one of them and a short one,
    so the LP leaves two 4s alone: 6 packs, one more than in tokens (what the rounding
    costs: little where a unit is a thousandth of ``max_length``, `Tuning.SPREAD_CLASS_UNITS`):

    >>> counts = np.zeros(11, dtype=np.int64)
    >>> counts[[6, 5, 4, 3, 2]] = [2, 2, 2, 2, 4]
    >>> sorted(map(tuple, rows(counts, 10, 3, 3, 4, None, unit=2).tolist()))
    [(4, 0, 0), (4, 0, 0), (5, 3, 0), (5, 3, 0), (6, 2, 2), (6, 2, 2)]
    """
    counts = np.asarray(counts, dtype=np.int64).copy()
    cut = edges(counts, max_length, classes)
    lengths = np.arange(len(counts), dtype=np.int64)

    def classes_of(cut):
        tokens = np.add.reduceat(lengths * counts, cut[:-1])[: len(cut) - 1]
        sizes = np.add.reduceat(counts, cut[:-1])[: len(cut) - 1]
        keep = sizes > 0
        return cut[:-1][keep], cut[1:][keep], -(-tokens[keep] // sizes[keep]), sizes[keep]

    low, high, means, sizes = classes_of(cut)
    if unit > 1:  # classes whose means round up to the same units merged
        units = -(-means // unit)
        first = np.r_[True, units[1:] != units[:-1]]
        low, high, means, sizes = classes_of(np.r_[low[first], high[-1]])
    # Ascending and distinct, as the LP's lengths must be: a class's mean rounded up is at
    # most its longest length, below the next class's shortest.
    try:
        lp = _column_generation.run(-(-means // unit), sizes, max_length // unit, depth, [], 0,
                                    budget=budget)
    except _budget.OutOfTime:
        return None
    if budget is not None and budget.expired():
        return None
    slot = _slots(lp.patterns, lp.x, depth)
    packs = _realised(counts, slot, means, low, high, max_length, depth)
    used = np.count_nonzero(packs, axis=1)
    free = max_length - packs.sum(axis=1)
    left = np.flatnonzero(counts)
    shortest = int(left[0]) if len(left) else max_length
    open_ = (used < depth) & (free >= shortest)
    rest = _spread_fill._fill(counts, max_length, depth, batch, budget, reopened=packs[open_])
    if rest is None:
        return None
    return np.concatenate([packs[~open_ & (used > 0)], rest])


def _slots(patterns, x, depth: int) -> np.ndarray:
    """int ``[packs, depth]``: each pack's slots' classes, descending (-1: no slot), for
    ``floor(x)`` packs of each pattern ``(rows, copies)``."""
    whole = np.floor(np.asarray(x) + 1e-9).astype(np.int64)
    kinds = []
    for p in np.flatnonzero(whole > 0):
        rows_, copies = patterns[p]
        row = np.full(depth, -1, dtype=np.int64)
        classes = np.repeat(rows_, copies)[::-1]
        row[: len(classes)] = classes
        kinds.append(np.broadcast_to(row, (whole[p], depth)))
    return np.concatenate(kinds) if kinds else np.zeros((0, depth), np.int64)


def _realised(counts, slot, means, low, high, max_length: int, depth: int) -> np.ndarray:
    """``slot``'s packs filled (`rows`), their sequences taken from ``counts``.

    Slot by slot: first every pack whose slot has a class, all classes at once (their
    lengths are apart: each class's lengths in a block of the pool after a wall, as many
    as the packs, that stands for no sequence, so a target below the class takes the wall),
    then the packs' last slots from any class.
    """
    packs = np.zeros(slot.shape, dtype=np.int64)
    expected = np.where(slot >= 0, means[np.maximum(slot, 0)], 0)
    later = np.cumsum(expected[:, ::-1], axis=1)[:, ::-1] - expected  # means of the later slots
    free = np.full(len(slot), max_length, dtype=np.int64)
    last = np.count_nonzero(slot >= 0, axis=1) - 1
    # The pool's lengths: each class's block, a wall (0) and then its lengths.
    length = np.concatenate([np.arange(l - 1, h) for l, h in zip(low, high)])
    offset = np.r_[0, np.cumsum(high - low + 1)[:-1]]  # each class's wall in the pool
    length[offset] = 0
    walls, lengths, every = length == 0, length[length > 0], np.arange(len(counts))
    for j in range(depth):
        layer = np.where(last == j, len(low), slot[:, j])  # a pack's last slot: any class
        at = np.flatnonzero((layer >= 0) & (layer < len(low)))
        k = layer[at]
        target = np.clip(free[at] - later[at, j], 0, high[k] - 1)
        position = offset[k] + np.maximum(target - low[k] + 1, 0)
        pool = counts[length]
        pool[walls] = len(at)
        _take(packs, free, at, j, length, pool, position)
        counts[lengths] = pool[~walls]
        at = np.flatnonzero(layer == len(low))
        target = np.clip(free[at] - later[at, j], 0, len(counts) - 1)
        _take(packs, free, at, j, every, counts, target)
    return packs


def _take(packs, free, at, j, length, pool, position) -> None:
    """Slot ``j`` of packs ``at``: the longest of ``pool`` at most ``position`` (the
    pool's ``length``), not taken by a pack with a larger one (in turn where equal)."""
    if not len(at):
        return
    order = np.argsort(position, kind="stable")
    taken = length[_spread_fill._longest_at_most(pool, position[order])]
    packs[at[order], j] = taken
    free[at[order]] -= taken
