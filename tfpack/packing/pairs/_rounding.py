"""Plans rounded from the two-length LP, for histograms where both rows bind.

The LP of `_lp_bound` (packs of length classes, column generation) knows
which mixes of pairs fill both rows of a pack; templates on one side or on a
blend of both (`_templates`, `_blend`) do not. Its solution ``x`` (packs of
each column) is rounded down: ``floor(x_p)`` packs of column ``p``, each with
slots of its classes. The pairs of a class take its slots, the most
input-heavy into the packs that hold the most targets relative to inputs so
far (`_blend._assign`); a class with more pairs than slots leaves out its
smallest pairs. Classes round lengths down (`_lp_bound.classes`), so a pack
may overflow a row: it gives back pairs (`_blend._fitting`), and the pairs
left out or given back go by first fit decreasing into the room left, then
into new packs (`_first_fit.refit`). Every plan it returns is valid; how good
it is depends on how close to the LP's optimum the solution was.

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[1, 2] = 3  # three (6, 1), three (2, 3): one of each fills (8, 4)
>>> placed, result = rounded(counts, (8, 4, None), time_limit=None)
>>> placed.packs, result.bound
(3, 3)
"""

from __future__ import annotations


import numpy as np

from tfpack.packing.algorithms._budget import Budget
from tfpack.packing.pairs import _lp_bound
from tfpack.packing.pairs._blend import _assign, _fitting
from tfpack.packing.pairs._first_fit import Placed, refit
from tfpack.packing.pairs._packs import cells

__all__ = ["from_solution", "rounded"]


def rounded(counts: np.ndarray, limits, time_limit: float | None, most: int = _lp_bound.MOST_CLASSES,
            plan: Placed | None = None, converged: bool = False) -> tuple[Placed | None, _lp_bound.LPBound]:
    """A plan rounded from the LP solved in ``time_limit`` (module notes), and the LP's outcome.

    The plan is None where no LP was solved in time, or, with ``converged``,
    where column generation stopped before the LP's optimum: rounded from there
    it lost to the plan it was seeded with in every case measured (1e6 pairs,
    512/128: bimodal K=16 295,022 vs 250,530; balanced K=4 279,628 vs 268,960),
    and rounding costs 0.5-1 s CPU on 1e6 pairs.
    """
    result = _lp_bound.lp_bound(counts, limits, Budget(time_limit), most=most, plan=plan)
    if result.x is None or not result.columns or (converged and not result.converged):
        return None, result
    return from_solution(counts, limits, result.columns, result.x, result.grouped), result


def from_solution(counts: np.ndarray, limits, columns, x: np.ndarray, grouped: _lp_bound.Classes,
                  flows: np.ndarray | None = None) -> Placed:
    """A plan from an LP solution: ``x[p]`` packs of column ``p`` (``(rows, copies)`` over ``grouped``).

    Rounded down, filled with the pairs of each class, repaired and completed
    by first fit (module notes); valid for any ``x >= 0``. ``flows``: the
    values of the LP's zero-cost columns (`_lp_bound._serving`), which
    pairs left out then follow first (`_followed`).
    """
    take = np.floor(x + 1e-9).astype(np.int64)
    slot_pack, slot_class, packs = _slots(columns, take)
    a, b, n = cells(counts)
    cls = grouped.index(a, b)
    slots = np.bincount(slot_class, minlength=grouped.n.size)
    assigned = _assigned(a, b, n, cls, slots, limits)
    if flows is not None:
        a, b, n, cls, assigned = _followed(a, b, n, cls, assigned, slots, grouped, limits, flows)
    a, b, n, cls, assigned = _redirected(a, b, n, cls, assigned, slots, grouped, limits)
    # `_assign` places sizes 1.. largest first: classes ranked by their share of both limits.
    weight = grouped.a / limits[0] + grouped.b / limits[1]
    rank = np.empty(weight.size, dtype=np.int64)
    rank[np.argsort(weight, kind="stable")] = np.arange(1, weight.size + 1)
    pack, pa, pb = _assign(a, b, assigned, rank[cls], slot_pack, rank[slot_class], limits, max(packs, 1))
    keep = _fitting(pack, pa, pb, limits, max(packs, 1))
    left = n - assigned
    everything = Placed(np.concatenate([pack, np.zeros(int(left.sum()), np.int64)]),
                        np.concatenate([pa, np.repeat(a, left)]), np.concatenate([pb, np.repeat(b, left)]),
                        max(packs, 1))
    keep = np.concatenate([keep, np.zeros(int(left.sum()), dtype=bool)])
    return refit(everything, keep, limits, counts.shape)


