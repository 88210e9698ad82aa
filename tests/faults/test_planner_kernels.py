"""Fault injection, the planner's compiled kernels (`tfpack/packing/_kernels.c`):
counts at the int64 edge, a tree whose kernels were never built.

The C loops count in int64 where the Python loops they replaced had unbounded
integers: a product past 2**63 would wrap silently. Every histogram that
`validate_histogram` accepts must plan exactly (every sequence in one slot), and
a missing build must be one `TfpackError` line naming the fix.
"""

import importlib
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call
from tfpack.packing import plan
from tfpack.packing.checks import slot_counts

def _exact(result, histogram, max_length, depth):
    """Every sequence has a slot, no pack breaks a limit, and no count wrapped."""
    counts = result.counts
    return (bool(np.all(counts > 0))
            and all(sum(s) <= max_length and len(s) <= (depth or max_length)
                    for s in result.strategies)
            and bool(np.all(slot_counts(result.strategies, counts, max_length) >= histogram))
            and result.metrics["packs"] >= result.metrics["lower_bound_packs"] >= 1)


@pytest.mark.parametrize("algorithm", ["bfd", "optimal"])
@pytest.mark.parametrize("histogram, max_length, depth", [
    ([2 ** 62 - 2, 1], 2, None),  # the largest representable: 2 * (2**62 - 1) tokens
    ([0] * 65535 + [2 ** 47 - 1], 65536, 8),  # packs of one sequence each, tokens near 2**63
    ([2 ** 59 - 1] + [0] * 6 + [1], 8, 4),  # 2**59 ones: groups of 2**57 packs take 4 each
])
def test_counts_at_the_int64_edge_plan_exactly(algorithm, histogram, max_length, depth):
    histogram = np.array(histogram, dtype=np.int64)
    verdict = judge_call(lambda: plan(histogram, max_length, depth, algorithm=algorithm,
                                      time_limit=0.5),
                         check=lambda r: _exact(r, histogram, max_length, depth))
    assert verdict.outcome == HELD, verdict


@campaign(25)
@given(max_length=st.integers(2, 64), depth=st.one_of(st.none(), st.integers(1, 6)),
       algorithm=st.sampled_from(["bfd", "optimal"]),
       shares=st.lists(st.integers(0, 1000), min_size=1, max_size=64), data=st.data())
def test_huge_random_counts_plan_exactly_or_refuse_in_one_line(max_length, depth, algorithm,
                                                               shares, data):
    """Counts drawn near (and past) the int64 token limit: a plan whose slots hold every
    sequence, or one TfpackError line where the histogram cannot be counted in int64."""
    shares = (shares * max_length)[:max_length]
    scale = data.draw(st.sampled_from([1, 2 ** 40, 2 ** 52, 2 ** 56, 2 ** 58]))
    histogram = np.array([s * scale // max(1, sum(shares)) for s in shares], dtype=np.int64)
    if not any(histogram):
        histogram[-1] = 1

    def call():
        return plan(histogram, max_length, depth, algorithm=algorithm, time_limit=0.3)

    verdict = judge_call(call, check=lambda r: _exact(r, histogram, max_length, depth))
    if verdict.outcome != HELD:
        verdict = judge_call(call, refuse=True, match="int64")
    assert verdict.outcome == HELD, (max_length, depth, algorithm, verdict)


def test_kernels_not_built_is_one_error_naming_the_fix(monkeypatch):
    """A source tree whose C extension was never built: importing the planner's
    kernels says how to build them, in one line, not an ImportError traceback."""
    import tfpack.packing

    monkeypatch.setitem(sys.modules, "tfpack.packing._kernels", None)  # import fails
    monkeypatch.delattr(tfpack.packing, "_kernels", raising=False)
    monkeypatch.delitem(sys.modules, "tfpack.packing.compiled", raising=False)
    try:
        verdict = judge_call(lambda: importlib.import_module("tfpack.packing.compiled"),
                             refuse=True, match="build_ext --inplace")
    finally:
        sys.modules.pop("tfpack.packing.compiled", None)
    assert verdict.outcome == HELD, verdict
    assert "tfpack/packing/_kernels.c" in verdict.evidence
