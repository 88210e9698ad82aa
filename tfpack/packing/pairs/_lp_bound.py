"""The two-dimensional LP bound: column generation over packs of (input, target) classes.

A pack of pairs must fit ``Le`` input tokens, ``Ld`` target tokens and at
most ``K`` pairs at once. The LP relaxation of the pattern formulation,
``minimize sum(x_p) subject to sum_p A_p x_p >= n, x >= 0`` over every
feasible pack ``p`` (``A_p[c]``: pairs of class ``c`` in ``p``), bounds the
packs of any plan from below, and unlike the one-length bounds of either side
(`bounds`) it knows that a pack cannot fill both rows with any mix of pairs.

Classes. The LP has a row per class. Up to ``most`` (`MOST_CLASSES`)
non-empty cells, classes are the cells. Past that, cells are grouped into
boxes (a k-d tree: the box that rounding costs most split at its weighted
median) and a pair's lengths are rounded *down* to its box's shortest ones:
every plan of the real pairs is a plan of the rounded ones, so a bound on the
rounded problem bounds the real one (it loses what the rounding takes: 3-4%
of the tokens at 600 classes on 24,000 log-normal cells). At the end, the
best duals are re-priced on the real lengths (`_lifted_worth`), which can
only raise the bound.

Column generation. The restricted master (`_lp.Master`, with zero-cost
columns letting a class stand in for one it dominates) starts from one-class
packs and, when given, the packs of a plan (then it starts at most at the
plan's packs: the LP is often near its optimum at once). Each round prices
the duals ``y`` (Wentges-smoothed towards the best so far): the best pack is
a two-dimensional knapsack with a cardinality limit, ``max y.x s.t. a.x <= Le,
b.x <= Ld, sum(x) <= K, 0 <= x <= n``. Bounds on its value ``v`` come from
one-length knapsacks every pack satisfies (`_Surrogate`: a weighted sum of
both rows; `_Lagrangian`: one row moved into the values), solved by the
compiled one-length pricing (`_knapsack.price`), and, at up to 4 pairs a pack,
from tables over both rows in units of a 256th of each limit (`_few_best`);
their candidate packs, repaired to fit both rows, are columns. When they find none, a HiGHS MIP
solves the knapsack itself (its dual bound is valid when it stops early).
Farley's bound ``y.n / max(1, v)`` is valid at every round (``y / v`` is
feasible for the dual of the full LP), whether the LP converged or the
budget ended first; the largest is kept.

Where it stands (benchmarks/results/pair_planner.md): it converges where
classes are few (a few hundred); on thousands of classes column generation
needs far more rounds than a second allows (each adds ~100 columns and takes
0.1-0.4 s), its duals stay far from the LP's (the best pack worth 1.3-1.6
under them) and Farley's bound stops well below the LP: it has not yet
raised a bound the planner reports on the benchmark suite.

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[1, 2] = 3  # three (6, 1), three (2, 3); Le=8, Ld=4
>>> result = lp_bound(counts, (8, 4, None))
>>> result.bound, result.converged  # a pack holds one of each: 3 packs
(3, True)
>>> counts[1, 2] = 0; counts[0, 3] = 3  # (6, 1) and (1, 4) overflow Ld=4 together
>>> lp_bound(counts, (8, 4, None)).bound  # the one-length bounds say 4
6
"""

from __future__ import annotations

import dataclasses
import heapq
import math

import highspy
import numpy as np
import scipy.sparse

from tfpack._fds import silenced
from tfpack.packing.algorithms._budget import Budget, OutOfTime
from tfpack.packing.algorithms import _knapsack
from tfpack.packing.algorithms._lp import Master
from tfpack.packing.pairs._packs import cells

__all__ = ["Classes", "LPBound", "classes", "lp_bound", "patterns_of"]

