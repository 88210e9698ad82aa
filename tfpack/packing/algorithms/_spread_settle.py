"""Settling packs: the least-filled dissolved, their sequences moved into the others' room.

The spread fill (`_spread_fill`) and the class fill (`_class_fill`) leave
their waste spread over many packs, a few tokens each, besides their last
packs (`planners_long_context.py --seed 8` case 22, L=16,384 depth 8: 177
packs of free tokens, 99 of them outside the last tenth, which the tail
refills never touch). Moving the sequences of the least-filled packs into
that room alone saves little: the room is a few hundred tokens a pack. What
saves packs is a larger sequence taking the place of a smaller one where the
room allows: the smaller goes back to the sequences to place, and the room
left shrinks. That is the pass of the two-length planner's settling
(`tfpack/packing/pairs/_settle.py`, the kernel ``settle`` of
`tfpack/packing/_kernels.c`), on one length: each sequence is the pair
``(length, 1)`` and a pack holds ``max_length`` tokens and ``depth`` of
those 1s, so a pack's room is its free tokens and free slots, and the
tightest place is the least ``free tokens * depth + free slots *
max_length``, found by the kernel's index by column (free slots): on the
1 s plans of seed 640 (L=12,288-16,384), a pass at 1% took 4.4x less CPU
than by rows at the median, up to 10.6x (1.26 -> 0.12 s), the same packs
(`benchmarks/settle_index.py`). The sequences left out are packed by `_spread_fill._fill`
(``batch`` at a time), and the pass is kept only where it leaves fewer packs.

`settled` runs a pass at each ``(share, batch)`` in turn on the best rows so
far. One pass (5% dissolved, the rest at 256 a batch) after each try of
`_spread_fill.best`, on the 24 cases of the long-context suite known to run
the fill (run to their end, tries stopped within 0.2%): seed 8 case 22
0.209% -> 0.094%, fresh 214/2 0.235% -> 0.165%, 148/36 0.196% -> 0.139%,
in 0.05-0.1 s a pass; no case out of 0.2% that was within; on the class
fill's packs of 187/42 0.183% -> 0.136%. `optimal` runs two passes after each
try (`Tuning.SPREAD_SETTLE`) and three more on the best where the tries end
without giving up (`Tuning.SPREAD_SETTLE_LAST`).

`settled_plan` runs the same passes on any plan (packs -> how many), its
packs with free tokens given to the kernel as sequences: `optimal` settles
its best plan so on long contexts (`Tuning.PLAN_SETTLE`), where the grouped
LP's plans leave a few dozen tokens in most packs (long-context 403/16,
L=12,288 depth 6: 25 a pack, 0.206% above the token bound; settled, 0.101%).

Where the depth nearly binds, the least-filled packs of such a plan hold no
short sequences: the fill's last packs ran out of them (726/14, L=16,384 depth
12: 2,834 packs of six sequences of 2,300-4,000 tokens hold 143 of its 153
packs of free tokens, while every sequence under 1,000 tokens is in a pack of
twelve). Dissolved alone, their sequences find no room, and the passes leave
as many packs as they found. So `settled_plan` dissolves a sample of the
other packs beside them (``sample``, spread evenly over the packs given to
the kernel): their short sequences come back to fill the room the long ones
leave. On the plans captured where `optimal` settles them (63, of long-context
cases 0.08-0.37% above the bound, each pass run to its end), the packs above
the bound went 9,962 -> 6,039 (726/14: 153 -> 63) with a sample of 3% where
`optimal._sample` gives one, for 10% more CPU. Where the depth is far from
binding, the least-filled packs of the grouped LP's plans are not short of
short sequences, and a sample only adds sequences to place (732/44, slots
0.38 of what the tokens need, a sample in every pass: 138 -> 360 packs above
the bound), so it is given only from `Tuning.SAMPLE_SLOTS_FROM`, and a pass
with it that leaves no fewer packs ends it for the passes after it.

Packs of 10 tokens, 3 sequences: {6, 2}, {3} and {8}; the {3} dissolved (a third of the packs),
its 3 takes the place of the 2 (room 2 + 2), and the 2 goes into the room of the {8}:

>>> rows = np.array([[6, 2, 0], [3, 0, 0], [8, 0, 0]])
>>> sorted(sorted(row) for row in _pass(rows, 10, 3, 0.34, 2, None).tolist())
[[0, 2, 8], [0, 3, 6]]
"""

from __future__ import annotations

import itertools

import numpy as np

from tfpack.packing.algorithms import _budget, _spread_fill, greedy
from tfpack.packing.compiled import kernels

__all__ = ["settled", "settled_plan"]

# Moves (sequences placed, each maybe pushing one out) at most, per sequence, as the two-length
# pass allows (`tfpack/packing/pairs/_settle.py`, ``_MOVES``).
_MOVES = 0.1


