"""`optimal` returns the stored plans of the code before its split, byte for byte (issue 32).

The cases, the counting clock that makes budget-driven plans deterministic, the
pinned OpenBLAS kernels and the file's format are in `optimal_plans.py`.
"""

import pytest

import optimal_plans

STORED = optimal_plans.load()
SKIP = optimal_plans.pinning_skip_reason()


@pytest.fixture(scope="module")
def plans():
    if SKIP:
        pytest.skip(SKIP)
    return {plan["name"]: plan for plan in optimal_plans.run_pinned(optimal_plans.CASES)}


def test_every_case_has_a_stored_plan():
    assert [case[0] for case in optimal_plans.CASES] == list(STORED)


@pytest.mark.parametrize("name", list(STORED))
def test_plan_is_the_stored_one(plans, name):
    assert plans[name] == STORED[name]


def test_counting_clock_decides_where_the_budget_ends():
    # Coarser ticks end the budget sooner: a different (worse or equal) plan, so the
    # stored budget-driven cases do exercise the budget.
    if SKIP:
        pytest.skip(SKIP)
    name, family, L, depth, sequences, seed, time_limit, tick = optimal_plans.CASES[7]
    assert tick is not None
    [coarse] = optimal_plans.run_pinned([(name, family, L, depth, sequences, seed, time_limit,
                                          10 * tick)])
    assert coarse["packs"] > STORED[name]["packs"]


def test_the_kernels_are_pinned_in_the_subprocess():
    # Unpinned (this machine's own choice of kernels) the subprocess refuses to run,
    # so no plan is ever checked or written with other kernels.
    if SKIP:
        pytest.skip(SKIP)
    pinned, optimal_plans.PINNED = optimal_plans.PINNED, {"OPENBLAS_CORETYPE": "Zen"}
    try:
        with pytest.raises(RuntimeError, match="pinned run failed"):
            optimal_plans.run_pinned(optimal_plans.CASES[:1])
    finally:
        optimal_plans.PINNED = pinned
