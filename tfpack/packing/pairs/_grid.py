"""The two-length LP on a grid of units: a plan from above and a bound from below.

Each row's limit is cut into ``G`` units (``Le / G`` input tokens, ``Ld / G``
target tokens). A pair of lengths ``(a, b)`` is rounded *up* to whole units,
``(ceil(a G / Le), ceil(b G / Ld))``, for the plan, and *down*, ``(ceil(a (G
+ 1) / Le) - 1, ceil(b (G + 1) / Ld) - 1)``, for the bound (`_units`:
below ``a (G + 1) / L``, at least ``floor(a G / L)``); pairs on the same
units form a class. A pack of units fits ``G`` units a row and at most ``K``
pairs. Both LPs, ``minimize sum(x_p) subject to sum_p A_p x_p >= n, x >= 0``
over packs of units ``p`` (``A_p[c]``: pairs of class ``c`` in ``p``), are
solved by column generation with exact pricing (below).

- Plan (rounded up). A real pair is at most its units' tokens
  (``a <= ceil(a G / Le) Le / G``), so a pack of rounded-up classes within
  ``G`` units a row holds any real pairs of those classes. The restricted
  master is feasible at every round: its solution, each column's packs
  rounded down, filled with the real pairs of its classes, and the pairs
  left over placed by first fit (`_rounding.from_solution`), is a valid plan
  whether or not the LP converged.
- Bound (rounded down). A real pack, rounded down, is a pack of units: on
  each row ``sum (ceil(a (G + 1) / L) - 1) < sum a (G + 1) / L <= G + 1``,
  and a sum of whole units under ``G + 1`` is at most ``G``; same pairs.
  (``floor(a G / L)`` is also valid but loses half a unit a pair where this
  loses about ``1/2 - a / L``: a pack's pairs win back about a unit a row;
  1e5 balanced pairs at 512/128, K=4, 32 units: 25,621 -> 25,710.) A pack
  has at most ``K`` pairs, so a pair may win back part of its unit by its
  place instead: ``ceil(a (G + s) / L + (1 - s) / K) - 1`` for any share
  ``s`` in [0, 1] (`_units`; ``s = 1`` above): on a row of at most ``K``
  pairs the sum is under ``(G + s) sum a / L + (1 - s) k / K <= G + 1``,
  so again at most ``G``. Short pairs gain most from ``s < 1`` (a pair of
  less than ``L / K`` wins back more than its length's share). Each row has
  its own units (``(Ge, Gd)``) and share. So every plan of the real pairs is a plan of the rounded-down
  classes, and any lower bound on those bounds the real problem. For duals
  ``y >= 0`` of the rounded-down master and ``w`` the most a pack of units
  is worth under them (exact, `Tables`), ``y / max(1, w)`` is feasible for
  the dual of the full LP (every pack of units is worth at most 1 under it),
  so Farley's ``y.n / max(1, w)`` bounds the LP, hence every plan, from
  below at every round, converged or not. At convergence (``w <= 1``) it is
  the LP's value. Copies of a class beyond its pairs are allowed in a pack:
  more packs, a weaker relaxation, still valid.

The plan's LP is solved first; its columns, over the rounded-down classes
(`_seeded`), start the bound's LP near its optimum (1e6 pairs at K=4: 0.16-0.44
s CPU to converge where it took 0.45-1.35 s from single pairs).

The gap between them shrinks as ``G`` grows, but classes (rows of the LP)
grow with ``G^2``: 1e6 balanced pairs (both medians at 20% of their limits)
at 512/128, K=4: 32 units give 257,026 <= optimum <= LP of rounded-up pairs
259,735 (plan 259,732); 64 units 257,184 (6.8 s seeded) and 258,112 (21 s).
Where the time left allows (`_FINER_NEED` times what the first LP took; never
within the default 1 s on 1e6 pairs), the plan's LP runs again on finer units
(`_PLAN_FINER`, its plan kept where it has fewer packs) and the bound's on
`_FINER_UNITS` in turn, the best bound kept: 1e6 bimodal pairs at K=4 with
``time_limit=8`` are within 0.23-0.33% of their bound (0.77-1.98% in 1 s).

Pricing, exact on units: ``P_1[e, d]`` the best single pair within ``(e,
d)`` units (a running maximum over both axes), ``P_2k = P_k (+) P_k`` (max-plus
convolution, over the corners of ``P_k`` where it rises), and the best pack
of at most ``K`` pairs at ``(G, G)`` as the best split between a half of
``2^m`` pairs and the rest (``K = 4``: ``max over (e, d) of P_2[e, d] +
P_2[G - e, G - d]``); ``O(G^4)`` a convolution, one a round at ``K = 4``.
Each round adds the packs of the best splits (`_COLUMNS`: fewer, longer
rounds; 135 rounds at 24 columns, 15 at 600).

The doubling prices any ``K`` (``K = 16``: ``P_8 + P_8``; checked against a
plain DP at ``K`` = 5-16 in tests/packing/test_pair_grid_deep.py), but the
bound pays only where places bind: rounded down, a pair loses about ``1/2 -
a / L`` of a unit, a unit a pack at 4 pairs a pack of balanced lengths,
which ``K = 4`` hides (its places bind first) and ``K = 16`` does not. 1e6
balanced pairs at 512/128, K=16 (2026-11-29): 24 / 32 units prove 234,154 /
236,563 in 0.9 / 3.8 s CPU, under the conflicts' 244,766; extrapolated in
``1 / G`` (24-48 units on another draw) the LP of real pairs is about the
conflicts' bound, so no grid proves the plan there (`algorithms._grid_first`).

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[1, 2] = 3  # three (6, 1), three (2, 3); Le=8, Ld=4
>>> result = solve(counts, (8, 4, None), units=8, budget=None)
>>> result.value, result.converged  # a pack holds one of each: 3 packs
(3.0, True)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np

from tfpack.packing.algorithms._budget import Budget
from tfpack.packing.algorithms._lp import Master
from tfpack.packing.pairs import _lp_bound
from tfpack.packing.pairs._lp_bound import Classes, _serving
from tfpack.packing.pairs._packs import cells
from tfpack.packing.pairs._rounding import from_solution

__all__ = ["GridLP", "Tables", "grid", "grid_classes", "solve", "units_for"]

_BEATEN = 1.002  # `_beaten`: a rounded plan came within 0.004% under its LP's value
_TOLERANCE = 1e-7  # a pack worth up to 1 + this under the duals does not improve the LP
_COLUMNS = 600  # packs priced each round: the best splits of the last combination (fewer rounds)


@dataclasses.dataclass(frozen=True)
class GridLP:
    """What `solve` found: the proven bound, the restricted master and its classes."""

    bound: int  # proven lower bound on the packs of any plan (module notes)
    value: float  # the last restricted master's optimum (packs of rounded-up pairs, fractional)
    rounds: int
    converged: bool
    columns: list = dataclasses.field(repr=False)  # (rows, copies) over the classes
    x: np.ndarray | None = dataclasses.field(repr=False)
    grouped: Classes = dataclasses.field(repr=False)  # rounded-up classes, lengths in tokens
    duals: np.ndarray | None = dataclasses.field(default=None, repr=False)  # the last master's
    flows: np.ndarray | None = dataclasses.field(default=None, repr=False)  # its zero-cost columns' (`_serving`)


class Tables:
    """Exact pricing on units: the most a pack of at most ``depth`` pairs is worth, and such packs.

    ``values``: ``[G + 1, G + 1]``, the worth of a single pair of units ``(e,
    d)`` (0 where none); ``ids``: its class (-1: none).

    >>> values = np.zeros((5, 5)); ids = np.full((5, 5), -1)
    >>> values[2, 1], ids[2, 1] = 0.5, 0; values[3, 3], ids[3, 3] = 0.6, 1
    >>> t = Tables(values, ids, depth=4)
    >>> round(t.worth, 6), t.packs(1)  # two of (2, 1) fill 4 input units; (3, 3) with (2, 1) does not fit
    (1.0, [[0, 0]])
    """

    def __init__(self, values: np.ndarray, ids: np.ndarray, depth: int) -> None:
        self.ge, self.gd = values.shape[0] - 1, values.shape[1] - 1
        values, ids = _running_max(values.astype(np.float64), ids.astype(np.int64))
        self.one = values
        self.powers = [("one", values, ids)]  # (kind, table, backtrack) for 1, 2, 4, ... pairs
        if depth == 1:
            self.total, self.top, self.rest = values[-1:, -1:], None, None
            self.worth = float(values[-1, -1])
            return
        # depth = half + the rest: a half of 2^m pairs and a rest of depth - 2^m <= ... pairs.
        half = 1 << (depth.bit_length() - 2) if depth >= 2 else 1
        while len(self.powers) - 1 < (half.bit_length() - 1):
            table, split = _convolve(self.powers[-1][1], self.powers[-1][1])
            self.powers.append(("two", table, split))
        self.top = len(self.powers) - 1
        rest, self.rest = None, None
        left = depth - half
        while left:  # largest parts first, each at most `half`
            k = min(left.bit_length() - 1, self.top)
            if rest is None:
                rest, self.rest = self.powers[k][1], ("power", k)
            else:
                rest, split = _convolve(rest, self.powers[k][1])
                self.rest = ("join", self.rest, k, split)
            left -= 1 << k
        self.total = self.powers[self.top][1] + rest[::-1, ::-1]
        self.worth = float(self.total.max())

    def packs(self, most: int) -> list[list[int]]:
        """Up to ``most`` packs (class ids), the best splits of the last combination first."""
        if self.top is None:
            return [self._members(0, self.ge, self.gd)]
        found = []
        for flat in np.argsort(-self.total, axis=None, kind="stable")[:most].tolist():
            e, d = divmod(flat, self.gd + 1)
            found.append(sorted(self._members(self.top, e, d) + self._rest(self.rest, self.ge - e, self.gd - d)))
        return found

    def _members(self, k: int, e: int, d: int) -> list[int]:
        kind, _, track = self.powers[k]
        if kind == "one":
            return [int(track[e, d])] if track[e, d] >= 0 else []
        e1, d1 = divmod(int(track[e, d]), self.gd + 1)
        return self._members(k - 1, e1, d1) + self._members(k - 1, e - e1, d - d1)

    def _rest(self, part, e: int, d: int) -> list[int]:
        if part[0] == "power":
            return self._members(part[1], e, d)
        _, inner, k, split = part
        e1, d1 = divmod(int(split[e, d]), self.gd + 1)
        return self._rest(inner, e1, d1) + self._members(k, e - e1, d - d1)


def _running_max(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running maximum over both axes, carrying the id that holds it."""
    for axis in (0, 1):
        values, ids = _lp_bound._running_max(values, ids, axis)
    return values, ids


