"""`optimal` returns the stored plans of the code before its split, byte for byte (issue 32).

The cases, the counting clock that makes budget-driven plans deterministic and
the file's format are in `optimal_plans.py`.
"""

import pytest

import optimal_plans

STORED = optimal_plans.load()


def test_every_case_has_a_stored_plan():
    assert [case[0] for case in optimal_plans.CASES] == list(STORED)


@pytest.mark.parametrize("case", optimal_plans.CASES, ids=[case[0] for case in optimal_plans.CASES])
def test_plan_is_the_stored_one(case):
    assert optimal_plans.run(case) == STORED[case[0]]


def test_counting_clock_decides_where_the_budget_ends():
    # Coarser ticks end the budget sooner: a different (worse or equal) plan, so the
    # stored budget-driven cases do exercise the budget.
    name, family, L, depth, sequences, seed, time_limit, tick = optimal_plans.CASES[7]
    assert tick is not None
    coarse = optimal_plans.run((name, family, L, depth, sequences, seed, time_limit, 10 * tick))
    assert coarse["packs"] > STORED[name]["packs"]
