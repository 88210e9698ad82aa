"""How two-length `optimal` shares its time among candidates (`pairs.algorithms`).

The binding side's first templates get a fixed share of ``time_limit`` each
(``_BINDING_SHARE``), not a share of what is left: their one-length plans gain
most from time (stdlib docstrings at K=16: 1.17% -> 0.02% above the bound).
"""

import numpy as np
import pytest

from tfpack.packing.pairs import algorithms
from tfpack.packing.pairs._first_fit import Placed


def _docstring_like(seed=0, pairs=3000):
    """Long inputs and short targets: the input row binds (as docstring -> first line)."""
    rng = np.random.default_rng(seed)
    inputs = np.clip(rng.lognormal(4.5, 0.8, pairs).astype(int), 1, 512)
    targets = np.clip(rng.lognormal(2.5, 0.5, pairs).astype(int), 1, 128)
    counts = np.zeros((512, 128), np.int64)
    np.add.at(counts, (inputs - 1, targets - 1), 1)
    return counts


def _recording(monkeypatch, name):
    """Replace template ``name`` by one that records the time limit of each call."""
    seen, make = [], getattr(algorithms, name)

    def call(counts, limits, *, time_limit, **rest):
        seen.append(time_limit)
        return make(counts, limits, time_limit=time_limit, **rest)

    monkeypatch.setattr(algorithms, name, call)
    return seen


def test_the_binding_sides_first_templates_get_their_share_of_the_time_limit(monkeypatch):
    shares = {name: _recording(monkeypatch, name) for name in ("fill", "swapped")}
    counts = _docstring_like()
    placed, *_ = algorithms.optimal(counts, (512, 128, 16), seed=0, time_limit=1.0)
    assert placed.packs > 0 and shares["fill"], shares
    # The input row binds, so `fill` (input-side templates) is the binding side; its first
    # call gets 0.7 of the limit, where a share of the time left would give at most 0.3.
    assert shares["fill"][0] == pytest.approx(algorithms._BINDING_SHARE[0] * 1.0)
    assert all(s is None or s <= 1.0 for s in shares["fill"] + shares["swapped"])
    # The second gets 0.45 at most (stdlib docstrings' one-length plan at 1024/256 needs 0.6 s for
    # 354 packs on 353, so the first gets more).
    assert len(shares["fill"]) > 1 and shares["fill"][1] <= algorithms._BINDING_SHARE[1] + 1e-9


def test_without_a_time_limit_no_share_is_imposed(monkeypatch):
    # (Compounds come first there and reach the bound: the templates may not run.)
    seen = {name: _recording(monkeypatch, name) for name in ("fill", "compound")}
    algorithms.optimal(_docstring_like(pairs=500), (512, 128, 16), seed=0, time_limit=None)
    assert seen["compound"] and all(s is None for s in seen["fill"] + seen["compound"])


@pytest.mark.parametrize("pairs, first", [(717, 8), (780, 9)])
def test_template_depths_start_at_the_average_rounded_up_where_it_leaves_room(pairs, first):
    counts = np.zeros((8, 4), np.int64)
    counts[0, 0] = pairs
    # 100 packs: 7.17 pairs a pack -> 8 places leave 11.6% room, first; 7.8 -> 8 leave 2.6%: 9 first.
    assert algorithms._template_depths(counts, (8, 4, 16), 100) == [first, 17 - first, 10, 16]


class _Left(algorithms.Budget):
    """A budget with a fixed time left, never expired."""

    seconds_left = 0.0

    def left(self) -> float:
        return self.seconds_left

    def expired(self) -> bool:
        return False


@pytest.mark.parametrize("depth, left, seconds", [(16, 0.3, 0.0), (16, 0.8, 0.8), (4, 0.3, 0.5), (4, 0.8, 0.8)])
def test_the_pair_lp_past_four_pairs_a_pack_gets_only_the_time_left(monkeypatch, depth, left, seconds):
    monkeypatch.setattr(_Left, "seconds_left", left)
    # At K=16 the LP stops far under its plan (Farley 237 on 356 packs, stdlib docstrings): it
    # starts only where half the limit is left; at K=4 it converges and gets at least that half.
    assert algorithms._bound_seconds(_Left(1.0), (512, 128, depth), 1.0) == seconds


def test_optimal_skips_the_pair_lp_at_sixteen_pairs_a_pack_without_the_time(monkeypatch):
    calls = []
    monkeypatch.setattr(_Left, "seconds_left", 0.3)
    monkeypatch.setattr(algorithms, "Budget", _Left)
    monkeypatch.setattr(algorithms, "rounded", lambda *args, **kwargs: calls.append(args[2]) or (None, _NoBound()))
    monkeypatch.setattr(algorithms, "subset_fill", lambda *args, **kwargs: None)  # it reaches the bound here
    placed, bound, _ = algorithms.optimal(_docstring_like(pairs=1000), (512, 128, 16), seed=0, time_limit=1.0)
    assert placed.packs > bound and calls == []  # a plan above its bound, yet no LP


class _NoBound:
    bound = 0


def _settled_plans(monkeypatch, name: str, **settings) -> tuple:
    """`optimal` on 3,000 docstring-like pairs at K=16 (no pair LP), with ``settings`` of
    `algorithms` set and its ``name`` (``settled`` or ``settle``) recording each plan it returns
    as a new object: ``(optimal's plan, the recorded plans)``."""
    seen, original = [], getattr(algorithms, name)

    def recording(placed, limits):
        after = original(placed, limits)
        seen.append(Placed(after.pack, after.a, after.b, after.packs))  # a new object, to be found again
        return seen[-1]

    monkeypatch.setattr(algorithms, name, recording)
    for setting, value in settings.items():
        monkeypatch.setattr(algorithms, setting, value)
    monkeypatch.setattr(algorithms, "_worth_a_bound", lambda *args: False)
    placed, _, _ = algorithms.get("optimal")(_docstring_like(), (512, 128, 16), seed=0, time_limit=0.5)
    return placed, seen


@pytest.mark.parametrize("most, settles", [(3000, True), (2999, False)])
def test_optimal_settles_the_best_plan_of_few_pairs_away_from_the_bound(monkeypatch, most, settles):
    # `_CLOSE` lowered so that no plan is within it: the best plan is settled (`_settle.settled`)
    # and what that returns is the plan, where the pairs are at most `_SETTLE_PAIRS`; not past it.
    # Seen failing with the test of the pairs dropped (2999 settled) and with the settled plan not
    # kept (the plan not the one returned).
    placed, seen = _settled_plans(monkeypatch, "settled", _CLOSE=0.5, _SETTLE_PAIRS=most)
    assert len(seen) == settles
    assert not settles or placed is seen[0]


@pytest.mark.parametrize("above, settles", [(0.5, True), (2.0, False)])
def test_optimal_settles_a_large_plan_far_from_the_bound_once(monkeypatch, above, settles):
    # `_SETTLE_PAIRS` below the 3,000 pairs: one pass of `settle` on the best plan where it is
    # `_SETTLE_ABOVE` or more above its bound (lowered to 0.5: always), and what that returns is
    # the plan; none where it is closer (2.0: never). Seen failing with the pass not run and with
    # its plan not kept.
    placed, seen = _settled_plans(monkeypatch, "settle", _SETTLE_PAIRS=100, _SETTLE_ABOVE=above)
    assert len(seen) == settles
    assert not settles or placed is seen[0]