MOST_CLASSES = 1_000  # rows of the master LP at most (module notes)
_TOLERANCE = 1e-7  # a pack worth up to 1 + this under the duals does not improve the LP
_MIP_GAP = 1e-4  # pricing stops within this relative gap: its dual bound stays valid
_MIP_SECONDS = 0.1  # the pricing MIP's time, per round, at least (within the budget) ...
_MIP_SHARE = 0.25  # ... or this share of the time left
_MIP_NODES = 200  # branch-and-bound nodes of one pricing MIP at most


@dataclasses.dataclass(frozen=True)
class LPBound:
    """The outcome: the proven bound on packs, the last LP value and how it ended."""

    bound: int  # proven lower bound on the packs of any plan (0 when nothing was solved)
    value: float  # the last restricted master's optimum (an upper bound on the LP)
    farley: float  # the best Farley bound, before rounding up
    rounds: int
    classes: int
    converged: bool  # the LP was solved to optimality (then ``farley`` is its value)
    # The last restricted master's solution, for plans rounded from it (`_rounding`):
    # its columns ``(rows, copies)`` over the classes, their values, and the classes.
    columns: list = dataclasses.field(default=None, repr=False, compare=False)
    x: np.ndarray = dataclasses.field(default=None, repr=False, compare=False)
    grouped: Classes = dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Classes:
    """Pairs grouped into boxes of lengths, each rounded down to its box's shortest lengths.

    ``a``, ``b``, ``n``: each class's input length, target length and pairs
    (int64); ``cell_class[i, j]``: the class of the pairs of lengths
    ``(i + 1, j + 1)`` (-1 where there are none).
    """

    a: np.ndarray
    b: np.ndarray
    n: np.ndarray
    cell_class: np.ndarray

    def index(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Class of each pair of lengths ``(a, b)`` (every such pair was counted)."""
        return self.cell_class[a - 1, b - 1]


def classes(counts: np.ndarray, most: int = MOST_CLASSES) -> Classes:
    """Pairs grouped into at most ``most`` classes, lengths rounded down (module notes).

    Boxes split in two, the box that rounding costs most first (tokens lost,
    as shares of the limits), at its weighted median along the side that costs
    more, until there are ``most`` (a k-d tree): classes are finest where the
    pairs are.

    >>> counts = np.zeros((8, 4), dtype=np.int64); counts[[4, 5, 6], 1] = 1
    >>> grouped = classes(counts, most=1)
    >>> grouped.a.tolist(), grouped.b.tolist(), grouped.n.tolist()  # 5, 6, 7 rounded down to 5
    ([5], [2], [3])
    >>> classes(counts, most=2).a.tolist()
    [5, 6]
    """
    a, b, n = cells(counts)
    box = _boxes(a, b, n, counts.shape, most) if a.size > most else np.arange(a.size)
    order = np.lexsort((b, a, box))
    first = np.ones(a.size, dtype=bool)
    first[1:] = box[order][1:] != box[order][:-1]
    ids = np.cumsum(first) - 1
    cls = np.empty(a.size, dtype=np.int64)
    cls[order] = ids
    k = int(ids[-1]) + 1 if a.size else 0
    rep_a = np.full(k, counts.shape[0], dtype=np.int64)
    rep_b = np.full(k, counts.shape[1], dtype=np.int64)
    np.minimum.at(rep_a, cls, a)
    np.minimum.at(rep_b, cls, b)
    cell_class = np.full(counts.shape, -1, dtype=np.int64)
    cell_class[a - 1, b - 1] = cls
    return Classes(rep_a, rep_b, np.bincount(cls, n, k).astype(np.int64), cell_class)


def _boxes(a, b, n, shape, most) -> np.ndarray:
    """Box of each cell after ``most - 1`` splits (`classes`)."""
    box = np.zeros(a.size, dtype=np.int64)
    members = {0: np.arange(a.size)}

    def cost(rows):
        ca = float(n[rows] @ (a[rows] - a[rows].min())) / shape[0]
        cb = float(n[rows] @ (b[rows] - b[rows].min())) / shape[1]
        return ca, cb

    heap = [(-sum(cost(members[0])), 0)]
    while len(members) < most and heap:
        loss, k = heapq.heappop(heap)
        rows = members[k]
        if loss == 0.0:
            break
        ca, cb = cost(rows)
        side = a if ca >= cb else b
        values = side[rows]
        order = np.argsort(values, kind="stable")
        half = np.searchsorted(np.cumsum(n[rows][order]), n[rows].sum() / 2)
        cut = values[order][min(half, order.size - 1)]
        low = values < cut if values.min() < cut else values <= cut
        if low.all():
            low = values < values.max()
        parts = (rows[low], rows[~low])
        new = len(members)
        members[k], members[new] = parts
        box[parts[1]] = new
        for key in (k, new):
            heapq.heappush(heap, (-sum(cost(members[key])), key))
    return box


def patterns_of(grouped: Classes, pack: np.ndarray, a: np.ndarray, b: np.ndarray,
                most: int = 20_000) -> list[tuple[np.ndarray, np.ndarray]]:
    """The distinct packs of a plan (pairs ``(a, b)`` in ``pack``), at most ``most``, as columns.

    A column is ``(rows, copies)``: the classes of a pack's pairs and how many of each.
    """
    c = grouped.index(a, b)
    # A pack's contents as one number: the sum of random 64-bit keys of its classes (mod 2^64).
    keys = np.random.default_rng(0).integers(0, 2**63, grouped.n.size, dtype=np.int64).view(np.uint64)
    signature = np.zeros(int(pack.max()) + 1, dtype=np.uint64)
    np.add.at(signature, pack, keys[c])
    _, first = np.unique(signature, return_index=True)
    first = np.sort(first[:most])  # one pack of each kind, by id
    chosen = np.zeros(signature.size, dtype=bool)
    chosen[first] = True
    rows = np.flatnonzero(chosen[pack])
    code = np.searchsorted(first, pack[rows]) * grouped.n.size + c[rows]
    code, copies = np.unique(code, return_counts=True)
    slot, cls = np.divmod(code, grouped.n.size)
    cuts = np.flatnonzero(np.diff(slot)) + 1
    return list(zip(np.split(cls, cuts), np.split(copies.astype(np.int64), cuts)))


def lp_bound(counts: np.ndarray, limits, budget: Budget | None = None,
             most: int = MOST_CLASSES, plan=None, most_rounds: int | None = None) -> LPBound:
    """The two-dimensional LP bound (module notes), within ``budget``.

    ``plan``: optional pairs placed by a planner (`_first_fit.Placed`): its
    packs are the first columns, so the LP starts at most at its packs.
    ``most_rounds``: stop after that many rounds (the bound stays valid).
    """
    max_input, max_target, depth = limits
    grouped = classes(counts, most)
    a, b, n = grouped.a, grouped.b, grouped.n
    if not n.size:
        return LPBound(0, 0.0, 0.0, 0, 0, True)
    depth = int(min(depth or n.sum(), n.sum()))
    fit = np.minimum(np.minimum(max_input // a, max_target // b), np.minimum(n, depth))
    master = Master(n.astype(np.float64), _serving(a, b))
    master.add([(np.array([c]), np.array([fit[c]])) for c in range(n.size)])
    if plan is not None:
        master.add(patterns_of(grouped, plan.pack, plan.a, plan.b))
    surrogates = [_Surrogate(a, b, fit, limits[:2], depth, weights) for weights in _WEIGHTS]
    surrogates += [_Lagrangian(a, b, fit, limits[:2], depth, side) for side in (0, 1)]
    if depth <= FEW:
        surrogates.append(_Few(a, b, fit, limits[:2], depth))
    exact = None
    best, center, value, rounds, converged, x = 0.0, None, math.inf, 0, False, None
    while (budget is None or not budget.expired()) and rounds != most_rounds:
        try:
            value, x, duals = master.solve(budget)
            # Wentges smoothing: price at a mix of the duals with the best bound so far and these.
            at = duals if center is None else _SMOOTHING * center + (1 - _SMOOTHING) * duals
            worth, packs = _price(surrogates, at, budget)
            packs = [p for p in packs if duals @ p > 1.0 + _TOLERANCE]
            if not packs and at is not duals:
                at = duals  # mispriced: no column improves this LP; price at its own duals
                worth, packs = _price(surrogates, at, budget)
            if not packs and worth > 1.0 + _TOLERANCE:
                exact = exact or _Pricing(a, b, fit, limits[:2], depth)
                bound, pack = exact.best(at, budget)
                worth = min(worth, bound)
                packs = [] if pack is None or duals @ pack <= 1.0 + _TOLERANCE else [pack]
        except OutOfTime:
            break
        rounds += 1
        farley = float(at @ n) / max(1.0, worth)
        if farley > best:
            best, center = farley, at
        if not packs:
            converged = worth <= 1.0 + _TOLERANCE and at is duals
            break
        master.add(_distinct(packs))
    if center is not None and grouped.n.size < np.count_nonzero(counts):
        # The best duals, given to every pair of a class, priced on the pairs' own lengths.
        best = max(best, float(center @ n) / max(1.0, _lifted_worth(counts, grouped, center, limits, depth)))
    bound = math.ceil(best - 1e-6 * max(1.0, best))
    columns = master.columns[:0 if x is None else x.size]
    return LPBound(bound, value, best, rounds, int(n.size), converged, columns, x, grouped)


def _price(surrogates, duals, budget) -> tuple[float, list[np.ndarray]]:
    """The least surrogate bound on a pack's worth under ``duals``, and the packs they found."""
    worth, packs = math.inf, []
    for surrogate in surrogates:
        bound, found = surrogate.price(duals, budget)
        worth = min(worth, bound)
        packs += found
    return worth, packs


def _serving(a: np.ndarray, b: np.ndarray):
    """Zero-cost columns: a pair of class c may stand in for one of a class it dominates.

    A pack holding a pair of lengths (a, b) still fits with one of (a', b'),
    a' <= a and b' <= b, instead; the LP's value stays and its duals become
    monotone (dual-optimal inequalities), which steadies column generation.
    One column to the nearest dominated class along each side's classes.
    """
    order = np.lexsort((a, b))  # by target, then input: neighbours along the input side
    same = b[order][1:] == b[order][:-1]
    edges = [(order[1:][same], order[:-1][same])]
    order = np.lexsort((b, a))
    same = a[order][1:] == a[order][:-1]
    edges.append((order[1:][same], order[:-1][same]))
    giver = np.concatenate([e[0] for e in edges])
    taker = np.concatenate([e[1] for e in edges])
    k = giver.size
    rows = np.stack([taker, giver], axis=1).ravel()
    data = np.tile([1.0, -1.0], k)
    return scipy.sparse.csc_array((data, rows, np.arange(0, 2 * k + 1, 2)), shape=(a.size, k))


_SMOOTHING = 0.5  # Wentges: the share of the best duals so far in the duals priced


# Surrogate constraints priced each round: alpha a / Le + beta b / Ld <= alpha + beta.
_WEIGHTS = ((1, 0), (0, 1), (1, 1), (3, 1), (1, 3))
_SCALE = 4096  # the surrogate knapsack's capacity, about


class _Surrogate:
    """A one-length knapsack that every pack satisfies: its best value bounds the pricing's.

    A pack within ``Le`` and ``Ld`` has ``alpha Ld a + beta Le b <= (alpha + beta)
    Le Ld`` summed over its pairs, and so, each term divided by ``u`` and rounded
    down (integers throughout), ``sum(w) <= C``: the one-length knapsack on sizes
    ``w`` and capacity ``C`` allows every two-length pack (and more), so its best
    value is at least the pricing's. Its candidate packs that fit both rows are
    columns.
    """

    def __init__(self, a, b, fit, capacities, depth, weights) -> None:
        alpha, beta = weights
        max_input, max_target = capacities
        size = alpha * max_target * a + beta * max_input * b
        capacity = (alpha + beta) * max_input * max_target
        unit = max(1, min(int(size.min()), capacity // _SCALE))
        self.order = np.argsort(size // unit, kind="stable")
        self.size = (size // unit)[self.order]
        self.capacity = capacity // unit
        self.fit, self.depth = fit[self.order], depth
        self.a, self.b, self.capacities = a, b, capacities

    def price(self, duals, budget) -> tuple[float, list[np.ndarray]]:
        """An upper bound on the best pack's worth, and the packs found worth more than 1."""
        found = _knapsack.price(self.size, self.fit, duals[self.order], self.capacity, self.depth,
                                min_value=1.0 + _TOLERANCE, max_patterns=_PACKS)
        return found.best_value, _columns(found, self.order, duals, self.a, self.b, self.capacities)


class _Lagrangian:
    """The pricing with one row's limit moved into the values: a bound from the other row alone.

    For ``mu >= 0`` a pack ``x`` that fits both rows has ``y.x <= (y - mu r).x +
    mu R`` (``r``: the relaxed row's lengths, ``R`` its limit), so the best
    one-length knapsack on the kept row with values ``max(0, y - mu r)``, plus
    ``mu R``, bounds the best pack's worth from above. That bound is convex in
    ``mu``; a golden-section search finds a small one. Its candidate packs,
    repaired to fit both rows, are columns.
    """

    def __init__(self, a, b, fit, capacities, depth, side) -> None:
        kept, relaxed = (a, b) if side == 0 else (b, a)
        self.order = np.argsort(kept, kind="stable")
        self.size, self.relaxed = kept[self.order], relaxed[self.order].astype(np.float64)
        self.capacity, self.limit = capacities[side], capacities[1 - side]
        self.fit, self.depth = fit[self.order], depth
        self.a, self.b, self.capacities = a, b, capacities

    def _at(self, duals, mu):
        values = np.maximum(duals[self.order] - mu * self.relaxed, 0.0)
        found = _knapsack.price(self.size, self.fit, values, self.capacity, self.depth,
                                min_value=max(0.0, 1.0 - mu * self.limit), max_patterns=_PACKS)
        return found.best_value + mu * self.limit, found

    def price(self, duals, budget) -> tuple[float, list[np.ndarray]]:
        """An upper bound on the best pack's worth, and the packs found worth more than 1."""
        points = {}

        def value(mu):
            points[mu] = self._at(duals, mu)
            return points[mu][0]

        best = _golden(value, float((duals[self.order] / self.relaxed).max(initial=0.0)))
        return best, [pack for _, found in points.values()
                      for pack in _columns(found, self.order, duals, self.a, self.b, self.capacities)]


def _columns(found, order, duals, a, b, capacities) -> list[np.ndarray]:
    """A one-length knapsack's candidate packs (rows in ``order``), repaired, worth more than 1."""
    packs = []
    for rows, copies in found.patterns:
        pack = np.zeros(a.size, dtype=np.int64)
        pack[order[rows]] = copies
        pack = _repaired(pack, duals, a, b, capacities)
        if duals @ pack > 1.0 + _TOLERANCE:
            packs.append(pack)
    return packs


_SEARCH = 5  # golden-section steps of `_Lagrangian` (6-10 knapsacks)


def _lifted_worth(counts, grouped: Classes, duals, limits, depth: int) -> float:
    """An upper bound on a pack's worth when each pair has its class's dual, on real lengths.

    Rounding to classes makes pairs shorter, so packs of the real pairs are
    worth no more: Farley's bound from these duals is at least the classes'.
    Bounded as `_Lagrangian` does, one row relaxed, on the other row's lengths,
    each length worth the most any of its pairs is and as many copies as all
    of them fit: every real pack is one of that knapsack's.
    """
    a, b, n = cells(counts)
    y = duals[grouped.index(a, b)]
    fit = np.minimum(np.minimum(limits[0] // a, limits[1] // b), np.minimum(n, depth))
    worth = math.inf
    for kept, relaxed, capacity, limit in ((a, b, limits[0], limits[1]), (b, a, limits[1], limits[0])):
        lengths, inverse = np.unique(kept, return_inverse=True)
        copies = np.minimum(np.bincount(inverse, fit, lengths.size).astype(np.int64), depth)

        def at(mu):
            values = np.zeros(lengths.size)
            np.maximum.at(values, inverse, y - mu * relaxed)
            return _knapsack.price(lengths, copies, values, capacity, depth, min_value=math.inf,
                                   max_patterns=1).best_value + mu * limit

        worth = min(worth, _golden(at, float((y / relaxed).max(initial=0.0))))
    return worth


def _golden(function, high: float) -> float:
    """The least value of ``function`` (convex on [0, high]) seen by a golden-section search."""
    ratio, low, seen = (math.sqrt(5) - 1) / 2, 0.0, {}
    for _ in range(_SEARCH):
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        for x in (left, right):
            if x not in seen:
                seen[x] = function(x)
        if seen[left] <= seen[right]:
            high = right
        else:
            low = left
    return min(seen.values())


FEW = 4  # up to this many pairs a pack, `_few_best` prices on 2-D tables
_UNITS = 256  # `_few_best`'s tables: at most this many units a row


def _few_best(a, b, fit, duals, capacities, depth: int) -> tuple[float, np.ndarray]:
    """With at most 4 pairs a pack: an upper bound on the best pack's worth, and a good pack.

    Lengths are counted in units of ``u`` tokens, rounded down (a pack within
    ``Le`` tokens is within ``Le // u`` units), and copy limits are dropped:
    both only allow more packs, so the value bounds the best pack's. ``one[e,
    d]``: the best single pair within ``e`` and ``d`` units (a running maximum
    over both axes); ``two``: the best one or two, ``max_c y_c + one[e - a_c,
    d - b_c]``. A pack of at most four pairs is two halves of at most two
    within the limits together: worth at most ``max(two[e, d] + two[E - e, D - d])``.
    The pack that attains it (repaired to fit in tokens and copies) is a column.
    """
    units = [max(1, -(-limit // _UNITS)) for limit in capacities]
    rows, cols = capacities[0] // units[0], capacities[1] // units[1]
    wa, wb = a // units[0], b // units[1]
    keep = np.flatnonzero(duals > 0)
    keep = keep[np.lexsort((-duals[keep],))]
    one = np.zeros((rows + 1, cols + 1))
    who = np.full((rows + 1, cols + 1), -1, dtype=np.int64)
    # The best class at each cell, then running maxima carrying the class along.
    first = keep[::-1]  # ascending duals: the best written last wins
    one[wa[first], wb[first]] = duals[first]
    who[wa[first], wb[first]] = first
    for axis in (0, 1):
        one, who = _running_max(one, who, axis)
    two, left, right = one.copy(), who.copy(), np.full_like(who, -1)
    for c in keep.tolist():
        e, d = int(wa[c]), int(wb[c])
        value = duals[c] + one[:rows + 1 - e, :cols + 1 - d]
        better = value > two[e:, d:]
        two[e:, d:][better] = value[better]
        left[e:, d:][better] = c
        right[e:, d:][better] = who[:rows + 1 - e, :cols + 1 - d][better]
    if depth <= 2:
        worth = float((one if depth == 1 else two)[rows, cols])
        members = [who[rows, cols]] if depth == 1 else [left[rows, cols], right[rows, cols]]
    else:
        total = (one if depth == 3 else two) + two[::-1, ::-1]
        e, d = np.unravel_index(int(np.argmax(total)), total.shape)
        worth = float(total[e, d])
        members = [left[rows - e, cols - d], right[rows - e, cols - d]]
        members += [who[e, d]] if depth == 3 else [left[e, d], right[e, d]]
    # Within the copies there are and the rows' tokens (units rounded down may overflow).
    pack = np.minimum(_pack_of(members, a.size), fit)
    return worth, _repaired(pack, duals, a, b, capacities)


class _Few:
    """`_few_best` as a pricing step: its bound and its pack."""

    def __init__(self, a, b, fit, capacities, depth) -> None:
        self.args = a, b, fit
        self.capacities, self.depth = capacities, depth

    def price(self, duals, budget) -> tuple[float, list[np.ndarray]]:
        worth, pack = _few_best(*self.args, duals, self.capacities, self.depth)
        return worth, [pack] if duals @ pack > 1.0 + _TOLERANCE else []


def _running_max(values, ids, axis):
    """Running maximum along ``axis`` and the id that holds it."""
    values, ids = values.copy(), ids.copy()
    view_v, view_i = np.moveaxis(values, axis, 0), np.moveaxis(ids, axis, 0)
    for k in range(1, view_v.shape[0]):
        take = view_v[k - 1] > view_v[k]
        view_v[k][take] = view_v[k - 1][take]
        view_i[k][take] = view_i[k - 1][take]
    return values, ids


def _pack_of(members, size: int) -> np.ndarray:
    """Copies per class of the classes listed (-1: none)."""
    members = np.asarray([m for m in members if m >= 0], dtype=np.int64)
    return np.bincount(members, minlength=size).astype(np.int64)


def _repaired(pack, duals, a, b, capacities) -> np.ndarray:
    """``pack`` made to fit both rows: copies of least worth per token over given back, one at a time."""
    over = np.array([pack @ a - capacities[0], pack @ b - capacities[1]], dtype=np.float64)
    while over.max() > 0:
        rows = np.flatnonzero(pack)
        cost = np.maximum(over[0], 0) * a[rows] / capacities[0] + np.maximum(over[1], 0) * b[rows] / capacities[1]
        row = rows[np.argmin(duals[rows] / cost)]
        pack[row] -= 1
        over -= (a[row], b[row])
    return pack


_PACKS = 16  # candidate packs a surrogate knapsack returns each round


def _distinct(packs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packs (copies per class) as master columns ``(rows, copies)``, each once."""
    unique = np.unique(np.stack(packs), axis=0)
    return [(np.flatnonzero(p), p[np.flatnonzero(p)]) for p in unique]


class _Pricing:
    """The pricing MIP, built once; each call changes its objective to the duals."""

    def __init__(self, a, b, upper, capacities, depth) -> None:
        with silenced(1):  # highspy prints its banner while it is constructed
            highs = highspy.Highs()
        highs.setOptionValue("output_flag", False)
        highs.setOptionValue("mip_rel_gap", _MIP_GAP)
        # Without a budget, a node limit (the same answer on every machine) bounds each search.
        highs.setOptionValue("mip_max_nodes", _MIP_NODES)
        k = a.size
        inf = highs.getInfinity()
        highs.addVars(k, np.zeros(k), upper.astype(np.float64))
        highs.changeColsIntegrality(k, np.arange(k, dtype=np.int32),
                                    np.full(k, highspy.HighsVarType.kInteger))
        index = np.arange(k, dtype=np.int32)
        for weights, capacity in ((a, capacities[0]), (b, capacities[1]), (np.ones(k), depth)):
            highs.addRow(-inf, float(capacity), k, index, np.asarray(weights, dtype=np.float64))
        highs.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.highs, self.k = highs, k

    def best(self, duals: np.ndarray, budget: Budget | None) -> tuple[float, np.ndarray | None]:
        """An upper bound on the most a pack is worth under ``duals``, and the best pack found."""
        highs = self.highs
        highs.changeColsCost(self.k, np.arange(self.k, dtype=np.int32), duals.astype(np.float64))
        # A short search: its incumbent is a column, its dual bound a valid (if weaker) bound.
        if budget is not None:
            seconds = min(max(_MIP_SECONDS, _MIP_SHARE * budget.wall_left()), budget.wall_left())
            highs.setOptionValue("time_limit", float(highs.getRunTime() + seconds))
        highs.run()
        info = highs.getInfo()
        bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else math.inf
        pack = None
        if info.primal_solution_status != 0:
            pack = np.rint(np.asarray(highs.getSolution().col_value)).astype(np.int64)
        return bound, pack

