"""`optimal`'s column generation: the LP over packs, priced by a knapsack, with Farley's bound.

The LP relaxation of packing a histogram (``docs/packing.md``, "How `optimal`
works") has one column per feasible pack; `run` solves it over a few columns
with HiGHS (`_lp.Master`), asks a knapsack (`_knapsack.price`) for packs worth
more than 1 under the duals, and repeats until none is, a stopping rule holds
or the budget ends. At every round it keeps the best Farley bound
``h.y / v``, valid whether the LP converged or not.

>>> import numpy as np
>>> lengths, demand = np.array([2, 3, 5, 6]), np.array([3, 1, 1, 2])
>>> lp = run(lengths, demand, 8, 3, [(6, 2), (6, 2), (5, 3), (2,)], 4)  # 4: the simple bound
>>> lp.lower_bound, round(lp.value, 3)  # the LP is 10/3: the bound is the simple one
(4, 3.333)
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import scipy.sparse

from tfpack.packing.algorithms import _budget, _knapsack, _lp, _rounding
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["LP", "run", "columns", "small", "seed_patterns", "plateaus", "ceil"]


@dataclasses.dataclass(frozen=True)
class LP:
    """Column generation's outcome: the last LP, its proven bound, a plan rounded on the way."""

    patterns: list[tuple[np.ndarray, np.ndarray]]  # columns: (rows, copies)
    x: np.ndarray  # float64 [columns]: LP solution
    value: float  # LP objective of the last solve
    lower_bound: int  # proven bound on packs (docs/packing.md, "The bound")
    rounds: int
    plan: dict[tuple[int, ...], int] | None = None  # the best rounding of an earlier LP
    master: _lp.Master | None = None  # solved last at ``x``, for `_diving.dive`
    rounded: bool = False  # ``plan`` includes this LP's rounding at EARLY_FILL
    duals: np.ndarray | None = None  # float64 [rows]: the duals of the LP at ``x``


def run(lengths, demand, max_length, max_sequences_per_pack, seed_packs, simple, *,
        stop_at=0.0, smooth=Tuning.SMOOTHING, first_round=True,
        budget: _budget.Budget | None = None) -> LP:
    """Column generation (module notes, docs/packing.md) until it stops or ``budget`` ends.

    The first round (seeds, the first LP, its pricing) runs to its end,
    whatever the budget, where its cost is bounded (`small`): a plan rounded
    from a first LP is far better than best fit alone (at depth 3 on
    Wikipedia-512: 0.1% above the bound instead of 11%). With
    ``first_round=False`` (an LP only for a bound, `_paths.grouped`) it does not.

    Raises:
        OutOfTime: ``budget`` ended before the first LP was solved.
    """
    first = budget
    if budget is not None and first_round and small(len(lengths), max_sequences_per_pack,
                                                    max_length):
        first = None  # until the first round ends
    generation = _Generation(lengths, demand, max_length, max_sequences_per_pack, simple,
                             stop_at, smooth, budget)
    generation.seed(seed_packs, first)
    return generation.loop(first)


