"""The two-length plan checks (`pairs.checks`): the compiled pass over all strategies (``pair_slots``)
refuses exactly what the per-strategy rules (`_broken`) refuse and counts every slot; a plan corrupted
in any one way is refused."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing import plan
from tfpack.packing.compiled import kernels
from tfpack.packing.pairs.checks import _broken, check_pair_plan

pair = st.tuples(st.integers(0, 3), st.integers(0, 3))  # short: sums fit, inputs tie often
inside = st.tuples(st.integers(1, 3), st.integers(1, 3))
strategy = st.one_of(st.lists(pair, min_size=0, max_size=4).map(tuple), st.lists(inside, max_size=3).map(tuple),
                     st.lists(pair, min_size=1, max_size=4).map(lambda p: tuple(sorted(p, reverse=True))),
                     st.lists(pair, min_size=1, max_size=4).map(lambda p: sorted(p, reverse=True)),
                     st.just(((3, 2.0),)), st.just(([3, 2],)), st.just(((3, 2, 1),)), st.just(((True, 1),)),
                     st.just(((2 ** 70, 1),)), st.just(((1, -2 ** 70),)), st.just(5), st.just("ab"))


def slots(strategies, counts, max_input, max_target, depth):
    """``pair_slots``: the first strategy refused, or the slots as an array."""
    index, found = kernels.pair_slots(strategies, np.asarray(counts, dtype=np.int64).tobytes(), max_input,
                                      max_target, depth)
    return index if index >= 0 else np.frombuffer(found, dtype=np.int64).reshape(max_input, max_target)


def reference(strategies, counts, max_input, max_target):
    """Slots counted pair by pair in plain Python."""
    out = np.zeros((max_input, max_target), dtype=np.int64)
    for s, count in zip(strategies, counts):
        for a, b in s:
            out[a - 1, b - 1] += count
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(strategy, max_size=5), st.integers(1, 12), st.integers(1, 9), st.integers(1, 4))
def test_the_compiled_pass_refuses_what_the_rules_refuse(strategies, max_input, max_target, depth):
    counts = list(range(1, len(strategies) + 1))
    first = next((i for i, s in enumerate(strategies) if _broken_or_error(s, max_input, max_target, depth)), -1)
    found = slots(strategies, counts, max_input, max_target, depth)
    if first >= 0:
        assert found == first
    else:
        np.testing.assert_array_equal(found, reference(strategies, counts, max_input, max_target))


def _broken_or_error(s, max_input, max_target, depth):
    try:
        return _broken(s, max_input, max_target, depth) is not None
    except TypeError:  # `list(5)`: not a sequence
        return True


def test_a_plan_of_many_strategies():
    strategies = [((5, 2), (3, 4)), ((4, 1),), ((4, 3), (4, 1))] * 1000
    counts = [1, 2, 3] * 1000
    np.testing.assert_array_equal(slots(strategies, counts, 8, 6, 2), reference(strategies, counts, 8, 6))
    assert slots(strategies + [((4, 1), (4, 3))], counts + [1], 8, 6, 2) == 3000  # not largest first
    assert slots(strategies, counts, 8, 5, 2) == 0  # targets of 6
    assert slots(strategies, counts, 8, 6, -1).sum() == 10000  # no depth limit
    assert isinstance(slots([((4, 1), (4, 1)), ((2, 1),) * 3], [1, 1], 8, 6, 3), np.ndarray)  # the depth reached
    assert slots([((2, 1),) * 3], [1], 8, 6, 2) == 0  # past the depth
    assert slots([((4, 1), (4, 2))], [1], 8, 6, 2) == 0  # equal inputs: longer target first


@pytest.fixture(scope="module")
def made():
    rng = np.random.default_rng(0)
    counts = np.zeros((16, 8), dtype=np.int64)
    np.add.at(counts, (rng.integers(0, 16, 300), rng.integers(0, 8, 300)), 1)
    return plan(counts, max_length=(16, 8), max_sequences_per_pack=3, algorithm="optimal", time_limit=None)


def _check(strategies, counts, p):
    check_pair_plan(strategies, np.asarray(counts), p.histogram, max_length=p.max_length,
                    max_sequences_per_pack=p.max_sequences_per_pack)


@pytest.mark.parametrize("corrupt, message", [
    (lambda s, c: (s, c[:-1] + [c[-1] + 1]), "slots without a pair"),
    (lambda s, c: (s, [c[0] - 1] + c[1:]) if c[0] > 1 else (s[1:], c[1:]), "without a slot"),
    (lambda s, c: ([((1, 1), (2, 1))] + s[1:], c), "largest first"),
    (lambda s, c: ([((16, 1), (1, 8))] + s[1:], c), "inputs of a strategy must sum"),
    (lambda s, c: ([((9, 8), (1, 8))] + s[1:], c), "targets of a strategy must sum"),
    (lambda s, c: ([((4, 1),) * 4] + s[1:], c), "at most max_sequences_per_pack=3"),
    (lambda s, c: ([((17, 1),)] + s[1:], c), "must lie in 1..Le=16"),
    (lambda s, c: ([((4, 1.0),)] + s[1:], c), "integer pairs"),
    (lambda s, c: ([()] + s[1:], c), "non-empty"),
])
def test_a_corrupted_plan_is_refused(made, corrupt, message):
    strategies, counts = list(made.strategies), made.counts.tolist()
    _check(strategies, counts, made)  # the plan itself passes
    assert len(strategies) > 1
    with pytest.raises(TfpackError, match=message):
        _check(*corrupt(strategies, counts), made)
