"""How two-length `optimal` shares its time among candidates (`pairs.algorithms`).

The binding side's first templates get a fixed share of ``time_limit`` each
(``_BINDING_SHARE``), not a share of what is left: their one-length plans gain
most from time (stdlib docstrings at K=16: 1.17% -> 0.02% above the bound).
"""

import numpy as np
import pytest

from tfpack.packing.pairs import algorithms


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

    def call(counts, limits, *, depth, time_limit):
        seen.append(time_limit)
        return make(counts, limits, depth=depth, time_limit=time_limit)

    monkeypatch.setattr(algorithms, name, call)
    return seen


def test_the_binding_sides_first_templates_get_their_share_of_the_time_limit(monkeypatch):
    shares = {name: _recording(monkeypatch, name) for name in ("fill", "swapped")}
    counts = _docstring_like()
    placed, *_ = algorithms.optimal(counts, (512, 128, 16), seed=0, time_limit=1.0)
    assert placed.packs > 0 and shares["fill"], shares
    # The input row binds, so `fill` (input-side templates) is the binding side; its first
    # call gets 0.45 of the limit, where a share of the time left would give at most 0.3.
    assert shares["fill"][0] == pytest.approx(algorithms._BINDING_SHARE * 1.0)
    assert all(s is None or s <= 1.0 for s in shares["fill"] + shares["swapped"])


def test_without_a_time_limit_no_share_is_imposed(monkeypatch):
    seen = _recording(monkeypatch, "fill")
    algorithms.optimal(_docstring_like(pairs=500), (512, 128, 16), seed=0, time_limit=None)
    assert seen and all(s is None for s in seen)