def settled(rows: np.ndarray, max_length: int, depth: int, budget: _budget.Budget, passes,
            enough: int, moves: float = _MOVES) -> np.ndarray:
    """``rows`` (packs a row each, 0: an empty slot) after a pass (`_pass`) at each ``(share,
    batch)`` of ``passes`` in turn, each on the fewest packs so far; while more than ``enough``
    packs, and ``budget`` has not ended and has as much time left as the last pass took.

    >>> rows = np.array([[6, 2, 0], [3, 0, 0], [8, 0, 0]])  # the module example
    >>> len(settled(rows, 10, 3, _budget.Budget(None), [(0.34, 2)], 0))
    2
    """
    took = 0.0
    for share, batch in passes:
        if len(rows) <= enough or budget.expired() or budget.left() < took:
            break
        start = budget.spent()
        found = _pass(rows, max_length, depth, share, batch, budget, moves)
        took = budget.spent() - start
        if len(found) < len(rows):
            rows = found
    return rows


def _pass(rows: np.ndarray, max_length: int, depth: int, share: float, batch: int,
          budget: _budget.Budget | None, moves: float = _MOVES) -> np.ndarray:
    """The module notes' pass on ``rows``: the ``share`` of them least filled dissolved; the
    packs after it (in no order).

    Only packs with free tokens go to the kernel: a full pack takes no sequence and gives none
    (a sequence placed there would have to be no longer than the one it pushes out).
    """
    dissolve = int(share * len(rows))
    room = rows.sum(axis=1) < max_length
    if dissolve < 1 or not room.any():
        return rows
    moving = rows[room]
    placed = moving > 0
    lengths = moving[placed]
    pack = np.repeat(np.arange(len(moving), dtype=np.int64), placed.sum(axis=1))
    pack, lengths, rest, _ = _moved(pack, lengths, len(moving), max_length, depth, dissolve,
                                    batch, budget, moves)
    return np.concatenate([rows[~room], _rows_of(pack, lengths, depth), rest])


def _moved(pack: np.ndarray, lengths: np.ndarray, packs: int, max_length: int, depth: int,
           dissolve: int, batch: int, budget: _budget.Budget | None, moves: float,
           sample: int = 0):
    """The kernel's pass on sequences ``lengths`` in packs ``pack`` (ids below ``packs``), the
    sequences it leaves out refilled: ``(pack, lengths, rows, kept)``, the sequences kept and
    their packs, the refill's packs as rows, and which of ``lengths`` were kept.

    The kernel stops placing where ``budget`` ends; the refill runs to its end: it holds no
    more sequences than the dissolved packs did (each one placed pushes at most one out), a
    few milliseconds' work, and where it was cut the pass was lost (the plan's settling at
    L=16,384, 525/32 of the long-context suite: 0.27 s of moves for nothing).
    """
    # The arrays themselves (C-contiguous int64: buffers the kernel reads), not copies as bytes.
    pack, lengths = (np.ascontiguousarray(x, dtype=np.int64) for x in (pack, lengths))
    after = np.frombuffer(kernels.settle(
        pack, lengths, np.ones(len(lengths), dtype=np.int64),
        packs, max_length, depth, depth, dissolve, int(moves * len(lengths)) + 64,
        0.0 if budget is None else budget.kernel_seconds(),  # 0: no limit
        True, sample), dtype=np.int64)  # by column: the free slots take depth + 1 values
    out = after < 0
    left = np.bincount(lengths[out], minlength=max_length + 1).astype(np.int64)
    return after[~out], lengths[~out], _spread_fill._fill(left, max_length, depth, batch, None), ~out


def _rows_of(pack: np.ndarray, lengths: np.ndarray, depth: int) -> np.ndarray:
    """Sequences ``lengths`` in packs ``pack`` (any ids) as rows, one a pack that holds any.

    >>> _rows_of(np.array([4, 1, 4]), np.array([5, 3, 2]), 3).tolist()
    [[3, 0, 0], [5, 2, 0]]
    """
    ids, pack = np.unique(pack, return_inverse=True)
    order = np.argsort(pack, kind="stable")
    pack, lengths = pack[order], lengths[order]
    slot = np.arange(len(pack)) - np.searchsorted(pack, np.arange(len(ids)))[pack]
    rows = np.zeros((len(ids), depth), dtype=np.int64)
    rows[pack, slot] = lengths
    return rows


