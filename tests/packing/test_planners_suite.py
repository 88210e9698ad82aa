"""A fast subset of `benchmarks/planners_suite.py` as a regression test (issue 23).

Generated histograms (small counts, so seconds in all): `optimal`'s plan is
valid, never has more packs than `bfd`, and is within 0.2% (or 2 packs) of
the bound it reports; its bound never exceeds a brute-force optimum on tiny
instances; and a tiny ``time_limit`` still returns a valid plan with a bound.
"""

import pathlib
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tfpack import packing
from tfpack.packing.algorithms import _bounds

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import planners_suite  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_optimal import brute_force_packs  # noqa: E402

# (family, L, depth, sequences, seed): cases where the full suite holds its target.
CASES = [
    ("lognormal", 512, 4, 5_000, 0),
    ("bimodal", 512, 8, 20_000, 1),
    ("zipf", 2048, 16, 3_000, 2),
    ("spikes", 2048, 4, 10_000, 3),
    ("uniform", 512, 2, 100_000_000, 4),
    ("windows", 512, 8, 5_000, 5),
]


def _histogram(family, max_length, sequences, seed):
    rng = np.random.default_rng(seed)
    return planners_suite.generated(family, max_length, sequences, rng)


@pytest.mark.parametrize("family,max_length,depth,sequences,seed", CASES)
def test_generated_cases_meet_the_target(family, max_length, depth, sequences, seed):
    histogram = _histogram(family, max_length, sequences, seed)
    best = packing.plan(histogram, max_length, depth, algorithm="optimal", time_limit=None)
    bfd = packing.plan(histogram, max_length, depth, algorithm="bfd")
    m = best.metrics  # plan() checked validity: every sequence a slot, limits kept
    assert m["packs"] <= bfd.metrics["packs"]
    assert m["packs"] - m["lower_bound_packs"] <= max(0.002 * m["lower_bound_packs"], 2), m
    assert m["lower_bound_kind"] in _bounds.KINDS
    assert m["lower_bound_packs"] >= max(_bounds.simple(histogram, max_length, depth).values())


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 12), st.sampled_from([None, 2, 3]),
       st.lists(st.integers(0, 3), min_size=4, max_size=12), st.floats(0.0, 0.05))
def test_bound_never_exceeds_the_brute_force_optimum(max_length, depth, counts, time_limit):
    histogram = np.zeros(max_length, dtype=np.int64)
    histogram[: len(counts[:max_length])] = counts[:max_length]
    if not histogram.any() or histogram.sum() > 9:
        return
    result = packing.plan(histogram, max_length, depth, algorithm="optimal",
                          time_limit=time_limit)
    optimum = brute_force_packs(histogram, max_length, depth)
    assert result.metrics["lower_bound_packs"] <= optimum <= result.metrics["packs"]


def test_long_bound_counts_what_cannot_pair():
    histogram = np.zeros(10, dtype=np.int64)
    histogram[[5, 4]] = [3, 1]  # three 6s and a 5 into packs of 10: no two share one
    assert _bounds.simple(histogram, 10, None) == {"tokens": 3, "long": 4}


def test_a_tiny_time_limit_returns_a_valid_plan_with_its_bound_quickly():
    histogram = _histogram("lognormal", 8192, 200_000, 7)  # thousands of lengths
    start = time.process_time()
    result = packing.plan(histogram, 8192, 8, algorithm="optimal", time_limit=0.01)
    elapsed = time.process_time() - start
    bfd = packing.plan(histogram, 8192, 8, algorithm="bfd")
    assert result.metrics["packs"] <= bfd.metrics["packs"]
    assert result.metrics["lower_bound_packs"] <= result.metrics["packs"]
    assert elapsed < 5 + 10 * bfd.metrics["solve_seconds"]  # generous: bfd runs first, always


def test_time_limit_is_validated():
    from tfpack.errors import TfpackError

    with pytest.raises(TfpackError, match=r"`time_limit` must be .*Received: time_limit=-1"):
        packing.plan(np.array([1, 1]), 2, None, time_limit=-1)


@pytest.mark.slow
def test_c_headers_at_depth_4_where_rounding_lost_packs_meets_the_target():
    """The one miss of the corpora never tuned on (branch planner5): every C header at
    L=8,192 depth 4, 2,696 full windows beside 7,295 remainders. Rounding its grouped
    LP lost 12 packs (4,800 on the token bound 4,784, 4,793 allowed); the repair plans
    what the LP's whole packs leave (4,789-4,791 in 1 s of CPU)."""
    case = next(c for c in planners_suite.real_cases(planners_suite.UNSEEN)
                if c["name"] == "c_headers" and c["depth"] == 4)
    histogram = planners_suite.histogram_of(case)
    if histogram is None:
        pytest.skip("benchmarks/data/corpus_c_headers.txt is missing")
    m = packing.plan(histogram, 8192, 4, algorithm="optimal").metrics  # the default 1 s
    assert m["lower_bound_packs"] == 4784
    assert m["packs"] - m["lower_bound_packs"] <= max(0.002 * m["lower_bound_packs"], 2), m
