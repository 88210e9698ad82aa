"""Two-length plans (`tfpack.packing.pairs`): hand-made cases, brute-force optima, dispatch, files."""

import functools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing import plan
from tfpack.packing.pairs import PairPackingPlan, algorithm_names
from tfpack.packing.pairs._packs import histogram_of

ALGORITHMS = ["greedy", "ffd", "optimal"]


def counts_of(pairs, shape):
    counts = np.zeros(shape, dtype=np.int64)
    for a, b in pairs:
        counts[a - 1, b - 1] += 1
    return counts


def brute_force_packs(pairs, max_length, depth):
    """The fewest packs of ``pairs`` under both limits and ``depth``: DP over subsets."""
    n = len(pairs)
    fits = []
    for mask in range(1 << n):
        chosen = [pairs[i] for i in range(n) if mask >> i & 1]
        fits.append(sum(a for a, _ in chosen) <= max_length[0] and sum(b for _, b in chosen) <= max_length[1]
                    and (depth is None or len(chosen) <= depth))

    @functools.lru_cache(maxsize=None)
    def best(mask):
        if not mask:
            return 0
        low = mask & -mask
        result, sub = n, mask
        while sub:
            if sub & low and fits[sub]:
                result = min(result, 1 + best(mask & ~sub))
            sub = (sub - 1) & mask
        return result

    return best((1 << n) - 1)