def settled_plan(plan: dict[tuple[int, ...], int], max_length: int, depth: int,
                 budget: _budget.Budget, passes, moves: float,
                 sample: float = 0.0) -> dict[tuple[int, ...], int]:
    """``plan`` (packs -> how many) after a pass at each ``(share, batch)`` of ``passes`` in
    turn (as `settled`'s, with up to ``moves`` of the kernel's moves a sequence), each kept
    where it leaves fewer packs; while ``budget`` has as much time left as the last pass took.
    ``plan`` itself where no pass left fewer. Each pass also dissolves a ``sample`` share of
    the packs given to the kernel, spread evenly over them (the module notes), until a pass
    with it leaves no fewer packs; the passes after that one go without.

    Its packs with free tokens go to the kernel as sequences (their full packs stay as they
    are): packs of many slots (L=12,288 depth 16 at about two sequences a pack) cost no
    more than their sequences. After the passes only the packs they changed are counted
    again (`_changed`): 1-36% of them where a pass got 0.15 s at L=16,384, and counting
    all (0.9 million sequences) took 0.03-0.09 s, kept from the kernel's time.

    >>> sorted(settled_plan({(6, 2): 1, (3,): 1, (8,): 1}, 10, 3, _budget.Budget(None),
    ...                     [(0.34, 2)], 0.1).items())  # the module example
    [((6, 3), 1), ((8, 2), 1)]
    """
    strategies = list(plan)
    sizes = np.fromiter(map(len, strategies), dtype=np.int64, count=len(strategies))
    first = np.cumsum(sizes) - sizes
    flat = np.fromiter(itertools.chain.from_iterable(strategies), dtype=np.int64,
                       count=int(sizes.sum()))
    counts = np.fromiter(plan.values(), dtype=np.int64, count=len(strategies))
    loose = np.add.reduceat(flat, first) < max_length if len(flat) else np.zeros(0, dtype=bool)
    # Pack p (of strategy kind[p]) holds flat[first[kind[p]] + t] for t < sizes[kind[p]].
    kind = np.repeat(np.flatnonzero(loose), counts[loose])
    per_pack = sizes[kind]  # each pack's sequences
    pack = np.repeat(np.arange(len(kind)), per_pack)
    slot = np.arange(len(pack)) - np.repeat(np.cumsum(per_pack) - per_pack, per_pack)
    lengths = flat[first[kind][pack] + slot]
    origin = pack  # each sequence's pack in ``plan`` (-1: a refill's)
    total, packs = int(counts.sum()), len(kind)
    took = 0.0
    for share, batch in passes:
        dissolve = int(share * total)
        if dissolve < 1 or not len(lengths) or budget.expired() or budget.left() < took:
            break
        start = budget.spent()
        kept, kept_lengths, rest, stays = _moved(pack, lengths, packs, max_length, depth,
                                                 dissolve, batch, budget, moves,
                                                 int(sample * packs))
        took = budget.spent() - start
        held = np.bincount(kept, minlength=packs) > 0  # the packs that hold any: ids 0.. again
        count = int(held.sum()) + len(rest)
        if count < packs:
            filled = rest > 0
            pack = np.concatenate([(np.cumsum(held) - 1)[kept],
                                   int(held.sum()) + np.nonzero(filled)[0]])
            lengths = np.concatenate([kept_lengths, rest[filled]])
            origin = np.concatenate([origin[stays], np.full(int(filled.sum()), -1)])
            total, packs = total - (packs - count), count
        else:
            sample = 0.0  # (where the least-filled packs lack no short sequences, it only adds)
    if packs == len(kind):
        return plan  # no pass left fewer packs
    same, moved = _changed(pack, origin, packs, per_pack)
    kept_counts = np.where(loose, np.bincount(kind[same], minlength=len(strategies)), counts)
    out = {strategy: number for strategy, number in zip(strategies, kept_counts.tolist())
           if number}
    pack = pack[moved]
    order = np.argsort(pack, kind="stable")
    members = np.bincount(pack)  # sequences a changed pack (ids of none left out)
    boundaries = np.r_[0, np.cumsum(members[members > 0])]
    settled = greedy.strategies_of_packs(lengths[moved][order], boundaries, max_length)
    for strategy, number in zip(settled.strategies, settled.counts.tolist()):
        out[strategy] = out.get(strategy, 0) + number
    return out


def _changed(pack: np.ndarray, origin: np.ndarray, packs: int, sizes: np.ndarray):
    """``(same, moved)``: the packs of the plan (ids into ``sizes``, their sequences a pack)
    that hold just what they held, each once, and which sequences are in any other pack.

    A pack holds just what it held where all its sequences come from one pack of the plan
    (``origin``; -1: none), as many as that one held (each sequence is in one pack). Packs
    0-1 hold plan packs 1 and 0 whole; pack 2 lost one sequence and took another:

    >>> same, moved = _changed(np.array([0, 0, 1, 2, 2]), np.array([1, 1, 0, 2, -1]), 3,
    ...                        np.array([1, 2, 2]))
    >>> same.tolist(), moved.tolist()
    ([1, 0], [False, False, False, True, True])
    """
    some = np.full(packs, -1, dtype=np.int64)
    some[pack] = origin  # the origin of one of its sequences, a pack
    mixed = np.zeros(packs, dtype=bool)
    mixed[pack[origin != some[pack]]] = True
    whole = (some >= 0) & ~mixed
    whole[whole] = np.bincount(pack, minlength=packs)[whole] == sizes[some[whole]]
    return some[whole], ~whole[pack]
