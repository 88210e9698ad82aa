"""A bound on the real lengths from the duals of an LP on length groups (issue 35, item 5).

Farley's bound holds for any values, wherever they come from: for any ``y >= 0``
over the real lengths and any ``v`` at least the value of the best pack under
``y``, ``y / v`` is feasible for the dual of the LP over every pack, so
``h.y / v`` is at most that LP's optimum, and so at most the packs of any plan
(``docs/packing.md``, "The bound"). `lifted` takes ``y`` from the duals of an LP
on length groups rounded up (a plan's, `_paths.plan_up`): they sit at each
group's longest length and are interpolated linearly between them over the real
lengths; ``v`` comes from one pricing over the real lengths (`_knapsack.price`,
which reports an upper bound on the best value: values rounded up to plateaus
and to float32 only raise it). On the stretched long contexts of
``benchmarks/planners_long_context.py``, where the rounded-down LP on 256-1,024
groups stays 0.05-0.2% below the LP over all lengths, the duals of the first
plan's LP (units of 16 tokens) gave 215,882 at L=16,384 depth 12 (the LP over
all lengths: 215,861 or more; 1,024 groups rounded down: 215,765) and 190,648
at depth 4 (the LP: 190,651), for one pricing, 0.05-0.09 s of CPU. `prove` does it
for the rounded-down LPs of `_paths.prove_down` too (their duals at the groups'
shortest lengths): on documents near L / 3 they lift more than the plan's
(L=12,288 depth 4: 229,417 from them, 228,358 from the plan's, 229,021 rounded
down; the LP over all lengths at least 229,560).

Interpolated values let lengths just over a threshold (three just over L / 3)
look as if they fit like those just under it, so the best pack is worth more
than the duals meant. Along the line from ``y`` toward the duals of the group at
or below each length (as a rounded-down LP values them), Farley's bound is a
ratio of a linear function and a convex one (the best pack's value), so it
rises to one peak and falls. `lifted` prices once more at `Tuning.LIFT_TOWARD_BELOW`
of the way and keeps the better bound, where it may prove more: the best pack
there is worth at least what the best pack found at ``y`` is worth there, so
``h.y' / (that worth)`` bounds the bound at ``y'`` from above, and only where it
passes both the bound at ``y`` and the best bound proven (by `prove`: the bound
that would bring the best plan within the 0.2% target, where it is not) is the pricing paid (long49: the first plan's
lift on the suite's narrow cases 217,800 -> 220,684 at L=16,384 depth 6, 280,277 ->
280,573 at L=12,288 depth 8).

Hand-checked: five 3s and three 5s in packs of 10, duals 1/3 at 3 and 1/2 at 5.
The best packs, (3, 3, 3) and (5, 5), are worth 1, so the bound is
ceil(5/3 + 3/2) = 4 (the token bound says 3), and 4 packs do it: (5, 5),
(5, 3), (3, 3, 3), (3).

>>> import numpy as np
>>> histogram = np.array([0, 0, 5, 0, 3, 0, 0, 0, 0, 0])
>>> lifted(histogram, 10, None, np.array([3, 5]), np.array([1 / 3, 1 / 2]))
4
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tfpack.packing.algorithms import _budget, _column_generation, _knapsack
from tfpack.packing.algorithms._tuning import Tuning

__all__ = ["lifted", "padded", "prove"]


def lifted(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None,
           group_lengths: np.ndarray, duals: np.ndarray,
           budget: _budget.Budget | None = None, above: int | None = 0,
           known: np.ndarray | None = None, useful: int = 0) -> int | None:
    """Farley's bound (module notes) at ``duals`` interpolated over the real lengths.

    Args:
        histogram: int64 ``[max_length]``, the real sequences.
        max_length: tokens per pack.
        max_sequences_per_pack: sequences per pack, or ``None``.
        group_lengths: int64 ascending: the lengths (tokens) the duals belong to.
        duals: float64 ``[len(group_lengths)]``.
        budget: the pricing stops when it ends.
        above: price once more toward the duals below (module notes) only where
            that may prove more than this and than the interpolated duals; ``None``:
            never.
        known: int64 ``[packs, slots]``, packs of real lengths (a plan's, each padded
            with 0s: `padded`); with ``useful``, no pricing where the best of them,
            bettered by `_worth`, shows that neither pricing could prove more than
            ``useful``.

    Returns:
        A lower bound on the packs of any plan; 0 when ``budget`` ended first; ``None``
        when ``known`` showed it could not prove more than ``useful``.
    """
    histogram = np.asarray(histogram, dtype=np.int64)
    lengths = np.flatnonzero(histogram) + 1
    demand = histogram[lengths - 1]
    between = np.maximum(np.interp(lengths, group_lengths, duals), 0.0)
    bounds = np.minimum(demand, max_length // lengths)
    if max_sequences_per_pack is not None:
        bounds = np.minimum(bounds, max_sequences_per_pack)
    depth = _knapsack.effective_depth(lengths, bounds, max_length, max_sequences_per_pack)

    def farley(values):  # (the bound, the best value, the best pack's copies per length)
        values = _column_generation.plateaus(values)
        best, copies = _best_value(lengths, bounds, values, max_length, depth, budget)
        if best <= 0.0:
            return 0, best, copies
        return _column_generation.ceil(math.fsum((demand * values).tolist()) / best), best, copies

    if budget is not None and budget.expired():
        return 0
    below = np.searchsorted(group_lengths, lengths, side="right") - 1
    below = np.where(below >= 0, np.asarray(duals, dtype=np.float64)[np.maximum(below, 0)], 0.0)
    moved = between + Tuning.LIFT_TOWARD_BELOW * (np.minimum(below, between) - between)
    if useful and known is not None and len(known):  # the best pack is worth at least theirs
        # (the second pricing only runs where it may prove more than ``above`` too)
        tries = [(between, useful)] + [(moved, max(useful, above or 0))] * (
            above is not None and bool(Tuning.LIFT_TOWARD_BELOW))
        if all(_at_most(known, lengths, demand, bounds, _column_generation.plateaus(values),
                        max_length, max_sequences_per_pack) <= most for values, most in tries):
            return None
    try:
        bound, best, copies = farley(between)
    except _budget.OutOfTime:
        return 0
    # Toward the duals of the group at or below each length (module notes). There the best
    # pack is worth at least what the best pack found here (``copies``) is worth, so the
    # bound is at most h.y over that: priced again only where that exceeds what is proven.
    if above is None or best <= 0.0 or copies is None or not Tuning.LIFT_TOWARD_BELOW:
        return bound
    priced = _column_generation.plateaus(moved)
    worth = _budget.dot(copies, priced)
    if worth > 0.0 and \
            _column_generation.ceil(_budget.dot(demand, priced) / worth) > max(bound, above):
        try:
            bound = max(bound, farley(moved)[0])
        except _budget.OutOfTime:
            pass  # the interpolated bound stands
    return bound


def prove(search, histogram: np.ndarray, max_sequences_per_pack: int | None,
          group_lengths: np.ndarray, duals: np.ndarray, budget: _budget.Budget,
          packs: float = math.inf) -> int:
    """`lifted` at an LP's duals, proven in ``search`` (`_paths.Search`) as its best lift.

    Not started with less time left than the last one took: each prices the same
    real lengths, and one cut by the budget proves nothing. Its second pricing (toward
    the duals below) only where the best plan, ``packs`` or the one in ``search``, is past
    `Tuning.LONG_PROVE_ABOVE` (the 0.2% target) above the best bound, and the bound it may
    prove would bring it within: elsewhere its time is the plans' (fresh seed 0 case 5,
    L=16,384 depth 12: priced again where it might prove 44 packs more, 0.02%, it proved
    less and cost the plan 47 packs). Not priced at all where the best plan's packs show it
    could not prove more than the best bound (`lifted`'s ``known``: fresh seeds 390-401, the
    mean gap 0.0517% -> 0.0468%, 68 cases closer, 7 further). Returns what it lifted (0 where
    it did not start, was cut or was not priced).
    """
    if budget.limited and budget.left() < search.lift_seconds:
        return 0
    began = budget.spent()
    within = min(packs, search.packs) / (1 + Tuning.LONG_PROVE_ABOVE)  # the bound that would do
    above = None  # (no plan yet: any bound more may do)
    if within > search.bound:
        above = search.bound if math.isinf(within) else max(search.bound, math.ceil(within) - 1)
    bound = lifted(histogram, len(histogram), max_sequences_per_pack, group_lengths, duals, budget,
                   above, known=padded(search.plan), useful=search.bound)
    if bound is None:
        return 0  # it could not prove more: its time (`Search.lift_seconds`) not measured
    search.lifted = max(search.lifted, bound)
    search.lift_seconds = budget.spent() - began
    search.prove(search.lifted, "lp")
    return bound


def _best_value(lengths, bounds, values, max_length, depth, budget):
    """At least the best pack's value, and its copies per length (``None`` where the pricing
    with the depth was cut): without the depth limit first, with it if that binds.

    Without the depth (a relaxation: every pack stays a pack, so its best is at
    least the best), the pricing table has one row instead of ``depth + 1``
    (float64: 0.16 s instead of 0.52 s on 12,216 lengths at L=16,384 depth 12,
    the same best value). Where its best pack holds more than ``depth``
    sequences, the depth may bind, and the pricing with it follows (if
    ``budget`` lets it: the relaxed value stands otherwise).
    """
    def copies_of(pricing):
        if not pricing.patterns:
            return None
        copies = np.zeros(len(lengths))
        copies[pricing.patterns[0][0]] = pricing.patterns[0][1]
        return copies

    relaxed = _knapsack.price(lengths, bounds, values, max_length, None, min_value=0.0,
                              max_patterns=1, budget=budget)
    if depth is None or relaxed.patterns and relaxed.patterns[0][1].sum() <= depth:
        return relaxed.best_value, copies_of(relaxed)
    try:
        deep = _knapsack.price(lengths, bounds, values, max_length, depth, min_value=0.0,
                               max_patterns=1, budget=budget)
    except _budget.OutOfTime:
        return relaxed.best_value, None
    return deep.best_value, copies_of(deep)


def padded(packs) -> np.ndarray:
    """Packs (tuples of lengths) as int64 rows, each padded with at least one 0.

    >>> padded({(5, 3): 2, (4,): 1}).tolist()
    [[5, 3, 0], [4, 0, 0]]
    """
    sizes = np.fromiter(map(len, packs), dtype=np.int64, count=len(packs))
    rows = np.zeros((len(sizes), int(sizes.max(initial=0)) + 1), dtype=np.int64)
    rows[np.arange(rows.shape[1]) < sizes[:, None]] = np.fromiter(
        itertools.chain.from_iterable(packs), dtype=np.int64, count=int(sizes.sum()))
    return rows


def _at_most(rows, lengths, demand, bounds, values, max_length, max_sequences_per_pack):
    """The most Farley's bound at ``values`` can be: ``demand . values`` over what the packs
    ``rows`` (`padded`), bettered by `_worth`, are worth (the best pack is worth more)."""
    worth = _worth(rows, lengths, bounds, values, max_length, max_sequences_per_pack)
    return _column_generation.ceil(_budget.dot(demand, values) / worth) if worth > 0.0 else math.inf


def _worth(rows, lengths, bounds, values, max_length, max_sequences_per_pack) -> float:
    """At least the value of the best pack under ``values``: the best of ``rows`` (packs,
    `padded`), each bettered `Tuning.LIFT_MOVES` times by its best move of one sequence.

    A move puts the longest length present that fits in place of one sequence, or in
    the room beside them (values grow with length: `_column_generation.plateaus`), and
    is kept only where the pack keeps its copies of each length within ``bounds`` and
    its sequences within the depth: every pack stays a pack, so its value is at most
    the best. After the first move, only the `Tuning.LIFT_KNOWN` packs worth the most
    move on. On the long-context suite's narrow cases it came within 1e-4 of the
    pricing's best (`lifted`'s ``known``).

    >>> lengths, bounds = np.array([3, 4, 6]), np.array([3, 2, 1])
    >>> rows = padded([(3, 3)])
    >>> _worth(rows, lengths, bounds, np.array([0.25, 0.375, 0.75]), 10, None)  # (6, 4)
    1.125
    """
    value, most, longest = (np.zeros(max_length + 1) for _ in range(3))
    value[lengths], most[lengths], longest[lengths] = values, bounds, lengths
    longest = np.maximum.accumulate(longest).astype(np.int64)
    depth = max_sequences_per_pack or max_length
    best = float(value[rows].sum(1).max())
    for turn in range(Tuning.LIFT_MOVES):
        if turn == 1 and len(rows) > Tuning.LIFT_KNOWN:
            rows = rows[np.argpartition(-value[rows].sum(1), Tuning.LIFT_KNOWN)[:Tuning.LIFT_KNOWN]]
        room = max_length - rows.sum(1)
        # each sequence's best move (an empty place holds one where the depth allows it)
        gain = value[longest[rows + room[:, None]]] - value[rows]
        gain[(rows == 0) & ((rows > 0).sum(1) >= depth)[:, None]] = -1.0
        where = gain.argmax(1)
        moved = rows.copy()
        taken = np.arange(len(rows))
        moved[taken, where] = longest[rows[taken, where] + room]
        ordered = np.sort(moved, 1)
        copies = (ordered[:, :, None] == ordered[:, None, :]).sum(2)
        fits = ((ordered == 0) | (copies <= most[ordered])).all(1)
        rows = np.where(fits[:, None], moved, rows)
        best = max(best, float(value[rows].sum(1).max()))
    return best
