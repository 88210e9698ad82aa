"""Fault injection, the planning API: `tfpack.packing.plan`, `PackingPlan.assign` and
`tfpack.data.pack` with any argument a careless caller passes.

Issue 22: ``plan(..., seed=-1)`` raised numpy's "expected non-negative integer"
(the CLI refused it, the API did not), and other algorithms took any seed at
all. Every draw must return a checked plan or raise one `TfpackError` line.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfpack
from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call
from tfpack.packing import algorithm_names, plan

HISTOGRAM = np.array([0, 0, 2, 0, 2, 0, 0, 1])  # lengths 3, 3, 5, 5, 8
BAD_SEEDS = [-1, -2**40, 1.5, "0", None, True, float("nan"), [1]]


@pytest.mark.parametrize("algorithm", ["greedy", "ffd", "optimal"])
@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_a_bad_seed_is_refused_by_every_entry_point(algorithm, seed):
    verdict = judge_call(lambda: plan(HISTOGRAM, 8, 3, algorithm=algorithm, seed=seed),
                         refuse=True, match=f"seed={seed!r}")
    assert verdict.outcome == HELD, verdict
    planned = plan(HISTOGRAM, 8, 3, algorithm=algorithm)
    verdict = judge_call(lambda: planned.assign([3, 3, 5, 5, 8], seed=seed), refuse=True,
                         match="`seed` must be a non-negative integer")
    assert verdict.outcome == HELD, verdict


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_a_bad_seed_is_refused_by_the_tf_data_packer(seed):
    verdict = judge_call(lambda: tfpack.data.pack(max_length=8, max_sequences_per_pack=2,
                                                  seed=seed),
                         refuse=True, match="`seed` must be a non-negative integer")
    assert verdict.outcome == HELD, verdict


ANY = st.one_of(st.integers(-3, 12), st.integers(-2**65, 2**65), st.none(), st.booleans(),
                st.floats(allow_nan=True), st.sampled_from(["3", "", "ffd", [3], (8,)]))


def _valid(result, histogram, max_length, depth):
    metrics = result.metrics
    return (result.max_length == max_length and metrics["sequences"] == int(histogram.sum())
            and (depth is None or max(map(len, result.strategies)) <= depth))


@campaign(40)
@given(max_length=st.one_of(st.integers(1, 12), ANY), depth=st.one_of(st.integers(1, 4), ANY),
       algorithm=st.sampled_from(sorted(algorithm_names()) + ["", "FFD", "none ", 3]),
       seed=st.one_of(st.integers(0, 2**64), ANY),
       time_limit=st.one_of(st.none(), st.floats(0.01, 0.2), ANY),
       counts=st.lists(st.integers(0, 4), min_size=1, max_size=12))
def test_random_plan_arguments_plan_or_refuse_in_one_line(max_length, depth, algorithm, seed,
                                                          time_limit, counts):
    histogram = np.array(counts)

    def call():
        return plan(histogram, max_length, depth, algorithm=algorithm, seed=seed,
                    time_limit=time_limit)

    verdict = judge_call(call, check=lambda r: _valid(r, histogram, max_length, depth))
    if verdict.outcome != HELD:
        verdict = judge_call(call, refuse=True)
    assert verdict.outcome == HELD, (max_length, depth, algorithm, seed, time_limit, verdict)
