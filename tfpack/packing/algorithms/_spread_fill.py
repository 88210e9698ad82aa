"""Packs that spread what the longest sequence leaves over every slot: a plan where depth binds too.

Where the token bound and the depth bound nearly meet (many short documents
at depth 8-16 on long contexts: `benchmarks/planners_long_context.py --seed 8`
case 22, L=16,384 depth 8, 7.9 sequences a pack needed on average beside the
full windows), a good plan fills nearly every pack to ``max_length`` with
nearly ``depth`` sequences. Best fit decreasing fills packs with a few long
sequences and leaves the short ones to packs of their own (34% above the
token bound there), and the LP over thousands of lengths converges too
slowly to make up for it within a second (0.73% there, 0.16% with 30 s).

`packs` opens packs with the longest sequences left, ``batch`` at a time,
and fills each slot in turn with the longest sequence left that is at most
the pack's free space divided by the slots it still has (the last slot: at
most the free space), as a pack's sequences of the LP's solutions do (one
long sequence and seven of about an eighth of the rest each). A batch picks
its sequences at once: packs by that target, ascending, each the longest
left at most its target and not taken by a pack with a larger one
(`_longest_at_most`). On that case: 84,665 packs on the token bound of
84,373 (0.35%) in 0.12 s of CPU.

Its last packs run out of the sequences that would fill them (there: three
of about 4,400 tokens a pack, 3,000 free, once every shorter one is taken;
201 of the 292 packs of waste in the last twentieth of the packs). So a
second pass reopens the first pass's failed packs (a slot's share of free
space, ``max_length // depth``, or more): with their sequences out of the
pool they open packs among the single openers, by their tokens, and their
free slots are filled as an opener's are, while the sequences that fit them
are still there; the pass with fewer packs is the plan. There: 84,584 packs
(0.25%; 211 packs of waste, 97 in the last twentieth) in 0.27 s; `--seed 10`
case 44 (depth 12): 69,733 on 69,448 (0.41%; one pass 69,788, 0.49%). More
passes (each reopening the last pass's failures, or those and the earlier
ones) went up and down: 0.25-0.63% and 0.24-0.76% over six.

The fill is chaotic, its last packs most of all, so `best` tries it at a few
scales of the slot targets, and after each try refills the last tenth of its
packs (their sequences, `_rows` again) at a few scales and batches: a tenth
of the packs costs about a tenth of a try (10-20 ms there), and smaller
batches, too slow over all the packs, pay there. On nine cases of the
long-context suite (seeds 8, 10, 108, 148, 152, 187, 214, 269, 289), each
run to its end, the best plan of nine whole tries was 0.135-0.676% above the
bound; of four, each refilled three ways, 0.108-0.640% (seed 108 case 26:
0.304% -> 0.108%; 6 of the 9 better, 3 worse: `Tuning.SPREAD_TAILS`).

>>> import numpy as np
>>> histogram = np.zeros(10, dtype=np.int64)
>>> histogram[[8, 5, 3, 1, 0]] = [1, 1, 2, 2, 2]  # 9, 6, 4, 4, 2, 2, 1, 1
>>> sorted(packs(histogram, 10, 3, batch=2).items(), reverse=True)
[((9, 1), 1), ((6, 2, 2), 1), ((4, 4, 1), 1)]
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import _budget, greedy
from tfpack.packing.compiled import kernels

__all__ = ["packs", "best", "pool"]


def best(histogram: np.ndarray, max_length: int, depth: int, bound: int, budget: _budget.Budget,
         scales=(1.0,), batch: int = 1024, gap: float = 0.0, tail: float = 0.0, tails=(),
         second=None, second_tail: float = 0.0, second_after: float = 0.0,
         settle=None) -> dict[tuple[int, ...], int] | None:
    """`packs` at each of ``scales`` in turn, and ``second``'s: the plan with the fewest packs
    (``None``: none).

    The fill is chaotic: its targets a little smaller (``scale`` 0.99 instead of 1) moved
    `benchmarks/planners_long_context.py`'s spread cases either way by up to 0.4 points (the
    notes in `Tuning.SPREAD_SCALES`), so the next scale runs while ``budget`` has as much
    time left as the last one took, until a plan is within ``gap`` of ``bound``. After each
    try the last ``tail`` share of its packs is refilled at each ``(scale, batch)`` of
    ``tails`` in turn (`_refilled`): a try's time is its refills' too. Where the first try is
    not within ``gap``, ``second(budget)``, where given, makes packs as `_rows` does
    (`_class_fill.rows`) before the next try, where ``budget`` has ``second_after`` times
    the first try's time left (its refills and settling included); the last ``second_tail``
    share of them is refilled as a try's is, and they are the plan where they have fewer
    packs than the tries'. ``settle(rows, budget, enough, last)``, where given, settles the packs of each try
    and of ``second`` (`_spread_settle.settled`, ``last`` False), and the best so far once
    more (``last`` True: other passes) right after ``second``, before the next tries can take
    their time, and at the end where a later try is the best.

    6, 5, 4 and 2 in packs of 9 tokens, 3 sequences, both openers at once: at scale 1
    the slot targets (3 // 2, 4 // 2) give the 5 the 2 and the 4 is left alone (3 packs);
    at 0.5 (0 and 1) nothing is taken before the last slots, which take the 4 and the 2:

    >>> h = np.bincount([5, 4, 3, 1], minlength=9)  # lengths 6, 5, 4, 2
    >>> sorted(best(h, 9, 3, 2, _budget.Budget(None), scales=(1.0, 0.5), batch=2).items())
    [((5, 4), 1), ((6, 2), 1)]
    """
    full = int(histogram[max_length - 1])
    enough = int(bound * (1 + gap)) - full  # packs of the fill within ``gap`` of ``bound``

    def polished(found, share):  # refilled, then settled
        found = _refilled(found, max_length, depth, budget, share, tails, enough)
        return found if settle is None else settle(found, budget, enough, False)

    rows, took, last = None, 0.0, None  # ``last``: the rows the last passes left
    for tried, scale in enumerate(scales):
        if rows is not None and (len(rows) <= enough or budget.left() < took):
            break
        start = budget.spent()
        found = _rows(histogram, max_length, depth, batch, budget, scale)
        if found is None:  # the budget ended in the try
            break
        found = polished(found, tail)
        rows = found if rows is None or len(found) < len(rows) else rows
        took = budget.spent() - start
        if tried == 0 and second is not None and len(rows) > enough and \
                budget.left() >= second_after * took:
            found = second(budget)  # the other packs, where the first try is not close
            if found is not None:
                found = polished(found, second_tail)
                rows = found if len(found) < len(rows) else rows
            if settle is not None:  # the best so far once more, before the next tries
                rows = last = settle(rows, budget, enough, True)
    if rows is None:
        return None
    if settle is not None and rows is not last:
        rows = settle(rows, budget, enough, True)  # the best, once more
    return _plan(rows, full, max_length)


def _refilled(rows: np.ndarray, max_length: int, depth: int, budget: _budget.Budget,
              tail: float, tries, enough: int) -> np.ndarray:
    """``rows`` (`_rows`, in the order the packs were opened) with their last ``tail`` share
    refilled: `_rows` over their sequences at each ``(scale, batch)`` of ``tries`` in turn,
    the fewest packs kept; while more than ``enough`` packs, and ``budget`` has as much time
    left as the last try took.

    The last three of four packs of 9 tokens, 3 sequences (6, 5 and 2, 4 as at scale 1)
    refilled at scale 0.5 (`best`'s example): 6 and 2, 5 and 4.

    >>> rows = np.array([[7, 0, 0], [6, 0, 0], [5, 2, 0], [4, 0, 0]])
    >>> _refilled(rows, 9, 3, _budget.Budget(None), 0.75, [(1.0, 2), (0.5, 2)], 0).tolist()
    [[7, 0, 0], [5, 0, 4], [6, 0, 2]]
    """
    kept = int(len(rows) * (1 - tail))
    if kept >= len(rows):
        return rows  # no tail (``tail`` 0: one try as it is, `optimal`): nothing to refill
    histogram = np.bincount(rows[kept:].ravel(), minlength=max_length + 1)[1:].astype(np.int64)
    took = 0.0
    for scale, batch in tries:
        if len(rows) <= enough or budget.left() < took:
            break
        start = budget.spent()
        found = _rows(histogram, max_length, depth, batch, budget, scale)
        took = budget.spent() - start
        if found is not None and kept + len(found) < len(rows):
            rows = np.concatenate([rows[:kept], found])
    return rows


def packs(histogram: np.ndarray, max_length: int, depth: int, batch: int = 1024,
          budget: _budget.Budget | None = None,
          scale: float = 1.0) -> dict[tuple[int, ...], int] | None:
    """The plan of the module notes: packs (lengths, longest first) -> how many.

    Two passes: the first pass's failed packs (free space of a slot's share,
    ``max_length // depth``, or more) open packs of the second among the openers, by
    their tokens, while sequences to fill them are left; the plan with fewer packs.

    Args:
        histogram: int64 ``[max_length]``, ``histogram[i]`` sequences of length ``i + 1``.
        max_length: tokens per pack.
        depth: sequences per pack.
        batch: packs opened at once (fewer when the sequences left fill fewer).
        budget: checked before each batch; ``None`` is returned if it ends in the first
            pass (in the second: the first pass's plan).
        scale: each slot's target (but the last's) is this share of its even share of the
            free space (at most 1).
    """
    rows = _rows(histogram, max_length, depth, batch, budget, scale)
    return None if rows is None else _plan(rows, int(histogram[max_length - 1]), max_length)


def _rows(histogram, max_length, depth, batch, budget, scale) -> np.ndarray | None:
    """`packs`' two passes: the packs of the one with fewer, a row each (0: an empty slot),
    but the full windows; ``None`` if ``budget`` ends in the first."""
    counts = pool(histogram, max_length)
    first = _fill(counts.copy(), max_length, depth, batch, budget, scale=scale)
    if first is None:
        return None
    failed = first[max_length - first.sum(axis=1) >= max_length // depth]
    if len(failed):
        counts -= np.bincount(failed.ravel(), minlength=max_length + 1)
        counts[0] = 0
        second = _fill(counts, max_length, depth, batch, budget, reopened=failed, scale=scale)
        if second is not None and len(second) < len(first):
            return second
    return first


def pool(histogram: np.ndarray, max_length: int) -> np.ndarray:
    """The sequences the fill places: ``counts[n]`` of length ``n`` (``counts[0]`` 0), the windows
    of ``max_length`` left out (each a pack of its own).

    >>> pool(np.array([2, 0, 1]), 3).tolist()
    [0, 2, 0, 0]
    """
    counts = np.concatenate([[0], np.asarray(histogram, dtype=np.int64)])
    counts[max_length] = 0
    return counts


def _plan(rows: np.ndarray, full: int, max_length: int) -> dict[tuple[int, ...], int]:
    """``rows`` (`_rows`) and ``full`` windows as packs (lengths, longest first) -> how many."""
    rows = -np.sort(-rows, axis=1)  # longest first, the empty slots (0) last
    counted = greedy.strategies_of_packs(rows[rows > 0], np.r_[0, np.cumsum(np.count_nonzero(rows, axis=1))],
                                         max_length)
    plan: dict[tuple[int, ...], int] = {(max_length,): full} if full else {}
    plan.update(zip(counted.strategies, counted.counts.tolist()))  # (none is a full window)
    return plan


def _fill(counts: np.ndarray, max_length: int, depth: int, batch: int,
          budget: _budget.Budget | None, reopened: np.ndarray | None = None,
          scale: float = 1.0) -> np.ndarray | None:
    """One pass over ``counts`` (``counts[n]`` sequences of length ``n``, an int64 array the
    pass takes them from): the packs, a row each (0: an empty slot), or ``None`` if ``budget``
    ends first (it is checked before each batch).

    ``reopened`` (rows of packs, their sequences not in ``counts``) open packs among the
    single openers, by their tokens; their free slots are filled as an opener's are. The pass
    is compiled (`tfpack/packing/_kernels.c`, ``spread_fill``): 0.09 -> 0.03 s of CPU for
    `_rows` on the 91,126 packs of `benchmarks/planners_long_context.py` case 40/36.

    Packs of 16 tokens, 3 sequences, two opened at a time: 12 and 10 open them (the
    shorter first), each slot takes the longest left at most the pack's free space over
    its free slots (6 // 2 and 4 // 2: 3 and 2), the last slot the longest that fits (2
    and 2), and the 1 left opens a pack of its own:

    >>> counts = np.bincount([12, 10, 3, 2, 2, 2, 1], minlength=17)
    >>> _fill(counts, 16, 3, 2, None).tolist(), int(counts.sum())
    ([[10, 3, 2], [12, 2, 2], [1, 0, 0]], 0)
    """
    reopened = np.zeros((0, depth), np.int64) if reopened is None else -np.sort(-reopened, axis=1)
    reopened = reopened[np.argsort(-reopened.sum(axis=1), kind="stable")]  # by tokens, stable
    rows = kernels.spread_fill(counts, max_length, depth, batch, float(scale),
                               np.ascontiguousarray(reopened, dtype=np.int64).tobytes(),
                               None if budget is None else budget.expired)
    return None if rows is None else np.frombuffer(rows, dtype=np.int64).reshape(-1, depth).copy()


def _longest_at_most(counts: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For ``targets`` ascending, distinct sequences of ``counts``, each the longest at most its
    target not taken by a larger target (0: none); taken from ``counts``.

    With the sequences sorted, ``at[j]``, the index of the longest at most target ``j``, and
    the index taken ``min(at[j], taken[j + 1] - 1)``: ``j + min(at[i] - i for i >= j)``.

    >>> counts = np.array([0, 1, 0, 2])  # 1, 3, 3
    >>> _longest_at_most(counts, np.array([1, 3, 3, 3])).tolist(), counts.tolist()
    ([0, 1, 3, 3], [0, 0, 0, 0])
    """
    cumulative = np.cumsum(counts[:targets[-1] + 1]) if len(targets) else counts[:0]
    at = cumulative[targets] - 1
    j = np.arange(len(targets))
    index = j + np.minimum.accumulate((at - j)[::-1])[::-1]
    taken = np.zeros(len(targets), dtype=np.int64)
    some = index >= 0
    taken[some] = np.searchsorted(cumulative, index[some], side="right")
    np.subtract.at(counts, taken[some], 1)
    return taken
