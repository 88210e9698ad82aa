"""Planning on length groups, for histograms with thousands of lengths whose depth limit binds.

The LP of the `optimal` planner has a row per distinct length; with thousands
of them its first solve alone takes seconds. When the depth limit, not the
tokens, decides how many packs are needed, a pack is rarely full to the last
token, so lengths that differ by a few tokens are interchangeable nearly
everywhere: the planner can work on groups of neighbouring lengths instead.
Two histograms over the groups give a plan and a bound::

    groups(max_length=16, ends=2, width=4) -> starts [1, 2, 3, 7, 11, 15, 16]
    lengths 3..6 are a group: "up" counts them as 6 (a plan for it fits the
    real lengths), "down" as 3 (a bound for it bounds the real problem)

- *Up*: every length rounded up to the longest of its group. A slot of that
  length holds any sequence of the group, so a plan for the rounded-up
  histogram is a plan for the real one (`real_packs` puts the real lengths
  into its slots, and drops slots nobody needs).
- *Down*: every length rounded down to the shortest of its group. Any real
  pack stays a pack after rounding down, so the rounded-down problem needs no
  more packs than the real one: a lower bound for it is one for the real
  problem.

Lengths near 1 and near ``max_length`` keep their own group: short sequences
fill the last gaps of packs and long ones fit beside only short ones, so there
the LP's duals change from one length to the next; in between they are flat
when the depth binds. `optimal` uses this only where the rounded-up plan
lands close to the rounded-down bound, and plans on the real lengths
otherwise.
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.compiled import kernels

EXACT_ENDS = 128  # lengths within this many tokens of 1 or of max_length keep their own group
WIDTH = 32  # the other groups span this many lengths


def groups(max_length: int, ends: int | None = None, width: int | None = None) -> np.ndarray:
    """int64 ascending first lengths of the groups (the first is 1).

    ``ends`` and ``width`` default to `EXACT_ENDS` and `WIDTH`.

    >>> groups(16, ends=2, width=4).tolist()
    [1, 2, 3, 7, 11, 15, 16]
    """
    ends = EXACT_ENDS if ends is None else ends
    width = WIDTH if width is None else width
    middle = np.arange(ends + 1, max_length - ends + 1, width)
    return np.unique(np.concatenate([np.arange(1, min(ends, max_length) + 1), middle,
                                     np.arange(max(1, max_length - ends + 1), max_length + 1)]))


def balanced(histogram: np.ndarray, rows: int, ends: int = 0, *, up: bool = True) -> np.ndarray:
    """Groups whose widths follow the sequences: about ``rows`` of them, each of equal weight.

    Rounding a group up costs each of its ``n`` sequences about half its
    width ``w``: ``n w / 2`` tokens. With ``rows`` groups over the lengths,
    the sum is least when ``w`` goes as ``1 / sqrt(density)``, i.e. when each
    group holds an equal share of the sum of ``sqrt(count)`` over lengths.
    Each group ends at the length where that running sum crosses a multiple
    of the share, so a heavy length (a spike) ends its group and keeps its
    length; a length heavier than several shares is a group of its own. The
    ``up=False`` (groups for rounding down) makes that length *start* its
    group instead, so that rounding down keeps it. The
    ``ends`` shortest and longest lengths keep their own groups too (short
    sequences fill the last gaps of packs). On the suite's log-normal,
    bimodal and spike histograms at L=2,048-8,192 the rounded-up plan is
    0.18-0.27% above the bound with 512 of these groups (no time limit),
    0.27-0.60% with `groups` of width 32 and exact ends of 128.

    >>> h = np.array([0, 0, 0, 0, 9, 0, 0, 0, 1, 0])  # nine 5s and a 9
    >>> balanced(h, rows=2).tolist()  # groups 1-5, 6-9 and 10: 5 and 9 keep their lengths
    [1, 6, 10]
    >>> balanced(h, rows=2, ends=1).tolist()  # and 1 a group of its own
    [1, 2, 6, 10]
    >>> balanced(h, rows=2, up=False).tolist()  # groups 1-4, 5-8 and 9-10: 5 and 9 start them
    [1, 5, 9]
    """
    max_length = len(histogram)
    weight = np.cumsum(np.sqrt(np.asarray(histogram, dtype=np.float64)))
    if rows < 1 or weight[-1] <= 0.0:
        return groups(max_length, ends=ends, width=max_length)
    tops = np.searchsorted(weight, weight[-1] * np.arange(1, rows + 1) / rows) + 1
    tops = np.minimum(tops, max_length)
    edges = [[1], tops[tops < max_length] + 1 if up else tops,
             np.arange(1, min(ends + 1, max_length) + 1),
             np.arange(max(1, max_length - ends + 1), max_length + 1)]
    return np.unique(np.concatenate(edges).astype(np.int64))


def rounded(histogram: np.ndarray, starts: np.ndarray, *, up: bool) -> np.ndarray:
    """``histogram`` with every length rounded up (or down) within its group.

    >>> rounded(np.array([1, 1, 1, 0, 2]), np.array([1, 3, 5]), up=True).tolist()
    [0, 2, 0, 1, 2]
    >>> rounded(np.array([1, 1, 1, 0, 2]), np.array([1, 3, 5]), up=False).tolist()
    [2, 0, 1, 0, 2]
    """
    max_length = len(histogram)
    lengths = np.arange(1, max_length + 1)
    group = np.searchsorted(starts, lengths, side="right") - 1
    ends = np.append(starts[1:] - 1, max_length)
    target = (ends if up else starts)[group]
    return np.bincount(target - 1, weights=histogram, minlength=max_length).astype(np.int64)


def present(histogram: np.ndarray, rows: int, ends: int, spike=False, unit: int = 1) -> np.ndarray:
    """About ``rows`` groups of equal width over the lengths present, those at the ends exact.

    Group starts (the first is 1) for `rounded`: the ``ends`` shortest and
    longest lengths present are groups of their own (a spike of full windows
    at L keeps its length; with ``spike`` it always does: `Tuning.PROVE_ENDS`);
    the lengths between them are cut into groups of equal width. With ``unit``,
    the width is a multiple of it and each start is rounded down to one (1 where
    that is 0): rounded down, every length is then a multiple of ``unit`` (or 1),
    and the problem is solved in units (`_units.in_units`).

    >>> h = np.zeros(100, dtype=np.int64)
    >>> h[[39, 40, 41, 42, 43, 44, 45, 46, 99]] = 1  # 40-47 and 100
    >>> present(h, 2, ends=1).tolist()  # 40 and 100 exact, 41-44 and 45-47 (to 99)
    [1, 40, 41, 45, 100]
    >>> present(h, 2, ends=0, unit=4).tolist()  # 40-100 in widths of 32: 40-71, 72-100
    [1, 40, 72]
    """
    max_length = len(histogram)
    lengths = np.flatnonzero(histogram) + 1
    ends = min(ends, len(lengths) // 2)
    inner = lengths[ends: len(lengths) - ends]
    middle = np.zeros(0, dtype=np.int64)
    if len(inner):
        width = max(1, -(-(int(inner[-1]) - int(inner[0]) + 1) // rows))
        middle = np.arange(inner[0], inner[-1] + 1, -(-width // unit) * unit)
    exact = np.concatenate([lengths[:ends], lengths[len(lengths) - ends:],
                            [max_length] * bool(spike and histogram[-1])])
    edges = np.concatenate([[1], exact, exact + 1, middle]).astype(np.int64)
    edges = np.maximum(edges // unit * unit, 1)
    return np.unique(edges[edges <= max_length])


def split(starts: np.ndarray, lengths: np.ndarray, demand: np.ndarray, duals: np.ndarray,
          most: int, unit: int = 1) -> np.ndarray:
    """Group starts with up to ``most`` groups split in two: where rounding down loses most.

    ``lengths`` (ascending, tokens), ``demand`` and ``duals`` are the rows of an LP on
    ``starts`` rounded down (`rounded`): each row a group's start and its sequences.
    Rounded down to its start, a group's sequences are valued as that length is, while
    those near its end are worth about what the next group's start is: the bound it
    loses grows with ``demand x (next dual - own dual)``. The ``most`` groups where that
    is largest are cut at their middle (a multiple of ``unit``, as the starts are), and
    only groups at least two units wide. Where the duals rise in steps (three lengths
    just over L / 3 no longer fit), the splits go there, not across the flat stretches
    that uniform groups refine too (long-context 429/7: 206,136 on 689 groups, 206,052
    on 820 of equal width).

    >>> starts = np.array([1, 5, 9, 13])  # the group 5-8 holds 10 sequences, the dual jumps after
    >>> split(starts, np.array([1, 5, 9]), np.array([1, 10, 1]), np.array([0.1, 0.2, 0.5]),
    ...       most=1).tolist()
    [1, 5, 7, 9, 13]
    """
    ends = np.append(starts[1:], int(lengths[-1]) + 1 if len(lengths) else 1)
    group = np.searchsorted(starts, lengths, side="right") - 1
    jump = np.append(np.diff(duals), 0.0)
    width = ends[group] - starts[group]
    gain = np.where(width >= 2 * unit, demand * np.maximum(jump, 0.0), 0.0)
    chosen = np.argsort(-gain, kind="stable")[:most]
    chosen = chosen[gain[chosen] > 0.0]
    middles = (starts[group[chosen]] + width[chosen] // 2) // unit * unit
    middles = middles[middles > starts[group[chosen]]]
    return np.unique(np.concatenate([starts, middles]).astype(np.int64))


def real_packs(strategies: list[tuple[int, ...]], counts: np.ndarray, histogram: np.ndarray,
               starts: np.ndarray) -> dict[tuple[int, ...], int]:
    """The real lengths of ``histogram`` in the slots of a plan for its rounded-up histogram.

    Each slot of a group's longest length gets a sequence of that group (they
    are no longer, so every pack still fits), longest sequences into the first
    packs; slots left over are dropped, and so are packs left empty.

    Works on counts, not sequences (histograms may count billions): a group's
    sequences, longest first, are a stream of runs of equal lengths; the packs
    of a strategy take consecutive pieces of each of its groups' streams, so
    they are identical between the places where some stream changes run, and
    each stretch of identical packs is one entry. Compiled
    (``tfpack/packing/_kernels.c``): the packs of the Python loops it replaced,
    in the same order (tests/packing/groups_reference.py), 4-12x less CPU
    (benchmarks/results/planner_kernels.md; L=65,536: 0.05-0.06 s, 0.23 s in
    Python).

    Raises:
        AssertionError: the plan has fewer slots of a group than its sequences.

    >>> real_packs([(6, 2), (6,)], np.array([2, 1]), np.array([0, 2, 0, 1, 1, 1]),
    ...            np.array([1, 3]))
    {(6, 2): 1, (5, 2): 1, (4,): 1}
    """
    return kernels.real_packs([tuple(s) for s in strategies],
                              np.ascontiguousarray(counts, dtype=np.int64),
                              np.ascontiguousarray(histogram, dtype=np.int64),
                              np.ascontiguousarray(starts, dtype=np.int64))


def shrunk(packs, lengths: np.ndarray, fill: int = 0) -> list[tuple[int, ...]]:
    """``packs`` on ``lengths`` (ascending): each length the longest of them up to it, a
    pack with none dropped; with ``fill``, then each length (the pack's longest first) the
    longest of them within its own and the pack's free tokens (``fill`` less its lengths).

    Lengths only shrink, then grow within the room, so each pack that fitted ``fill`` still
    does. Packs of rounded-down or coarser lengths shrunk to finer ones lose the tokens
    rounding took, a group's width a sequence: as seeds of the LP on the finer lengths
    (`_paths.plan_up`, ``warm``) they start it far above its optimum, and the LP gains a few
    packs a round from there. Grown into their room, they start it closer (long-context seed
    15 case 4, L=12,288 depth 6, 1,357 rows: the first LP 152,869 -> 152,692, the plan cut
    by the budget 152,786 -> 152,598 packs on the token bound 152,312).

    >>> shrunk([(9, 5), (4,), (6, 6)], np.array([5, 8]))
    [(8, 5), (5, 5)]
    >>> shrunk([(9, 5), (4,), (6, 6)], np.array([2, 5, 8]), fill=15)  # 4 -> 2 -> 8; 5, 5 -> 8, 5
    [(8, 5), (8,), (8, 5)]
    """
    sizes = np.fromiter(map(len, packs), dtype=np.int64, count=len(packs))
    values = np.fromiter((v for pack in packs for v in pack), dtype=np.int64,
                         count=int(sizes.sum()))
    pack = np.repeat(np.arange(len(packs)), sizes)
    at = np.searchsorted(lengths, values, side="right") - 1
    pack, values = pack[at >= 0], np.asarray(lengths, dtype=np.int64)[at[at >= 0]]
    if fill:
        order = np.lexsort((-values, pack))  # (pack, longest first)
        pack, values = pack[order], values[order]
        free = np.maximum(fill - np.bincount(pack, weights=values, minlength=len(packs)), 0)
        free = free.astype(np.int64)
        rank = np.arange(len(pack)) - np.searchsorted(pack, pack)
        for r in range(int(rank.max(initial=-1)) + 1):
            at = np.flatnonzero(rank == r)
            grown = lengths[np.searchsorted(lengths, values[at] + free[pack[at]], side="right") - 1]
            free[pack[at]] -= grown - values[at]
            values[at] = grown
    cuts = np.flatnonzero(np.diff(pack)) + 1
    flat = values.tolist()
    return [tuple(flat[a:b]) for a, b in zip(np.r_[0, cuts].tolist(),
                                             np.r_[cuts, len(flat)].tolist()) if b > a]
