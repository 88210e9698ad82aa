"""What every planner fault scenario checks of a plan, and how it times one against its budget."""

import time

import numpy as np

from tests.faults.outcomes import judge_call
from tfpack.packing import plan
from tfpack.packing.checks import slot_counts


def held(result, histogram, max_length, depth, bfd_packs, optimum=None) -> bool:
    """Every sequence a slot, packs within length and depth, bound <= packs <= bfd's (= optimum)."""
    counts = result.counts
    return (bool(np.all(counts > 0))
            and all(sum(s) <= max_length and len(s) <= (depth or max_length)
                    for s in result.strategies)
            and bool(np.all(slot_counts(result.strategies, counts, max_length) >= histogram))
            and result.metrics["lower_bound_packs"] <= result.metrics["packs"] <= bfd_packs
            and optimum in (None, result.metrics["packs"]))


def optimal_within_budget(histogram, max_length, depth, time_limit):
    """`optimal`'s verdict (judged by `held` against `bfd`), its CPU seconds and bfd's."""
    start = time.process_time()
    bfd = plan(histogram, max_length, depth, algorithm="bfd")
    bfd_seconds = time.process_time() - start
    start = time.process_time()
    verdict = judge_call(
        lambda: plan(histogram, max_length, depth, algorithm="optimal", time_limit=time_limit),
        check=lambda r: held(r, histogram, max_length, depth, bfd.metrics["packs"]))
    return verdict, time.process_time() - start, bfd_seconds