def test_algorithm_names():
    assert algorithm_names() == ["ffd", "greedy", "optimal"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_identical_pairs_two_a_pack(algorithm):
    # Five (3, 2) pairs, Le=8, Ld=4: two a pack (targets 4), so 3 packs; targets bound it: ceil(10 / 4).
    p = plan(counts_of([(3, 2)] * 5, (8, 4)), max_length=(8, 4), max_sequences_per_pack=None,
             algorithm=algorithm, time_limit=None)
    assert sorted(zip(p.strategies, p.counts.tolist())) == [(((3, 2),), 1), (((3, 2), (3, 2)), 2)]
    assert (p.metrics["packs"], p.metrics["lower_bound_packs"], p.metrics["lower_bound_kind"]) == \
        (3, 3, "target_tokens")
    assert p.metrics["input_tokens"] == 15 and p.metrics["target_padding_tokens"] == 2


def test_optimal_pairs_an_input_heavy_with_a_target_heavy_pair():
    # (6, 1) and (2, 3) fill (8, 4) exactly: 2 packs, where each side alone packs them in 2 as well
    # but first fit by share would pair badly only if it ignored targets.
    counts = counts_of([(6, 1), (6, 1), (2, 3), (2, 3)], (8, 4))
    p = plan(counts, max_length=(8, 4), max_sequences_per_pack=2, algorithm="optimal", time_limit=None)
    assert p.strategies == [((6, 1), (2, 3))] and p.counts.tolist() == [2]
    assert p.metrics["input_efficiency"] == 1.0 and p.metrics["target_efficiency"] == 1.0


def test_depth_limit_binds():
    # Six (1, 1) pairs, K=4: ceil(6 / 4) = 2 packs, bound "sequences".
    p = plan(counts_of([(1, 1)] * 6, (8, 8)), max_length=(8, 8), max_sequences_per_pack=4, algorithm="ffd")
    assert p.metrics["packs"] == 2 and p.metrics["max_depth_used"] == 4
    assert p.metrics["lower_bound_kind"] == "sequences"


pair_lists = st.integers(2, 9).flatmap(lambda le: st.integers(2, 6).flatmap(lambda ld: st.tuples(
    st.just((le, ld)),
    st.lists(st.tuples(st.integers(1, le), st.integers(1, ld)), min_size=1, max_size=7),
    st.sampled_from([None, 1, 2, 3]))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair_lists)
def test_plans_are_valid_and_the_bound_is_below_the_optimum(case):
    max_length, pairs, depth = case
    counts = counts_of(pairs, max_length)
    fewest = brute_force_packs(pairs, max_length, depth)
    for algorithm in ALGORITHMS:
        p = plan(counts, max_length=max_length, max_sequences_per_pack=depth, algorithm=algorithm,
                 seed=3, time_limit=None)
        # Every pair placed exactly once; every pack within both limits and the depth.
        np.testing.assert_array_equal(histogram_of(p.strategies, p.counts, max_length), counts)
        for strategy in p.strategies:
            assert sum(a for a, _ in strategy) <= max_length[0]
            assert sum(b for _, b in strategy) <= max_length[1]
            assert depth is None or len(strategy) <= depth
        assert p.metrics["lower_bound_packs"] <= fewest <= p.metrics["packs"]
        assert p.metrics["sequences"] == len(pairs)


def test_optimal_is_close_to_its_bound_on_a_generated_histogram():
    rng = np.random.default_rng(0)
    a = np.clip(rng.lognormal(np.log(40), 0.6, 20_000).astype(int), 1, 256)
    b = np.clip(rng.lognormal(np.log(6), 0.6, 20_000).astype(int), 1, 64)
    counts = np.zeros((256, 64), dtype=np.int64)
    np.add.at(counts, (a - 1, b - 1), 1)
    packs = {name: plan(counts, max_length=(256, 64), max_sequences_per_pack=8, algorithm=name,
                        time_limit=None).metrics for name in ALGORITHMS}
    optimal = packs["optimal"]
    assert optimal["packs"] <= packs["ffd"]["packs"] < packs["greedy"]["packs"]
    assert optimal["packs"] <= 1.005 * optimal["lower_bound_packs"]


@pytest.mark.parametrize("histogram, max_length, message", [
    (np.ones(8, dtype=np.int64), (8, 4), r"shape \(Le, Ld\) = \(8, 4\).*Received: histogram with shape \(8,\)"),
    (np.ones((8, 4), dtype=np.int64), 8, r"needs `max_length=\(Le, Ld\)`.*Received: max_length=8"),
    (np.ones((8, 3), dtype=np.int64), (8, 4), r"Received: histogram with shape \(8, 3\)"),
    (np.ones((8, 4), dtype=np.int64), (8, 0), r"`max_length` must be a positive integer or a pair of positive integers. Received: max_length=\(8, 0\)"),
    (np.ones((8, 4), dtype=np.int64), (8, 4, 2), r"Received: max_length=\(8, 4, 2\)"),
    (np.ones((8, 4), dtype=np.int64), (1 << 13, 1 << 12), r"Le \* Ld at most"),
    (-np.ones((8, 4), dtype=np.int64), (8, 4), r"non-negative"),
    (np.zeros((8, 4), dtype=np.int64), (8, 4), r"at least one pair"),
])
def test_dispatch_errors(histogram, max_length, message):
    with pytest.raises(TfpackError, match=message):
        plan(histogram, max_length=max_length, max_sequences_per_pack=2)


def test_unknown_algorithm_and_bad_time_limit():
    counts = counts_of([(2, 2)], (4, 4))
    with pytest.raises(TfpackError, match=r"one of \['ffd', 'greedy', 'optimal'\] for two lengths.*spfhp"):
        plan(counts, max_length=(4, 4), max_sequences_per_pack=2, algorithm="spfhp")
    with pytest.raises(TfpackError, match=r"time_limit=-1"):
        plan(counts, max_length=(4, 4), max_sequences_per_pack=2, time_limit=-1)


def test_one_length_path_still_plans():
    p = plan(np.array([0, 0, 2, 0, 2, 0, 0, 1]), 8, 2, algorithm="spfhp")
    assert p.strategies == [(5, 3), (8,)]


def test_json_round_trip_and_refusals():
    counts = counts_of([(6, 1), (6, 1), (2, 3), (2, 3), (3, 2)], (8, 4))
    p = plan(counts, max_length=(8, 4), max_sequences_per_pack=3, algorithm="optimal", time_limit=None)
    q = PairPackingPlan.from_json(p.to_json())
    assert (q.strategies, q.counts.tolist(), q.max_length, q.max_sequences_per_pack) == \
        (p.strategies, p.counts.tolist(), (8, 4), 3)
    np.testing.assert_array_equal(q.histogram, counts)
    assert q.metrics == {**p.metrics, "solve_seconds": q.metrics["solve_seconds"]}
    data = json.loads(p.to_json())
    data["strategies"][0].append([1, 4])  # one more pair: inputs (and targets) overflow
    with pytest.raises(TfpackError, match=r"inputs of a strategy must sum to at most Le=8"):
        PairPackingPlan.from_json(json.dumps(data))
    data = json.loads(p.to_json())
    data["histogram"].append([1, 1, 1])  # a pair without a slot
    with pytest.raises(TfpackError, match=r"1 without a slot, e.g. 1 of input length 1 and target length 1"):
        PairPackingPlan.from_json(json.dumps(data))
    with pytest.raises(TfpackError, match=r"format='tfpack-pair-plan'.*Received: format='tfpack-plan'"):
        PairPackingPlan.from_json(json.dumps({**json.loads(p.to_json()), "format": "tfpack-plan"}))
    # The stored numbers are checked as a one-length plan's are (was a bare ValueError).
    data = json.loads(p.to_json())
    data["metrics"]["solve_seconds"] = "soon"
    with pytest.raises(TfpackError, match=r"metrics.solve_seconds must be a number"):
        PairPackingPlan.from_json(json.dumps(data))


def test_either_row_closes_a_pack():
    # (1, 3) pairs, Le=8, Ld=4: the inputs would take 8 a pack, the targets allow one.
    for algorithm in ALGORITHMS:
        p = plan(counts_of([(1, 3)] * 3, (8, 4)), max_length=(8, 4), max_sequences_per_pack=None,
                 algorithm=algorithm, time_limit=None)
        assert p.strategies == [((1, 3),)] and p.counts.tolist() == [3]


def test_assign_places_every_example_in_a_pack_of_its_plan():
    rng = np.random.default_rng(1)
    inputs, targets = rng.integers(1, 40, 2_000), rng.integers(1, 12, 2_000)
    counts = np.zeros((64, 16), dtype=np.int64)
    np.add.at(counts, (inputs - 1, targets - 1), 1)
    p = plan(counts, max_length=(64, 16), max_sequences_per_pack=4, algorithm="optimal", time_limit=None)
    a = p.assign(inputs, targets, seed=5)
    assert sorted(a.order.tolist()) == list(range(2_000)) and a.num_packs == p.metrics["packs"]
    packs = {}
    for k in range(a.num_packs):
        pairs = tuple(zip(inputs[a.pack(k)].tolist(), targets[a.pack(k)].tolist()))
        assert pairs == tuple(sorted(pairs, reverse=True))  # largest pair first, as the strategy
        packs[pairs] = packs.get(pairs, 0) + 1
    assert packs == dict(zip(p.strategies, p.counts.tolist()))
    assert not np.array_equal(a.order, p.assign(inputs, targets, seed=6).order)
    np.testing.assert_array_equal(a.order, p.assign(inputs, targets, seed=5).order)


def test_assign_refuses_pairs_the_plan_has_no_slot_for():
    p = plan(counts_of([(6, 1), (2, 3)], (8, 4)), max_length=(8, 4), max_sequences_per_pack=2)
    with pytest.raises(TfpackError, match=r"Received: 2 pairs of input length 6 and target length 1, for 1 slots"):
        p.assign(np.array([6, 6]), np.array([1, 1]))
    with pytest.raises(TfpackError, match=r"Received: pair 0 = \(9, 1\)"):
        p.assign(np.array([9]), np.array([1]))


@pytest.mark.parametrize("name", [
    "tfpack.packing.pairs", "tfpack.packing.pairs.plans", "tfpack.packing.pairs.assignment",
    "tfpack.packing.pairs.metrics", "tfpack.packing.pairs.bounds", "tfpack.packing.pairs.checks",
    "tfpack.packing.pairs.algorithms", "tfpack.packing.pairs._packs", "tfpack.packing.pairs._first_fit",
    "tfpack.packing.pairs._templates", "tfpack.packing.pairs._blend", "tfpack.packing.pairs._rounding",
])
def test_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted and not result.failed
