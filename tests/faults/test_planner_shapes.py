"""Fault injection, the `optimal` planner on degenerate histograms (issue 23).

What the long-context campaigns (test_planner_budget.py, test_planner_repair.py,
test_planner_kernels.py) do not draw: one length only (every sequence of length k,
of length L, a single sequence), L = 1, 2, 3, depth 1, every length present at
L=65,536 under depths 1-3, and budgets of zero and one nanosecond. One length
has a hand-computed optimum, ceil(count / min(depth, L // k)) packs: `optimal`
must reach it exactly; every plan must hold every sequence within the limits,
never have more packs than `bfd`, keep its bound at or below its packs, and
return near its budget.
"""

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call
from tests.faults.planner_checks import held
from tfpack.packing import plan




@campaign(40)
@given(max_length=st.sampled_from([1, 2, 3, 5, 64, 4096, 65536]),
       depth=st.sampled_from([None, 1, 2, 3]),
       length=st.sampled_from(["1", "2", "3", "L", "any"]),
       count=st.sampled_from([1, 7, 2 ** 20, 2 ** 40, "most"]),
       time_limit=st.sampled_from([0.0, 1e-9, 0.01]), data=st.data())
def test_one_length_only_plans_its_exact_optimum(max_length, depth, length, count, time_limit,
                                                 data):
    k = max_length if length == "L" else data.draw(st.integers(1, max_length)) \
        if length == "any" else int(length)
    k = min(k, max_length)
    most = (2 ** 63 - 1) // (max_length * 8)  # below validate_histogram's int64 limit
    count = most if count == "most" else min(count, most)
    histogram = np.zeros(max_length, np.int64)
    histogram[k - 1] = count
    optimum = -(-count // min(depth or max_length, max_length // k))
    bfd = plan(histogram, max_length, depth, algorithm="bfd").metrics["packs"]
    start = time.process_time()
    verdict = judge_call(
        lambda: plan(histogram, max_length, depth, algorithm="optimal", time_limit=time_limit),
        check=lambda r: held(r, histogram, max_length, depth, bfd, optimum))
    elapsed = time.process_time() - start
    assert verdict.outcome == HELD, (max_length, depth, k, count, time_limit, verdict)
    assert elapsed < time_limit + 2.0, elapsed


@campaign(40)
@given(max_length=st.integers(1, 3), depth=st.sampled_from([None, 1, 2, 3]),
       counts=st.lists(st.integers(0, 6), min_size=3, max_size=3),
       scale=st.sampled_from([1, 1000, 2 ** 40]), time_limit=st.sampled_from([0.0, 1e-9, 0.01]))
def test_the_smallest_contexts_plan_every_sequence(max_length, depth, counts, scale, time_limit):
    histogram = np.array(counts[:max_length], np.int64) * scale
    if not histogram.any():
        histogram[-1] = 1
    bfd = plan(histogram, max_length, depth, algorithm="bfd").metrics["packs"]
    verdict = judge_call(
        lambda: plan(histogram, max_length, depth, algorithm="optimal", time_limit=time_limit),
        check=lambda r: held(r, histogram, max_length, depth, bfd))
    assert verdict.outcome == HELD, (max_length, depth, histogram, verdict)


@pytest.mark.parametrize("depth", [1, 2, 3, None])
@pytest.mark.parametrize("copies", [1, (2 ** 63 - 1) // (65536 * 65537 // 2) // 2],
                         ids=["one-each", "int64-edge"])
def test_every_length_at_65536_under_a_zero_budget(depth, copies):
    """Every length 1..65,536 present ``copies`` times; with depth >= 2 the pairs (k, L - k)
    fill 32,767 * copies packs, the L / 2 ones pair up, the L ones are alone:
    L / 2 * copies + ceil(copies / 2) packs (depth 1: L * copies)."""
    max_length = 65536
    histogram = np.full(max_length, copies, np.int64)
    optimum = max_length * copies if depth == 1 else max_length // 2 * copies + -(-copies // 2)
    start = time.process_time()
    verdict = judge_call(
        lambda: plan(histogram, max_length, depth, algorithm="optimal", time_limit=0.0),
        check=lambda r: held(r, histogram, max_length, depth, optimum, optimum))
    assert verdict.outcome == HELD, verdict
    assert time.process_time() - start < 2.0
