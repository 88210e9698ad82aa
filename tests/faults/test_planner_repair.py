"""Fault injection, the `optimal` planner's repair of a grouped plan (issue 23, branch planner6).

Where the tokens bind among thousands of lengths at a shallow depth (C headers at
L=8,192 depth 4: full windows beside every remainder length), a grouped plan
keeps part of its time to plan what its LP's whole packs leave (`_repair`). A
careless user's version of that shape: windows of L beside a few copies of
thousands of remainder lengths, or every length once, at L=2,048-8,192, depth
3-6, with budgets that end before, inside and after the repair. Every plan must
give every sequence a slot within the limits, never have more packs than
`bfd`, keep its bound at or below its packs, and return within its budget and
what follows it (a generous margin: the point is never minutes, not a timing).
"""


import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD
from tests.faults.planner_checks import optimal_within_budget


def _histogram(shape: str, max_length: int, rng) -> np.ndarray:
    histogram = np.zeros(max_length, dtype=np.int64)
    if shape == "windows":  # full windows and thousands of remainders, a few copies each
        lengths = rng.choice(max_length - 1, min(3000, max_length // 2), replace=False)
        histogram[lengths] = rng.integers(1, 5, len(lengths))
        histogram[-1] = int(rng.integers(0, 3000))
    else:  # "every": every length once or twice
        histogram += rng.integers(1, 3, max_length)
    return histogram




@campaign(8)
@given(max_length=st.sampled_from([2048, 4096, 8192]), depth=st.sampled_from([3, 4, 6]),
       shape=st.sampled_from(["windows", "every"]),
       time_limit=st.sampled_from([0.02, 0.15, 0.5]), seed=st.integers(0, 2 ** 16))
def test_shallow_plans_where_tokens_bind_hold_every_sequence_within_their_budget(
        max_length, depth, shape, time_limit, seed):
    histogram = _histogram(shape, max_length, np.random.default_rng(seed))
    verdict, elapsed, bfd_seconds = optimal_within_budget(histogram, max_length, depth, time_limit)
    assert verdict.outcome == HELD, (max_length, depth, shape, time_limit, verdict)
    assert elapsed < time_limit + 2.0 + 10 * bfd_seconds, (max_length, depth, shape, elapsed)
