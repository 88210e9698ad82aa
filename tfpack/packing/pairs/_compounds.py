"""Templates of compounds: each target-heavy pair joined to an input-heavy one, then planned on inputs.

A pair is input-heavy when ``a / Le >= b / Ld`` (integers: ``a Ld - b Le >=
0``, its slack) and target-heavy otherwise. A pack of input-heavy items fits
its targets whenever it fits its inputs (its targets fill at most the share of
``Ld`` that its inputs fill of ``Le``), so the one-length ``optimal`` on their
inputs plans it whole. Templates of pairs (`_templates`) give a pack all the
short inputs of some template at once; where the short inputs are the
target-heavy pairs (the bimodal family: long inputs with short targets, short
inputs with long targets), packs of three or four of them overflow ``Ld``
and the pairs given back fill new packs of a sixth of ``Le``. Here each
target-heavy pair is first joined to an input-heavy pair whose slack covers its
excess (the smallest such, target-heavy pairs of least excess first: the most
of them joined); a joined pair (a compound, two pairs that always share a pack)
is input-heavy and at most ``(Le, Ld)``. Compounds and the pairs left single
are planned by `_templates.fill` as pairs with at most ``K // 2`` a pack (two
pairs each), then split. Target-heavy pairs left single (no slack large
enough: a target of ``Ld`` leaves room for no other pair) are given back and
placed by first fit as `fill` does.

On 1e6 bimodal pairs at 2048/512, K=16: 233,475 packs against the 232,433 of
``target_conflict`` (0.45%), where templates of pairs gave 255,432-300,689.

>>> import numpy as np
>>> counts = np.zeros((8, 4), dtype=np.int64)
>>> counts[5, 0] = 3; counts[1, 2] = 3  # three (6, 1), three (2, 3): one of each fills (8, 4)
>>> placed, bound = compound(counts, (8, 4, None), time_limit=None)
>>> placed.packs, bound
(3, None)
>>> joined(np.array([6, 6, 2, 2]), np.array([1, 1, 3, 3]), (8, 4, None)).tolist()
[2, 3, 0, 1]
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.pairs._first_fit import Placed
from tfpack.packing.pairs._packs import counts_of, pairs_of
from tfpack.packing.pairs._templates import fill

__all__ = ["compound", "compound_swapped", "joined"]

_ROUNDS = 2  # matching rounds: the second joins target-heavy pairs left single to input-heavy ones left


def joined(a: np.ndarray, b: np.ndarray, limits) -> np.ndarray:
    """The partner of each pair in its compound, or its own index where it stays single (module notes)."""
    max_input, max_target, _ = limits
    slack = a * max_target - b * max_input
    partner = np.arange(a.size)
    for _ in range(_ROUNDS):
        single = partner == np.arange(a.size)
        heavy = np.flatnonzero(single & (slack < 0))
        light = np.flatnonzero(single & (slack >= 0))
        if not heavy.size or not light.size:
            break
        heavy = heavy[np.argsort(-slack[heavy], kind="stable")]  # least excess first
        light = light[np.argsort(slack[light], kind="stable")]  # least slack first
        # Greedy: each heavy pair takes the next light one with slack enough (the pointer only advances).
        first = np.searchsorted(slack[light], -slack[heavy], side="left")
        step = np.arange(heavy.size)
        at = np.maximum.accumulate(first - step) + step
        heavy, at = heavy[at < light.size], at[at < light.size]
        light = light[at]
        fits = (a[heavy] + a[light] <= max_input) & (b[heavy] + b[light] <= max_target)
        heavy, light = heavy[fits], light[fits]
        if not heavy.size:
            break
        partner[heavy], partner[light] = light, heavy
    return partner


def compound(counts: np.ndarray, limits, time_limit: float | None, depth="limit",
             beat: int | None = None) -> tuple[Placed | None, None]:
    """Pairs placed from templates of compounds and single pairs (module notes); no bound.

    ``depth``: the most compounds and single pairs a template holds, at most
    ``K // 2`` (by default that). None where the plan would have ``beat``
    packs or more for sure (`_templates.fill`).
    """
    max_input, max_target, limit = limits
    a, b = pairs_of(counts)
    partner = joined(a, b, limits)
    item = np.minimum(np.arange(a.size), partner)  # a compound is its first pair's item
    lead = np.flatnonzero(item == np.arange(a.size))
    item_a = np.bincount(item, a, a.size)[lead].astype(np.int64)
    item_b = np.bincount(item, b, a.size)[lead].astype(np.int64)
    items = counts_of(item_a, item_b, counts.shape)
    paired = bool((partner != np.arange(a.size)).any())
    places = limit if limit is None or not paired else max(1, limit // 2)
    depth = places if depth == "limit" or places is None else min(depth, places)
    placed, _ = fill(items, (max_input, max_target, places), time_limit, depth=depth, beat=beat)
    if placed is None:
        return None, None
    # Items of one (input, target) are alike: the k-th placed of a kind is the k-th lead of that kind.
    placed_order = np.lexsort((placed.b, placed.a))
    lead_order = np.lexsort((item_b, item_a))
    pack_of_lead = np.empty(a.size, dtype=np.int64)
    pack_of_lead[lead[lead_order]] = placed.pack[placed_order]
    return Placed(pack_of_lead[item], a, b, placed.packs), None


def compound_swapped(counts: np.ndarray, limits, time_limit: float | None,
                     depth="limit", beat: int | None = None) -> tuple[Placed | None, None]:
    """`compound` with the roles of inputs and targets swapped (input-heavy pairs joined)."""
    placed, bound = compound(counts.T, (limits[1], limits[0], limits[2]), time_limit, depth, beat)
    return (None if placed is None else Placed(placed.pack, placed.b, placed.a, placed.packs)), bound