class _Generation:
    """The master LP, its columns (each added once) and the best bound and plan so far."""

    def __init__(self, lengths, demand, max_length, max_sequences_per_pack, simple, stop_at,
                 smooth, budget) -> None:
        n = len(lengths)
        bounds = np.minimum(demand, max_length // lengths)
        if max_sequences_per_pack is not None:
            bounds = np.minimum(bounds, max_sequences_per_pack)
        self.lengths, self.demand, self.bounds = lengths, demand, bounds
        self.max_length, self.max_sequences_per_pack = max_length, max_sequences_per_pack
        self.depth = _knapsack.effective_depth(lengths, bounds, max_length, max_sequences_per_pack)
        self.simple, self.stop_at, self.smooth, self.budget = simple, stop_at, smooth, budget
        # Dual-optimal inequalities: supply of length r + 1 may serve length r.
        shift = scipy.sparse.diags_array([np.ones(n - 1), -np.ones(n - 1)], offsets=[0, -1],
                                         shape=(n, n - 1))
        self.master = _lp.Master(demand, shift)
        self.seen: set[bytes] = set()
        self.per_round = max(Tuning.COLUMNS_PER_ROUND, n // 8)
        self.best_bound, self.best_y = 0.0, None
        self.plan, self.plan_packs = None, math.inf

    def add(self, patterns) -> int:
        """Add the columns not seen yet; how many were new."""
        fresh = []
        for rows, copies in patterns:
            key = rows.tobytes() + b"/" + copies.tobytes()
            if key not in self.seen:
                self.seen.add(key)
                fresh.append((rows, copies))
        self.master.add(fresh)
        return len(fresh)

    def seed(self, seed_packs, budget) -> None:
        """First columns: the best fit plan's packs and `seed_patterns`."""
        self.add(columns(seed_packs, self.lengths))
        self.add(seed_patterns(self.lengths, self.bounds, self.max_length, self.depth, budget))
        covered = np.zeros(len(self.lengths), dtype=bool)
        for rows, _ in self.master.columns:
            covered[rows] = True
        # As many copies of one length as fit, where nothing else holds it: the LP is feasible.
        self.add([(np.array([r]), self.bounds[r: r + 1]) for r in np.flatnonzero(~covered)])

    def farley(self, y, value) -> float:
        return math.fsum((self.demand * y).tolist()) / value if value > 0.0 else 0.0

    def loop(self, budget) -> LP:
        """Rounds until a stopping rule holds (docs/packing.md, "Stopping") or time ends."""
        n = len(self.lengths)
        rounds, last = 0, None
        while True:
            rounds += 1
            try:
                value, x, duals = self.master.solve(budget)
            except _budget.OutOfTime:
                if last is None:
                    raise
                # The last LP solved, over the columns it had (the newer ones at zero).
                value, x, duals = last
                x = np.concatenate([x, np.zeros(len(self.master.columns) - len(x))])
                return LP(self.master.columns, x, value,
                          max(self.simple, ceil(self.best_bound)), rounds, self.plan, None, False,
                          duals)
            last = value, x, duals
            near = n <= Tuning.EARLY_ROWS and \
                ceil(value) <= max(self.simple, ceil(self.best_bound)) + 1
            if near:  # within a pack of the bound: this LP's rounding may meet it already
                self.round_early(x)
            pricing, fresh = self.price(duals, budget)
            lower_bound = max(self.simple, ceil(self.best_bound))
            budget = self.budget
            if pricing is None:  # out of time while pricing: this LP is the last
                return LP(self.master.columns, x, value, lower_bound, rounds, self.plan,
                          self.master, near, duals)
            if self.done(value, lower_bound, rounds) or not self.add(fresh):
                lower_bound = self.exact_bound(lower_bound)
                return LP(self.master.columns, x, value, lower_bound, rounds, self.plan,
                          self.master, near, duals)

    def round_early(self, x) -> None:
        rounded = _rounding.round_lp(self.master.columns, x, self.lengths, self.demand,
                                     self.max_length, self.max_sequences_per_pack,
                                     Tuning.EARLY_FILL)
        if sum(rounded.values()) < self.plan_packs:
            self.plan, self.plan_packs = rounded, sum(rounded.values())

    def price(self, duals, budget):
        """Packs that improve the LP, and the pricing (``None``: out of time).

        Prices at a mix of the LP duals and the duals of the best bound so far;
        when no pack found there improves the LP (mispricing), at the LP duals.
        Each pricing may raise the best bound.
        """
        smoothing = self.smooth if self.best_y is not None else 0.0
        while True:
            y = duals if not smoothing else smoothing * self.best_y + (1 - smoothing) * duals
            try:
                pricing = _knapsack.price(self.lengths, self.bounds, plateaus(y), self.max_length,
                                          self.depth, min_value=1.0 + Tuning.IMPROVES,
                                          max_patterns=self.per_round, budget=budget)
            except _budget.OutOfTime:
                return None, []
            if self.farley(y, pricing.best_value) > self.best_bound:
                self.best_bound = self.farley(y, pricing.best_value)
                self.best_y = y / pricing.best_value  # worth at most 1 in any pack
            fresh = [(rows, copies) for rows, copies in pricing.patterns
                     if copies @ duals[rows] > 1.0 + Tuning.IMPROVES]
            if fresh or not smoothing:
                return pricing, fresh
            smoothing = 0.0

    def done(self, value, lower_bound, rounds) -> bool:
        n, budget = len(self.lengths), self.budget
        return (lower_bound >= min(ceil(value), self.plan_packs) or value <= self.stop_at
                or (budget is not None and budget.expired())
                or (self.plan_packs <= ceil(value) <= lower_bound + 1
                    and rounds * n >= Tuning.ROW_ROUNDS // 40)
                or (value - lower_bound <= Tuning.LP_GAP * lower_bound
                    and rounds * n >= Tuning.ROW_ROUNDS // 10)
                or rounds >= min(Tuning.MAX_ROUNDS, Tuning.ROW_ROUNDS // n))

    def exact_bound(self, lower_bound: int) -> int:
        """Float32 pricing overstates the best value by up to OVERSTATES, which can
        cost the bound a pack: then the best bound's duals are priced exactly."""
        budget = self.budget
        if self.best_y is not None and (budget is None or not budget.expired()) and \
                ceil(self.best_bound * (1 + _knapsack.OVERSTATES)) > lower_bound:
            exact = _knapsack.price(self.lengths, self.bounds, plateaus(self.best_y),
                                    self.max_length, self.depth, min_value=math.inf,
                                    max_patterns=0, exact=True)
            lower_bound = max(lower_bound, ceil(self.farley(self.best_y, exact.best_value)))
        return lower_bound


def columns(packs, lengths: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packs (tuples of lengths, each in ``lengths``) as LP columns ``(rows, copies)``, rows ascending.

    One sort over all their sequences (a best fit plan has up to ~90,000 packs
    at L=65,536; `np.unique` a pack took ~0.8 s there).

    >>> [(r.tolist(), c.tolist()) for r, c in columns([(5, 2, 2), (2,)], np.array([2, 5]))]
    [([0, 1], [2, 1]), ([0], [1])]
    """
    packs = list(packs)
    if not packs:
        return []
    sizes = np.fromiter(map(len, packs), dtype=np.int64, count=len(packs))
    flat = np.fromiter(itertools.chain.from_iterable(packs), dtype=np.int64,
                       count=int(sizes.sum()))
    rows = np.searchsorted(lengths, flat)
    pack = np.repeat(np.arange(len(packs)), sizes)
    order = np.lexsort((rows, pack))
    rows, pack = rows[order], pack[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (pack[1:] != pack[:-1])
    starts = np.flatnonzero(first)
    copies = np.diff(np.append(starts, len(rows)))
    rows, pack = rows[starts], pack[starts]
    bounds = np.searchsorted(pack, np.arange(len(packs) + 1)).tolist()
    return [(rows[a:b], copies[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def small(n: int, max_sequences_per_pack: int | None, max_length: int) -> bool:
    """Whether a round of column generation has a bounded cost (rows, pricing's table)."""
    depth = max_sequences_per_pack or 1
    return n <= Tuning.GROUPED_LENGTHS and \
        n * (depth + 1) * (max_length + 1) <= Tuning.TABLE_CELLS * 4


def seed_patterns(lengths, bounds, max_length, depth,
                  budget=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packs for the first LP: the best for each longest length under affine values.

    A sequence is worth its share of tokens plus a share of the depth (the LP
    duals lie between these extremes). A cold LP solve grows with columns x
    rows, so with many lengths fewer of these sets. When there are several,
    lengths are rounded up to multiples of ``grain`` tokens, so that the
    pricing table is at most `Tuning.SEED_TOKENS` wide: ``grain * ceil(l / grain) >= l``,
    so the packs fit. (A single set, for thousands of lengths, stays exact: the
    first LP over them is the one that counts.)
    """
    weights = Tuning.SEED_DEPTH_WEIGHTS[: max(1, Tuning.SEED_COLUMNS // len(lengths))]
    grain = -(-max_length // Tuning.SEED_TOKENS) if len(weights) > 1 else 1
    coarse = -(-lengths // grain)
    per_item = 1.0 / (depth or max(1, max_length // int(lengths.min())))
    patterns = []
    for weight in weights:
        values = (1 - weight) * lengths / max_length + weight * per_item
        patterns += _knapsack.price(coarse, bounds, values, max_length // grain, depth,
                                    min_value=0.0, max_patterns=len(lengths),
                                    budget=budget).patterns
    return patterns


def plateaus(duals: np.ndarray) -> np.ndarray:
    """Duals made non-decreasing and rounded up to multiples of ``2**-40``.

    The dual-optimal inequalities make the duals grow with length in plateaus
    of equal values, up to float noise; rounded up, equal values are equal and
    pricing skips most of a plateau (`_knapsack._dominated`). The values only
    grow, so the best pack under them is worth at least the best under the
    duals, and Farley's bound with it stays valid.

    >>> plateaus(np.array([0.5, 0.25, 0.75])).tolist()
    [0.5, 0.5, 0.75]
    """
    return np.ldexp(np.ceil(np.ldexp(np.maximum.accumulate(duals), Tuning.DUAL_BITS)),
                    -Tuning.DUAL_BITS)


def ceil(value: float) -> int:
    """``ceil(value)``, but values within `Tuning.BOUND_MARGIN` (relative) above an integer round down.

    >>> ceil(3.5), ceil(3.0 + 1e-12)
    (4, 3)
    """
    return math.ceil(value - Tuning.BOUND_MARGIN * max(1.0, abs(value)))
