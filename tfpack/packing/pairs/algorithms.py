"""The two-length planners, registered by name: ``greedy``, ``ffd``, ``optimal``.

Each maps a two-length histogram ``counts[Le, Ld]`` and the limits
``(Le, Ld, K or None)`` to placed pairs (`_first_fit.Placed`: the pack of
every pair) and, where it proves one, a lower bound on the packs and its kind
(`bounds.KINDS`). `tfpack.packing.pairs.plan` checks what they return.

- ``greedy``: next fit in (shuffled) input order, as seqio and T5 pack pairs:
  a pack is closed when the next pair overflows its inputs, its targets or
  its places. Holds every pair in memory (at most 2^25).
- ``ffd``: first fit decreasing, pairs with the larger share of a limit
  first (`_first_fit`).
- ``optimal``: at up to 4 pairs a pack where tokens need about as many
  packs as places, or at 5 where both rows bind (`_grid_first`), first the LPs on a grid of units
  (`_grid`: a plan rounded from the LP of rounded-up pairs, the bound
  ``grid_lp`` of the LP of rounded-down ones, seeded with the other's
  columns), in ``time_limit``; then, only where time is left or the grid
  gave no plan, the binding side's templates, for their bound (not where
  the grid's holds the plan within 0.5%: `_GRID_CLOSE`); before the
  grid, the dot-product fill with aimed picks (`_dot`), the best plan kept
  (the grid's is not rounded where the fill beats its LP: `_grid._beaten`).
  Otherwise candidates in turn, until one is within 0.1% of the bound or
  the time is up (a candidate starts only where the time left covers the
  work past its share the one before it had: `_starts`): where both rows' tokens need packs within `_BOTH_BIND` of
  each other, first the dot-product fill (`_dot`: each pack takes, pair by
  pair, the one most aligned with its room; 1e6 balanced pairs at K=16:
  0.88-0.97% above the bound where compounds give 2.9-3.7%), then
  compounds where they fit, and no templates (they lost by 10-14%); where a pack has places for twice the pairs it must hold,
  or, where both rows bind, at least 3 for them two a place
  (`_compounds_fit`), templates of compounds on the side whose tokens bind
  first (`_compounds`: each pair heavy on the other side joined to one heavy
  on this side, 0.6 of the time left for its one-length plan); templates
  planned by the one-length ``optimal`` on that side, at the pairs a pack
  must hold rounded up and one deeper, the one with 10% room first
  (`_template_depths`; 0.7 and 0.45 of ``time_limit``), the other side
  fitted into them and repaired
  (`_templates`); ``ffd`` (up to 50,000 non-empty cells); templates on a blend
  of both lengths (`_blend`); the other side's templates; both sides at the
  other depths. The best plan, where it is not within 0.1% of the bound, replaced by packs
  filled by subset sums where they have fewer (`_subsets`: up to 1,000 pairs) and settled where
  it has up to `_SETTLE_PAIRS` pairs (`_settle.settled`; past them, one pass of `_settle.settle`
  where it is `_SETTLE_ABOVE` or more above the bound), with the strongest of `bounds`: both
  one-length LP bounds and, where the plan is above them, the two-length LP
  bound (`_lp_bound`, seeded with the plan's packs) in the time left, at
  least half of ``time_limit`` (past 4 pairs a pack only where half is left:
  `_bound_seconds`): on up to 5,000 non-empty cells, or at up to 4
  pairs a pack given 2 s (``time_limit >= 4``); 300 cells without a time
  limit, to its end (`_worth_a_bound`); where it converged, its solution
  rounded into a plan (`_rounding`) replaces the best where it has fewer packs.

>>> import numpy as np
>>> counts = np.zeros((8, 5), dtype=np.int64)
>>> counts[5, 0] = 2; counts[1, 3] = 2  # two (6, 1), two (2, 4); Le=8, Ld=5
>>> placed, bound, kind = get("optimal")(counts, (8, 5, None), seed=0, time_limit=None)
>>> placed.packs, bound, kind
(2, 2, 'input_tokens')
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing.algorithms._budget import Budget, collector_paused
from tfpack.packing.algorithms.greedy import MAX_SEQUENCES, walk
from tfpack.packing.pairs import _lp_bound, bounds
from tfpack.packing.pairs._blend import blend
from tfpack.packing.pairs._compounds import compound, compound_swapped
from tfpack.packing.pairs._dot import dot_fill
from tfpack.packing.pairs._settle import settle, settled, settled_fill
from tfpack.packing.pairs._subsets import subset_fill
from tfpack.packing.pairs._first_fit import Placed, decreasing, first_fit
from tfpack.packing.pairs._grid import grid
from tfpack.packing.pairs._packs import cells, pairs_of
from tfpack.packing.pairs._rounding import rounded
from tfpack.packing.pairs._templates import fill, swapped

__all__ = ["get", "names", "register"]

_REGISTRY: dict[str, Callable] = {}
# Share of the time left that each one-length plan of `optimal` (one template) gets.
_TEMPLATE_SHARE = 0.3
# ... but the binding side's first two templates these shares of `time_limit`: the one-length
# plan gains most from time there (stdlib docstrings x 205 at 512/128, K=16, depth 8: 142,103
# packs in 0.13 s, 139,334 in 0.3 s, 138,886 in 0.6 s on a bound of 138,885; x 205 at 1024/256,
# depth 15: 72,873 in 0.45, 72,633 in 0.5, 72,457 in 0.6, 72,373 in 1 on 72,356; x 1: its one-length
# plan 356 in 0.45, 354 in 0.6 (357 in another run) on 353).
_BINDING_SHARE = (0.7, 0.45)
# ... and the compound templates, where they come first (`_compounds_fit`) on over `_FFD_CELLS`
# non-empty cells: there one candidate takes the whole budget anyway and they gain most from time
# (1e6 bimodal pairs at 2048/512, K=16: 0.74% -> 0.48% above the bound); on fewer cells the next
# candidates need the time (stdlib docstrings at 512/128, K=16: 690 packs with 0.6, 685 with 0.3).
_COMPOUND_SHARE = 0.6
# The LPs on a grid of units (`_grid`) run first, in the whole `time_limit` (they converge in
# 0.55-1.2 s CPU on 1e6 balanced or bimodal pairs at K=4, and rounding their plan takes 0.3-1 s more),
# where tokens need this share of the packs places need (`_grid_first`): past it one row
# binds and its templates prove their plan (SQuAD-like x 10 at 512/128: 1.34, within 0.001%).
_GRID_TOKENS = (0.85, 1.02)
# Compounds are tried on half their places (`_compounds_fit`), and the grid first at K=5 (`_grid_first`),
# where both rows' tokens need packs within this factor of each other (`_both_bind`; balanced: 0.99;
# stdlib docstrings and Debian, one row binding: 0.52-0.76).
_BOTH_BIND = 0.9
# `optimal` stops trying candidates at a plan within this factor of its bound.
_CLOSE = 1.001
# ... and, after the grid (`_grid_first`), skips the templates run for their bound where the grid's
# bound holds the plan within this factor (the target): 1e6 pairs at K=4 (seeds 0 and 1,
# branch pairgap44), the input templates gave 265,252-274,078 packs on the bound 255,764-255,883
# (bimodal; balanced 512/128 266,459-267,666 on 253,752-253,820) in 0.27-0.94 s CPU, where the fill
# had 261,3xx and the grid proved 260,767-261,037 (bimodal) / 256,782-257,026 (balanced).
_GRID_CLOSE = 1.005
# The two-length LP bound gets at least this share of `time_limit` (more when plans left more) at
# up to 4 pairs a pack; past that only the time left: there it stops far below its LP (stdlib
# docstrings and Debian at K=16: Farley 237-106,272 on plans of 356-138,886, 0.5-0.6 s each).
_BOUND_SHARE = 0.5
# ... on histograms of up to this many non-empty cells; past them, at up to 4 pairs a pack
# (2-D tables price it: it converges) where it has this many seconds: 1e6 bimodal pairs at
# K=4, 24,000 cells, converged in 1.9 s (259,634 against 255,764 for the one-length bounds;
# nothing in 1 s), while at 16 pairs a pack it stops far below the LP.
_BOUND_CELLS = 5_000
_BOUND_SECONDS = 2.0
# Without a time limit, the LP runs to its end: only this small (its rounds cost up to
# seconds each on thousands of cells: 3,000 cells at K=8 took 200 s).
_UNTIMED_CELLS = 300
# `optimal` tries `ffd` up to this many non-empty cells (its scan costs cells x 4,096).
_FFD_CELLS = 50_000
# The best plan of up to this many pairs, where it is not within `_CLOSE` of the bound, is settled
# (`_settle.settled`: its least-filled packs dissolved and re-placed, 4 passes, 5 ms each on 4,857
# pairs): stdlib docstrings x 1 at 1024/256, K=16, 355 -> 354 packs on a bound of 353 (its
# templates' plan; Debian x 1, K=16, stays at 115 on 114: `_subsets` gives it 114). Past it a pass
# takes 0.1 s.
_SETTLE_PAIRS = 100_000
# Past `_SETTLE_PAIRS`, a best plan this factor or more above its bound gets one pass of `settle`
# (its 5% least-filled packs dissolved and re-placed): 1e6 bimodal pairs at K=16, where compounds
# win, 0.40-0.53% -> 0.13-0.17% above the bound in 0.09-0.16 s CPU (512/128 to 2048/512, seeds 0
# and 5; seed 5 at 512/128 was the one generated case out of 0.5% on seeds 2-6); 10% dissolved
# or a second pass gained at most 0.01% more for 0.1-0.17 s.
_SETTLE_ABOVE = 1.002
# The binding side's first template has at least this factor of the average pairs a pack as
# places (`_template_depths`).
_DEPTH_ROOM = 1.1


def register(name: str):
    """Decorator registering a two-length planner under ``name``."""
    def decorator(function):
        _REGISTRY[name] = function
        return function
    return decorator


def get(name: str):
    """The two-length planner registered under ``name``; a clear error otherwise."""
    if name not in _REGISTRY:
        raise TfpackError(f"`algorithm` must be one of {names()} for two lengths. Received: algorithm={name!r}")
    return _REGISTRY[name]


def names() -> list[str]:
    """Names of the two-length planners."""
    return sorted(_REGISTRY)


@register("greedy")
def greedy(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """Next fit over the pairs in an order shuffled with ``seed``."""
    if counts.sum() > MAX_SEQUENCES:
        raise TfpackError(f"`greedy` walks every pair, so it plans at most {MAX_SEQUENCES:,} pairs; plan "
                          f"larger histograms with ffd or optimal. Received: {int(counts.sum()):,} pairs")
    a, b = pairs_of(counts)
    order = np.random.default_rng(seed).permutation(a.size)
    a, b = a[order], b[order]
    following = np.arange(a.size) + (limits[2] or a.size)
    for lengths, limit in ((a, limits[0]), (b, limits[1])):
        ends = np.cumsum(lengths)
        np.minimum(following, np.searchsorted(ends, ends - lengths + limit, side="right"), out=following)
    starts = walk(following)
    pack = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    return Placed(pack, a, b, starts.size - 1), None, None


@register("ffd")
def ffd(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """First fit decreasing on groups of packs; deterministic."""
    a, b, n = cells(counts)
    order = decreasing(a, b, limits)
    return first_fit(a[order], b[order], n[order], limits), None, None


@register("optimal")
@collector_paused()
def optimal(counts: np.ndarray, limits, *, seed: int, time_limit=None):
    """The best of the candidates (module notes) tried in turn, with the strongest bound proven."""
    budget = Budget(time_limit)
    found = bounds.simple(counts, limits)
    sides = [("input_lp", fill), ("target_lp", swapped)]
    joins = [compound, compound_swapped]
    if found["target_tokens"] > found["input_tokens"]:
        sides.reverse()  # the side that binds first: its templates are the likeliest to be best
        joins.reverse()
    depths = _template_depths(counts, limits, max(found.values()))
    # Most often best first: compounds on the binding side where pairs, two a place, leave the
    # depth free; the binding side near its depth; then what wins where both bind.
    both = (found["input_tokens"], found["target_tokens"])
    tries = [(None, joins[0])] if _compounds_fit(counts, limits, max(depths[:2]), joins[0] is compound, both) else []
    # Where both rows bind, only the dot-product fill, settled (the best plan there past 5 pairs a
    # pack: `_dot`, `_settle`), and compounds: templates of pairs left 10-14% more packs there and
    # took 0.9-1.7 s CPU each on 1e6 pairs, past their time share (balanced at K=6 / 8 / 16:
    # 272,470 / 272,174 / 272,133 packs at 512/128 on the fill's 250,902 / 248,456 / 246,915;
    # 277,075 at 1024/256, K=16, on 244,705).
    if _both_bind(both):
        tries.insert(0, (None, settled_fill))
    else:
        tries += [(sides[0][0], functools.partial(sides[0][1], depth=depth)) for depth in depths[:2]]
        tries += [(None, _ffd_if_small), (None, blend), (sides[1][0], functools.partial(sides[1][1], depth=depths[0]))]
        tries += [(kind, functools.partial(make, depth=depth)) for kind, make in sides for depth in depths[1:]
                  if (kind, depth) != (sides[0][0], depths[1])]
    best, overhead = None, 0.0  # overhead: CPU a candidate spends past its share (`_starts`)
    if _grid_first(found, limits):
        # The aimed fill beats the grid's plan where places bind (`_dot`: 1e6 balanced / bimodal
        # pairs at 512/128, K=4: 257,813 / 261,454 packs where the grid's plan has 259,732 / 262,432):
        # first, so the grid spares rounding a plan it beats (`_grid._beaten`: 0.3-1 s on 1e6 pairs).
        began = budget.spent()
        dotted = dot_fill(counts, limits)[0]
        overhead = budget.spent() - began  # a pass over the pairs, as the templates' assignment is
        best, found["grid_lp"] = grid(counts, limits, time_limit=time_limit, beat=dotted)
        best = dotted if best is None or (dotted is not None and dotted.packs < best.packs) else best
        # Then, in the time left or where the grid gave no plan, the binding side's templates alone,
        # for their bound (the others lost to the grid's plan on every case measured and, on 1e6
        # pairs, take seconds each: ffd 3.4 s).
        done = best is not None and (best.packs <= _CLOSE * max(found.values()) or budget.expired()
                                     or best.packs <= _GRID_CLOSE * found["grid_lp"])
        tries = [] if done else [(sides[0][0], functools.partial(sides[0][1], depth=depths[0]))]
    binding = [id(make) for kind, make in tries[:3] if kind == sides[0][0]]
    for kind, make in tries:
        share = _COMPOUND_SHARE if make is joins[0] and np.count_nonzero(counts) > _FFD_CELLS else _TEMPLATE_SHARE
        share = None if time_limit is None else share * budget.left()
        if time_limit is not None and id(make) in binding:
            share = min(budget.left(), _BINDING_SHARE[binding.index(id(make))] * time_limit)
        if best is not None and not _starts(budget, overhead):
            break
        began = budget.spent()
        placed, bound = make(counts, limits, time_limit=share, beat=None if best is None else best.packs)
        overhead = budget.spent() - began - (share or 0.0)
        if kind is not None and bound is not None:
            found[kind] = max(found.get(kind, 0), bound)
        if placed is not None and (best is None or placed.packs < best.packs):
            best = placed
        if best.packs <= _CLOSE * max(found.values()) or budget.expired():
            break
    if best.packs > _CLOSE * max(found.values()):
        filled = subset_fill(counts, limits, seed=seed, floor=max(found.values()))  # small plans only
        best = filled if filled is not None and filled.packs < best.packs else best
    few = counts.sum() <= _SETTLE_PAIRS
    if few and best.packs > _CLOSE * max(found.values()):
        best = settled(best, limits)  # `_SETTLE_PAIRS`
    elif not few and best.packs > _SETTLE_ABOVE * max(found.values()):
        best = settle(best, limits)  # one pass (`_SETTLE_ABOVE`)
    left = _bound_seconds(budget, limits, time_limit)
    if best.packs > max(found.values()) and "grid_lp" not in found and _worth_a_bound(counts, limits, left):
        # Its solution, rounded into a plan, beats the others where both rows bind (`_rounding`).
        placed, result = rounded(counts, limits, left, plan=best, converged=True)
        found["pair_lp"] = result.bound
        if placed is not None and placed.packs < best.packs:
            best = placed
    return (best, *bounds.strongest(found))


def _starts(budget: Budget, overhead: float) -> bool:
    """Whether another candidate starts: the time left covers the ``overhead`` the last one had.

    A candidate's work besides its one-length plan (joining, slots,
    assignment, repair: a few passes over the pairs) is not in its share; the
    one before it measures it. A candidate started with less left runs past
    ``time_limit`` by that work and a share too small to plan well (1e6
    bimodal pairs at 2048/512, K=16: compounds' 0.35 s, then templates at
    depth 5 started with 0.05 s left took 0.24 s for 268,600 packs on 233,463;
    on the generated suite, seeds 0 and 1, no candidate after the first won).

    >>> from tfpack.packing.algorithms._budget import Budget
    >>> _starts(Budget(1.0), 0.3), _starts(Budget(0.1), 0.3), _starts(Budget(None), 5.0)
    (True, False, True)
    """
    return budget.left() >= overhead


def _grid_first(found: dict[str, int], limits) -> bool:
    """Whether the LPs on a grid (`_grid`) come first: few pairs a pack, and tokens bind about as much.

    At up to 4 pairs a pack (`_lp_bound.FEW`) where a row's tokens need
    about the packs the places do (`_GRID_TOKENS`), a pack can rarely take
    its 4 pairs in both rows at once, which neither side's templates see
    (1e6 balanced pairs at 512/128, K=4: 268,960 packs from templates, 260,669
    from the grid); where tokens bind less, templates of one side fill packs
    to their places and prove it (log-normal: within 0.03%). Not past 4
    pairs a pack: places no longer bind and the rounded-down LP proves less
    than the conflicts (1e6 balanced pairs at 512/128, K=16: 234,154-236,563
    at 24-32 units in 0.9-3.8 s, input_conflict 244,766; `_grid`'s notes),
    except at 5 where both rows bind (`_both_bind`) and compounds have only 2
    places (`_compounds_fit`): the grid's plan is the best there (1e6 balanced
    pairs at 512/128: 259,868 packs where templates give 273,511), its bound
    is not (the conflicts' is kept).
    """
    depth = limits[2]
    if depth is None:
        return False
    if depth > _lp_bound.FEW:
        return depth // 2 < 3 and _both_bind((found["input_tokens"], found["target_tokens"]))
    tokens = max(found["input_tokens"], found["target_tokens"])
    return _GRID_TOKENS[0] * found["sequences"] <= tokens <= _GRID_TOKENS[1] * found["sequences"]


def _bound_seconds(budget: Budget, limits, time_limit: float | None) -> float | None:
    """Seconds of the two-length LP bound (None: no limit; 0: none).

    At up to 4 pairs a pack its own share of the time (`_BOUND_SHARE`), so a
    plan found late still gets a bound; past that only where that share is
    left (it stops far under its LP there).

    >>> from tfpack.packing.algorithms._budget import Budget
    >>> _bound_seconds(Budget(1.0), (8, 4, 16), 1.0) > 0.5, _bound_seconds(Budget(None), (8, 4, 16), None)
    (True, None)
    """
    if time_limit is None:
        return None
    share = _BOUND_SHARE * time_limit
    if limits[2] is not None and limits[2] <= _lp_bound.FEW:
        return max(budget.left(), share)
    return budget.left() if budget.left() >= share else 0.0


def _worth_a_bound(counts: np.ndarray, limits, seconds: float | None) -> bool:
    """Whether the two-length LP bound may prove more than the others in ``seconds`` (None: no limit)."""
    cells = np.count_nonzero(counts)
    if seconds is None:
        return cells <= _UNTIMED_CELLS
    if seconds <= 0:
        return False
    few = limits[2] is not None and limits[2] <= _lp_bound.FEW  # priced on 2-D tables: it converges
    return cells <= _BOUND_CELLS or (few and seconds >= _BOUND_SECONDS)


def _template_depths(counts: np.ndarray, limits, bound: int) -> list[int | None]:
    """Depths to plan templates at: a little over the pairs a pack must hold, then the limit.

    The one-length plan of one side, free to fill a pack with many short
    inputs, gives the other side many targets there: limiting templates to
    about the pairs a pack holds on average (``n / bound``), rounded up, plus
    one spreads them (stdlib docstrings, K=16: 16.1% -> 0.4% above the bound);
    where rounding up alone leaves `_DEPTH_ROOM` more places than that
    average, without the one (stdlib docstrings at 512/128, 7.17 pairs a
    pack: 138,886 packs at depth 8, 140,506 at 9; at 1024/256, 13.76 pairs a
    pack: 72,373 at depth 15, 74,554 at 14). Only the plan at the limit
    itself gives a bound.
    """
    depth = limits[2]
    least = -(-int(counts.sum()) // bound)
    first = least if least * bound >= _DEPTH_ROOM * int(counts.sum()) else least + 1
    depths = [first, 2 * least + 1 - first, least + 2, depth]
    depths = [d if depth is None or d is None else min(d, depth) for d in depths]
    return list(dict.fromkeys(depths))


def _compounds_fit(counts: np.ndarray, limits, depth: int | None, inputs: bool, tokens=(0, 0)) -> bool:
    """Whether compounds (`_compounds`, joined on the ``inputs`` side or the targets') are worth a try.

    They need places, two pairs each: ``depth`` is a little over the pairs a
    pack must hold (`_template_depths`); at K=4 and 4 pairs a pack,
    compounds have 2 places (1e6 bimodal pairs at 512/128: 358,071 packs on a
    bound of 250,000). A place for each of ``depth`` pairs, or, where both
    rows' ``tokens`` (the packs each needs) are within `_BOTH_BIND` of each
    other, 3 places or more for ``depth`` pairs two a place (1e6 balanced
    pairs at 512/128, depth 6: K=6 / 8 / 10 251,449 / 252,149 / 251,942 packs
    where templates of pairs give 272,470 / 272,174 / 272,136; K=5, 2
    places: 281,428). And partners: each pair heavy on the other side takes
    one heavy on this side; where they outnumber those, many stay single
    (stdlib docstrings, 59% target-heavy: 147,616 packs where templates of
    pairs give 140,506).
    """
    places = None if limits[2] is None else limits[2] // 2
    both = _both_bind(tokens)
    if not (places is None or depth is None or places >= depth or (both and places >= 3 and 2 * places >= depth)):
        return False
    a, b, n = cells(counts)
    heavy = a * limits[1] < b * limits[0] if inputs else b * limits[0] < a * limits[1]
    return 2 * int(n[heavy].sum()) <= int(n.sum())


def _both_bind(tokens) -> bool:
    """Whether both rows' tokens (the packs each needs) are within `_BOTH_BIND` of each other."""
    return min(tokens) >= _BOTH_BIND * max(tokens) > 0


def _ffd_if_small(counts: np.ndarray, limits, time_limit=None, beat=None) -> tuple[Placed | None, None]:
    """``ffd``'s plan where the histogram has few cells (its cost grows with cells times packs)."""
    return (ffd(counts, limits, seed=0)[0] if np.count_nonzero(counts) <= _FFD_CELLS else None), None