def _slots(columns, take: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """One row per slot of the rounded packs: its pack id and its class; the packs."""
    used = np.flatnonzero(take)
    if not used.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    first = np.concatenate([[0], np.cumsum(take[used])])
    packs, classes = [], []
    for j, start in zip(used.tolist(), first[:-1].tolist()):
        rows, copies = columns[j]
        per_pack = np.repeat(rows, copies)
        count = int(take[j])
        packs.append(np.repeat(np.arange(start, start + count), per_pack.size))
        classes.append(np.tile(per_pack, count))
    return np.concatenate(packs), np.concatenate(classes).astype(np.int64), int(first[-1])


def _followed(a, b, n, cls, assigned, slots, grouped, limits, flows):
    """Pairs left out given empty slots along the LP's own flows between classes.

    A zero-cost column of the LP passes ``flows[j]`` slots of a class (the
    giver) to the next class it dominates (the taker, `_lp_bound._serving`).
    Classes go from the longest down (a giver before its takers): a class's
    pool is its empty slots and the slots passed to it (each still the slot
    of the class that holds it, which dominates this one); its pairs left out
    take them, least long first, then it passes the flows on, rounded, as far
    as its pool goes. Where the rounded-down packs leave the flows short,
    `_redirected` and first fit place the rest. (1e6 bimodal pairs at
    2048/512, K=4: the LP's 263,557 packs; 268,172 from `_redirected` alone.)
    """
    serving = _lp_bound._serving(grouped.a, grouped.b).tocsc()
    taker = serving.indices[serving.data > 0]  # one +1 (taker) and one -1 (giver) a column, in order
    giver = serving.indices[serving.data < 0]
    weight = grouped.a / limits[0] + grouped.b / limits[1]
    left = n - assigned
    deficit = np.bincount(cls, left, slots.size).astype(np.int64)
    pools: list[dict[int, int]] = [{} for _ in range(slots.size)]
    for c, spare in enumerate((slots - np.bincount(cls, assigned, slots.size)).astype(np.int64).tolist()):
        if spare:
            pools[c][c] = spare
    out_edges: dict[int, list[tuple[int, float]]] = {}
    for j in np.flatnonzero(flows > 0.5).tolist():
        out_edges.setdefault(int(giver[j]), []).append((int(taker[j]), float(flows[j])))
    taken = []  # (class, slot class, pairs)
    for c in np.argsort(-weight, kind="stable").tolist():
        pool = pools[c]
        # Its own empty slots are skipped: no pair of it is left out while they are.
        taken += [(c, origin, moved) for origin, moved in _drawn(pool, int(deficit[c]), weight, skip=c)]
        for t, flow in out_edges.get(c, []):
            for origin, moved in _drawn(pool, int(round(flow)), weight):
                pools[t][origin] = pools[t].get(origin, 0) + moved
    if not taken:
        return a, b, n, cls, assigned
    return _moved(a, b, n, cls, assigned, limits, np.array(taken, dtype=np.int64).reshape(-1, 3))


def _drawn(pool: dict[int, int], amount: int, weight: np.ndarray, skip: int | None = None
           ) -> list[tuple[int, int]]:
    """Up to ``amount`` slots taken out of ``pool`` (slot class -> slots), least long class first.

    >>> pool = {0: 2, 1: 3}
    >>> _drawn(pool, 4, np.array([0.9, 0.5])), pool
    ([(1, 3), (0, 1)], {0: 1, 1: 0})
    """
    drawn = []
    for origin in sorted(pool, key=lambda o: weight[o]):
        if not amount:
            break
        moved = 0 if origin == skip else min(amount, pool[origin])
        if moved:
            pool[origin] -= moved
            amount -= moved
            drawn.append((origin, moved))
    return drawn


def _moved(a, b, n, cls, assigned, limits, taken):
    """Rows added for ``taken[i] = (class, slot class, pairs)``: a class's cells left out, largest first."""
    left = n - assigned
    rows = np.flatnonzero(left)
    rows = rows[np.lexsort((-(a / limits[0] + b / limits[1])[rows], cls[rows]))]
    # Each class's rows and takes as slices (one sort each, not a scan of all of them a class:
    # 2 s on 1e6 bimodal pairs at 2048/512, K=4).
    taken = taken[np.argsort(taken[:, 0], kind="stable")]
    classes, firsts = np.unique(taken[:, 0], return_index=True)
    lasts = np.append(firsts[1:], taken.shape[0])
    row_starts = np.searchsorted(cls[rows], np.stack([classes, classes + 1]))
    extra = []
    for first, last, lo_row, hi_row in zip(firsts.tolist(), lasts.tolist(), *row_starts.tolist()):
        members = rows[lo_row:hi_row]
        given = taken[first:last]
        need, have = np.cumsum(left[members]), np.cumsum(given[:, 2])
        edges = np.union1d(np.concatenate([[0], need]), np.concatenate([[0], have]))
        edges = edges[edges <= min(need[-1], have[-1])]
        lo, hi = edges[:-1], edges[1:]
        cell = np.searchsorted(need, lo, side="right")
        extra.append(np.stack([members[cell], given[np.searchsorted(have, lo, side="right"), 1], hi - lo]))
    rows, targets, moved = np.concatenate(extra, axis=1)
    return _added(a, b, n, cls, left - np.bincount(rows, moved, left.size).astype(np.int64), rows, targets, moved)


def _added(a, b, n, cls, left, rows, targets, moved):
    """Cells with rows added: ``moved[i]`` pairs of cell ``rows[i]`` in slots of class ``targets[i]``.

    ``left``: each cell's pairs still left out after the moves.
    """
    n = n - np.bincount(rows, moved, n.size).astype(np.int64)  # the moved pairs leave their cell's row
    return (np.concatenate([a, a[rows]]), np.concatenate([b, b[rows]]), np.concatenate([n, moved]),
            np.concatenate([cls, targets]), np.concatenate([n - left, moved]))


def _redirected(a, b, n, cls, assigned, slots, grouped, limits):
    """Pairs left out given the empty slots of classes at least as long as theirs on both sides.

    The LP may cover a class with packs of a class that dominates it (its
    zero-cost columns), so some classes have more pairs than slots and others
    empty slots. Cells come largest first; each takes the empty slots of the
    least long class that dominates its class (its class's lengths, not its
    own: 1e6 bimodal pairs, K=4, 262,856 -> 262,432 packs; a pack that
    overflows is repaired). Rows are added for the pairs moved, with the class
    of their slots. Each class walks its dominating classes, least long first,
    once (slots only empty): 4.8 s -> 0.3 s on 265,000 cells.
    """
    empty = (slots - np.bincount(cls, assigned, slots.size)).astype(np.int64).tolist()
    left = n - assigned
    weight = grouped.a / limits[0] + grouped.b / limits[1]
    by_weight = np.argsort(weight, kind="stable")
    walks: dict[int, tuple[list[int], list[int]]] = {}  # class -> (dominating classes in order, position)
    extra = []
    rows = np.flatnonzero(left)
    for row in rows[np.argsort(-(a / limits[0] + b / limits[1])[rows], kind="stable")].tolist():
        c = int(cls[row])
        if c not in walks:
            dominating = (grouped.a[by_weight] >= grouped.a[c]) & (grouped.b[by_weight] >= grouped.b[c])
            walks[c] = (by_weight[dominating].tolist(), [0])
        order, at = walks[c]
        need = int(left[row])
        while need and at[0] < len(order):
            target = order[at[0]]
            if not empty[target]:
                at[0] += 1
                continue
            moved = min(need, empty[target])
            empty[target] -= moved
            need -= moved
            extra.append((row, target, moved))
        left[row] = need
    if not extra:
        return a, b, n, cls, assigned
    return _added(a, b, n, cls, left, *(np.array(column, dtype=np.int64) for column in zip(*extra)))


def _assigned(a, b, n, cls, slots, limits) -> np.ndarray:
    """Pairs of each cell given a slot: a class fills its slots with its largest pairs first."""
    size = a / limits[0] + b / limits[1]
    order = np.lexsort((-size, cls))
    counts = n[order]
    before = np.cumsum(counts) - counts  # pairs of earlier cells, from the start of the array
    start = np.zeros(slots.size + 1, dtype=np.int64)
    np.add.at(start, cls[order] + 1, counts)
    start = np.cumsum(start)[cls[order]]  # where each cell's class begins
    room = np.maximum(slots[cls[order]] - (before - start), 0)
    out = np.empty_like(n)
    out[order] = np.minimum(counts, room)
    return out
