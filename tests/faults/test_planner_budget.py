"""Fault injection, the `optimal` planner's budget on long contexts (issue 23).

What a careless user hands it at L=16,384-65,536: every length present, only
short sequences, log-normal lengths (rounding up to units of 32 tokens loses much
there: the finer grid's path), a spike at L beside single copies, billions of one-token
sequences; with budgets from zero to a third of a second. Every plan must give
every sequence a slot within the limits, never have more packs than `bfd`,
keep its bound at or below its packs, and return within its budget and what
follows it (a generous margin: the point is never minutes, not a timing).
"""


import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD
from tests.faults.planner_checks import optimal_within_budget


def _histogram(shape: str, max_length: int, scale: int, rng) -> np.ndarray:
    histogram = np.zeros(max_length, dtype=np.int64)
    if shape == "every":  # every length, a few copies each
        histogram += rng.integers(1, 4, max_length) * scale
    elif shape == "short":  # 2,048 lengths of at most 2,048 tokens
        histogram[:2048] = rng.integers(0, 4, 2048) * scale
    elif shape == "lognormal":  # thousands of lengths, median L / 12: tokens bind from depth ~16
        lengths = np.minimum(rng.lognormal(np.log(max_length / 12), 0.9, 20_000), max_length)
        histogram += np.bincount(lengths.astype(np.int64), minlength=max_length + 1)[1:] * scale
    elif shape == "spike":  # full windows and single remainders
        histogram[rng.choice(max_length - 1, 3000, replace=False)] = 1
        histogram[-1] = 5000 * scale
    else:  # "ones": billions of one-token sequences beside 2,000 lengths
        histogram[rng.choice(max_length, 2000, replace=False)] = scale
        histogram[0] = 2 ** 40  # (the most that keeps every token count in int64 is ~2**49)
    return histogram




@campaign(10)
@given(max_length=st.sampled_from([16384, 32768, 65536]),
       depth=st.sampled_from([None, 3, 8, 16, 24]),
       shape=st.sampled_from(["every", "short", "lognormal", "spike", "ones"]),
       scale=st.sampled_from([1, 1000, 10 ** 6]),
       time_limit=st.sampled_from([0.0, 0.05, 0.3]),
       seed=st.integers(0, 2 ** 16))
def test_long_context_plans_hold_every_sequence_within_their_budget(max_length, depth, shape,
                                                                    scale, time_limit, seed):
    histogram = _histogram(shape, max_length, scale, np.random.default_rng(seed))
    verdict, elapsed, bfd_seconds = optimal_within_budget(histogram, max_length, depth, time_limit)
    assert verdict.outcome == HELD, (max_length, depth, shape, scale, time_limit, verdict)
    assert elapsed < time_limit + 2.0 + 10 * bfd_seconds, (max_length, depth, shape, elapsed)