def _convolve(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``max over (e1, d1) of left[e1, d1] + right[e - e1, d - d1]``, and the ``(e1, d1)`` (flat).

    Both are nondecreasing in both axes; only the corners of ``left`` (where
    it rises over both neighbours below) can be the best ``(e1, d1)``.
    """
    ge, gd = left.shape[0] - 1, left.shape[1] - 1
    out = left[0, 0] + right
    split = np.zeros(out.shape, dtype=np.int64)
    rise = left > 0
    rise[1:, :] &= left[1:, :] > left[:-1, :]
    rise[:, 1:] &= left[:, 1:] > left[:, :-1]
    rise[0, 0] = False
    for flat in np.flatnonzero(rise).tolist():
        e1, d1 = divmod(flat, gd + 1)
        value = left[e1, d1] + right[:ge + 1 - e1, :gd + 1 - d1]
        view, where = out[e1:, d1:], split[e1:, d1:]
        better = value > view
        view[better] = value[better]
        where[better] = flat
    return out, split


def _units(lengths: np.ndarray, limit: int, units: int, up: bool, lean=(1, None)) -> np.ndarray:
    """Units of each length: ``ceil(a G / L)`` up; ``ceil(a (G + s) / L + (1 - s) / K) - 1`` down (module notes).

    ``lean``: ``(s, K)``, the share ``s`` in [0, 1] (a `Fraction` or 0 or 1)
    of the unit a pair wins back by its length, the rest by its place (one of
    at most ``K``); ``s = 1`` (``ceil(a (G + 1) / L) - 1``) where ``K`` is None.

    >>> _units(np.array([1, 3, 4, 5, 7, 8]), 8, 4, up=False).tolist()  # floor(a G / L): 0, 1, 2, 2, 3, 4
    [0, 1, 2, 3, 4, 4]
    >>> _units(np.array([3, 5, 8]), 10, 2, up=False).tolist()  # 3 a / 10: 0.9, 1.5, 2.4
    [0, 1, 2]
    >>> _units(np.array([3, 5, 8]), 10, 2, up=False, lean=(0, 2)).tolist()  # a / 5 + 1 / 2: 1.1, 1.5, 2.1
    [1, 1, 2]
    """
    if up:
        return -(-lengths * units // limit)
    p, q, k = _lean(lean)
    return -(-(lengths * (units * q + p) * k + (q - p) * limit) // (limit * q * k)) - 1


def _lean(lean) -> tuple[int, int, int]:
    """``(s, K)`` as whole numbers ``(p, q, K)``, ``s = p / q`` (`_units`)."""
    share, depth = lean
    if depth is None or share == 1:
        return 1, 1, 1
    share = Fraction(share)
    if not 0 <= share <= 1:
        raise ValueError(f"a rounding's share is in [0, 1]. Received: share={share}")
    return share.numerator, share.denominator, int(depth)


def _least(units_: np.ndarray, limit: int, units: int, up: bool, lean=(1, None)) -> np.ndarray:
    """The most (up) or the least (down) tokens of a length with ``units_`` units (`_units`)."""
    if up:
        return -(-units_ * limit // units)
    p, q, k = _lean(lean)
    return np.maximum(1, (units_ * limit * q * k - (q - p) * limit) // ((units * q + p) * k) + 1)


def grid_classes(counts: np.ndarray, limits, units, up: bool, lean=(1, 1)) -> tuple[Classes, np.ndarray, np.ndarray]:
    """The pairs' classes: their lengths rounded up (or down) to whole units (module notes).

    A class's lengths (``a``, ``b``) are in tokens: the most (up) or the least
    (down) of a length on its units; then each class's units on both rows.
    ``units``: both rows' (or ``(Ge, Gd)``); ``lean``: each row's share
    ``s`` of the rounding down (`_units`).

    >>> counts = np.zeros((8, 4), dtype=np.int64); counts[[4, 5, 6], 1] = 1  # (5, 2), (6, 2), (7, 2)
    >>> up, ua, ub = grid_classes(counts, (8, 4, None), 4, up=True)
    >>> up.a.tolist(), up.b.tolist(), up.n.tolist(), ua.tolist()  # units of 2 tokens: 5 -> 6; 6 -> 6; 7 -> 8
    ([6, 8], [2, 2], [2, 1], [3, 4])
    >>> down, da, _ = grid_classes(counts, (8, 4, None), 4, up=False)
    >>> da.tolist(), down.a.tolist()  # 5, 6 -> 3 units (lengths 5-6); 7 -> 4 units (7-8)
    ([3, 4], [5, 7])
    """
    a, b, n = cells(counts)
    rows = [(limit, g, (s, limits[2])) for limit, g, s in zip(limits[:2], _rows(units), lean)]
    ua, ub = (_units(lengths, limit, g, up, lean_) for lengths, (limit, g, lean_) in zip((a, b), rows))
    gd = rows[1][1]
    distinct, cls = np.unique(ua * (gd + 1) + ub, return_inverse=True)
    cls = cls.reshape(-1)
    cell_class = np.full(counts.shape, -1, dtype=np.int64)
    cell_class[a - 1, b - 1] = cls
    ca, cb = distinct // (gd + 1), distinct % (gd + 1)
    tokens = [_least(c, limit, g, up, lean_) for c, (limit, g, lean_) in zip((ca, cb), rows)]
    return Classes(*tokens, np.bincount(cls, n, distinct.size).astype(np.int64), cell_class), ca, cb


def solve(counts: np.ndarray, limits, units, budget: Budget | None, up: bool = True,
          most: int | None = None, seed: GridLP | None = None, lean=(1, 1)) -> GridLP:
    """The LP over packs of pairs rounded up (a plan) or down (a bound) to ``units`` a row (module notes).

    ``most``: columns priced each round (default `_COLUMNS`). Rounded down,
    ``bound`` is the best Farley bound seen (valid whenever it stops); rounded
    up, it is 0 (that LP bounds nothing). ``seed``: an LP of rounded-up pairs
    whose columns join this one's first (`_seeded`; only rounded down).
    ``units``: both rows' or ``(Ge, Gd)``; ``lean``: `grid_classes`.
    """
    grouped, ca, cb = grid_classes(counts, limits, units, up, lean)
    demand, (ge, gd) = grouped.n, _rows(units)
    depth = int(min(limits[2] or ge, ge, gd, demand.sum())) if up else int(min(limits[2] or demand.sum(),
                                                                                 demand.sum()))
    master = Master(demand.astype(np.float64), _serving(grouped.a, grouped.b))
    with np.errstate(divide="ignore"):
        fit = np.minimum(np.minimum(ge // ca, gd // cb), depth)
    master.add([(np.array([c]), np.array([max(1, fit[c])])) for c in range(demand.size)])
    if seed is not None:
        master.add(_seeded(seed, grouped))
    best, value, rounds, converged, x, duals = 0.0, math.inf, 0, False, None, None
    while budget is None or not budget.expired():
        # Each solve runs to its end (0.005-0.3 s CPU at up to 2,500 classes): HiGHS's own limit is
        # on the wall clock, and on a loaded machine it stopped the first solve, leaving no plan.
        value, x, duals = master.solve(None)
        rounds += 1
        tables = _tables(duals, ca, cb, (ge, gd), depth)
        best = max(best, float(duals @ demand) / max(1.0, tables.worth))
        if tables.worth <= 1.0 + _TOLERANCE:
            converged = True
            break
        packs = _columns(tables.packs(most or _COLUMNS), duals)
        if not packs:
            break
        master.add(packs)
    bound = 0 if up else math.ceil(best - 1e-6 * max(1.0, best))
    columns = master.columns[:0 if x is None else x.size]
    return GridLP(bound, float(value), rounds, converged, columns, x, grouped, duals, master.fixed_x)


def _rows(units) -> tuple[int, int]:
    """Units of the input and the target row: ``units`` on both, or a pair ``(Ge, Gd)``."""
    return (int(units), int(units)) if np.ndim(units) == 0 else (int(units[0]), int(units[1]))


def _tables(duals: np.ndarray, ca: np.ndarray, cb: np.ndarray, units: tuple[int, int], depth: int) -> Tables:
    values = np.zeros((units[0] + 1, units[1] + 1))
    ids = np.full(values.shape, -1, dtype=np.int64)
    values[ca, cb], ids[ca, cb] = duals, np.arange(duals.size)
    return Tables(values, ids, depth)


def _seeded(lp: GridLP, down: Classes) -> list[tuple[np.ndarray, np.ndarray]]:
    """The used columns of an LP of rounded-up pairs, over the classes of rounded-down ones.

    Each rounded-up class stands for the rounded-down class with the most
    pairs among those of its cells. A pack of rounded-up classes is a pack of rounded-down ones
    at any units: it holds any real pairs of its classes, ``sum a <= L`` on each
    row, and a real pack rounded down fits ``G'`` units (module notes). Seeded so, the LP starts at about the other's value
    (1e6 balanced pairs at 512/128, K=4: 259,735 where single pairs give 406,350).
    """
    cls_up, cls_down = lp.grouped.cell_class, down.cell_class
    where = np.flatnonzero(cls_up.ravel() >= 0)
    up, below = cls_up.ravel()[where], cls_down.ravel()[where]
    # The most numerous down class of each up class: sorted by its pairs, the last of each wins.
    heaviest = np.zeros(lp.grouped.n.size, dtype=np.int64)
    order = np.argsort(down.n[below], kind="stable")
    heaviest[up[order]] = below[order]
    found = {}
    for j in np.flatnonzero(lp.x > 1e-9).tolist():
        rows, copies = lp.columns[j]
        mapped, inverse = np.unique(heaviest[rows], return_inverse=True)
        merged = np.bincount(inverse.reshape(-1), copies).astype(np.int64)
        found[tuple(mapped.tolist()) + tuple(merged.tolist())] = (mapped, merged)
    return list(found.values())


def _columns(packs: list[list[int]], duals: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Distinct packs worth more than 1 as master columns ``(rows, copies)``."""
    distinct = list(dict.fromkeys(tuple(members) for members in packs if members))
    if not distinct:
        return []
    width = max(len(members) for members in distinct)
    table = np.full((len(distinct), width), duals.size, dtype=np.int64)  # padded with a row worth 0
    for i, members in enumerate(distinct):
        table[i, :len(members)] = members
    worth = np.append(duals, 0.0)[table].sum(axis=1)
    found = []
    for i in np.flatnonzero(worth > 1.0 + _TOLERANCE).tolist():
        rows = sorted(set(distinct[i]))
        found.append((np.array(rows, dtype=np.int64), np.array([distinct[i].count(r) for r in rows], dtype=np.int64)))
    return found


# Units of the bound's LP (a row's, or the input's and the target's) and each row's share `s` of its
# rounding down (`_units`): the first whose grid has at most the classes given (the last otherwise).
# 1e6 pairs at 512/128, K=4: bimodal, 64 units (2,334 classes): bound 259,895 in 1.3 s, 0.4 s seeded (32 units:
# 250,000: short targets lose up to 4 of their ~6 tokens rounded down); balanced, 32 units (1,017;
# 64 units have 3,804): 256,140 in 0.5 s (64 units: 256,790 in 18 s). Where the input row binds most
# (bimodal, seeded, 2026-11-29): 96 input units and 64 target units with s = 3/4 on the inputs
# (3,330 classes) prove 261,215 in 0.46 s CPU at 512/128 (64 units: 260,440 in 0.33 s; (96, 64) with
# s = 1: 261,097, s = 1/2: 261,170; 96 units both rows 260,929 in 0.93 s; (128, 64) 261,194 in 1.1 s),
# 258,790 at 2048/512 (257,457; s = 0 on both rows: 259,795) and 260,191 at 1024/256 (259,036).
# Balanced at 32 units: s = 1 proves most (257,026; s = 1/2 256,795, s = 0 256,356).
# 96 x 64 is fine on 512/128 (2 target tokens a unit) but loses short targets at 2048/512 (8 a unit);
# 80 units a row with s = 3/4 on the inputs and s = 0 on the targets (a short target wins back most by
# its place) prove about as much at every length (seeded, unloaded, branch pairgap44; seed 0 / 1):
# 512/128 260,853 / 261,037 (96 x 64: 261,215 / 261,378), 1024/256 260,874 / 260,834 (260,191 /
# 260,133), 2048/512 260,767 / 260,810 (258,790 / 258,852), 3,413-3,472 classes, 0.35-0.5 s CPU
# (96 x 64: 0.26-0.35 s). Tried at 80 x 80: shares (1/2, 0) 260,780-260,814, (3/4, 1/4) 260,435-
# 260,931, (3/4, 1/2) 260,479-260,986, (1, 0) 260,575-260,723; 88 x 72 and 72 x 88 with (3/4, 0)
# 260,490-260,985 and 260,457-260,569; 96 x 96 with (3/4, 0) 260,870-260,985 (4,700 classes, 0.5-0.6 s).
# It needs 0.44-0.5 s CPU of the at least 0.5 s it gets (`_DOWN_LEAST`; 13 rounds at 2048/512, Farley's
# bound 174,437 after 8): where it stops early, 96 x 64 (0.26-0.35 s) runs next, not 64 units
# (2048/512: 258,790 instead of 257,457).
_UNITS = (((80, 80), (Fraction(3, 4), 0), 3_600), ((96, 64), (Fraction(3, 4), 1), 3_500), (64, (1, 1), 2_500),
          (32, (1, 1), None))
# Units a row of the plan's LP: the finest whose grid of rounded-up pairs has at most
# `_PLAN_CLASSES` classes. 1e6 pairs, K=4, untimed: bimodal at 512/128, 48 units (1,379 classes),
# 262,432 packs in 0.84 s CPU (LP 0.5 s), 32 units 263,328; 64 units 261,792 in 1.9 s; balanced,
# 32 units (967 classes): 259,732 in 1.3 s, 48 units (2,121) 258,915 in 6.6 s.
_PLAN_UNITS = (48, 32)
_PLAN_CLASSES = 1_500
# Finer units the bound's LP takes in turn (seeded like the first) while the time left is at least
# `_FINER_NEED` times the last one's CPU seconds (never within the default 1 s on 1e6 pairs). 1e6
# bimodal pairs, K=4, seeded from the plan's LP: 64 / 96 / 128 units prove 260,440 / 260,929 /
# 261,195 packs in 0.34 / 0.97 / 4.2 s at 512/128, 257,457 / 260,605 / 261,145 in 0.32 / 1.05 /
# 3.9 s at 2048/512 (balanced, 512/128: 32 units 257,026; 64 units 257,184 in 6.5 s).
_FINER_UNITS = (96, 128)
_FINER_NEED = 3.0
# ... and the plan's LP these units, where the time left allows as much (its plan kept where it has
# fewer packs): 1e6 bimodal pairs, K=4, 512/128: 261,792 packs in 1.9 s, 262,432 from 48 units.
_PLAN_FINER = 64
_UP_SHARE = 0.9  # share of the time the plan's LP (rounded up) gets, first (balanced 1e6 pairs, K=4: converges in 0.86 s)
_DOWN_LEAST = 0.5  # ... and at least this share of the whole (seeded, it converges in 0.16-0.44 s; under a load of 14
# on 2 cores, 0.3 of 1 s stopped it early once: 1e6 bimodal pairs at 1024/256, bound 259,036 -> 250,000)


def units_for(counts: np.ndarray, limits, up: bool = False) -> tuple:
    """The first units of `_UNITS` whose grid has at most its classes (the last otherwise), and their ``lean``.

    ``up``: for the plan's LP, of `_PLAN_UNITS` with at most `_PLAN_CLASSES`
    (``lean`` ``(1, 1)``: rounding up has none).
    """
    return next(_choices(counts, limits, up))


def _choices(counts: np.ndarray, limits, up: bool):
    """The units (and ``lean``) of `units_for`'s list whose grids have at most their classes, in turn; the last always."""
    choices = [(units, (1, 1), _PLAN_CLASSES) for units in _PLAN_UNITS[:-1]] + [(_PLAN_UNITS[-1], (1, 1), None)] \
        if up else _UNITS
    for units, lean, most in choices:
        if most is None or grid_classes(counts, limits, units, up, lean)[0].n.size <= most:
            yield units, lean


def grid(counts: np.ndarray, limits, time_limit: float | None = None, units: int | None = None, beat=None):
    """A plan rounded from the LP of rounded-up pairs, and the bound of the rounded-down LP (module notes).

    The plan is None where no LP was solved in time; the bound 0 likewise.
    ``units``: a row's units in both LPs (default: `units_for` each);
    ``beat``: a plan in hand (`_first_fit.Placed`): the grid's plan is not
    rounded (None) where its converged LP's value is over `_BEATEN` times
    its packs (`_beaten`: rounding 1e6 pairs takes 0.3-1 s).
    """
    budget = Budget(time_limit)
    plan_budget, plan_units = budget.share(_UP_SHARE), units or units_for(counts, limits, up=True)[0]
    up = solve(counts, limits, plan_units, plan_budget, up=True)
    finer = None
    if time_limit is not None and units is None and up.converged and _PLAN_FINER > plan_units \
            and plan_budget.left() >= _FINER_NEED * budget.spent():
        finer = solve(counts, limits, _PLAN_FINER, Budget(plan_budget.left()), up=True)
    before = budget.spent()
    down_units, bound = _down(counts, limits, budget, time_limit, None if up.x is None else up, units)
    if time_limit is not None and units is None and up.x is not None:
        bound = max(bound, _finer_bound(counts, limits, budget, up, down_units, budget.spent() - before))
    placed = None if up.x is None or _beaten(up, beat) else \
        from_solution(counts, limits, up.columns, up.x, up.grouped, flows=up.flows)
    if finer is not None and finer.converged and not _beaten(finer, beat):
        other = from_solution(counts, limits, finer.columns, finer.x, finer.grouped, flows=finer.flows)
        placed = other if placed is None or other.packs < placed.packs else placed
    return placed, bound


def _beaten(lp: GridLP, placed) -> bool:
    """Whether ``lp`` converged above `_BEATEN` times the packs of ``placed`` (a plan, or None: False).

    Rounding its plan is then spared: a plan rounded from the LP of
    rounded-up pairs has about its value or more (1e6 bimodal / balanced pairs at 512/128, K=4: 262,432 / 259,732
    packs on 262,442 / 259,735).
    """
    return placed is not None and lp.converged and lp.value > _BEATEN * placed.packs


def _down(counts: np.ndarray, limits, budget: Budget, time_limit: float | None, seed: GridLP | None, units):
    """The bound's LP on ``units``, or on `units_for`'s, in the time left; its units and its bound.

    It gets at least `_DOWN_LEAST` of ``time_limit``, even past it: a plan
    needs its bound.
    Where `units_for`'s stops before it converges (Farley's bound early is
    weak: 1e6 bimodal pairs at 1024/256, K=4, under a load of 10 on 2 cores, 6
    of its 13 rounds in 0.5 s CPU proved 173,889), the next units of the list
    (coarser, faster) run too, with at least `_DOWN_LEAST` of ``time_limit``
    again: each bound is valid, the best is kept.
    """
    def rest() -> Budget:
        return Budget(None if time_limit is None else max(budget.left(), _DOWN_LEAST * time_limit))

    if units:
        return units, solve(counts, limits, units, rest(), up=False, seed=seed).bound
    best, first = 0, None
    for units, lean in itertools.islice(_choices(counts, limits, up=False), 2):
        lp = solve(counts, limits, units, rest(), up=False, seed=seed, lean=lean)
        best, first = max(best, lp.bound), first or units
        if lp.converged:
            break
    return first, best


def _finer_bound(counts: np.ndarray, limits, budget: Budget, up: GridLP, units: int, spent: float) -> int:
    """The best bound of the rounded-down LP on `_FINER_UNITS` past ``units``, in the time left (0: none).

    Each is valid at any units and wherever it stops (module notes); one
    starts only where the time left is `_FINER_NEED` times what the last
    took (``spent`` CPU seconds), seeded with ``up``'s columns.
    """
    best = 0
    for finer in (u for u in _FINER_UNITS if min(_rows(u)) >= max(_rows(units)) and u != units):
        if budget.left() < _FINER_NEED * spent:
            break
        before = budget.spent()
        best = max(best, solve(counts, limits, finer, Budget(budget.left()), up=False, seed=up).bound)
        spent = budget.spent() - before
    return best
