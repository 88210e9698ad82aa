"""The two-length plan checks (`pairs.checks`): the check of all strategies at once agrees with the
per-strategy one on random, partly broken strategies."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing.pairs.checks import _all_kept, _broken

pair = st.tuples(st.integers(0, 3), st.integers(0, 3))  # short: sums fit, inputs tie often
strategy = st.one_of(st.lists(pair, min_size=0, max_size=4).map(tuple),
                     st.lists(pair, min_size=1, max_size=4).map(lambda p: tuple(sorted(p, reverse=True))),
                     st.just(((3, 2.0),)), st.just(([3, 2],)), st.just(((3, 2, 1),)))


@settings(max_examples=200, deadline=None)
@given(st.lists(strategy, max_size=5), st.integers(1, 9), st.integers(1, 6), st.integers(1, 4))
def test_all_at_once_agrees_with_one_at_a_time(strategies, max_input, max_target, depth):
    expected = all(_broken(s, max_input, max_target, depth) is None for s in strategies)
    assert _all_kept(strategies, max_input, max_target, depth) == expected


def test_a_plan_of_many_strategies():
    strategies = [((5, 2), (3, 4)), ((4, 1),), ((4, 3), (4, 1))] * 1000
    assert _all_kept(strategies, 8, 6, 2)
    assert not _all_kept(strategies + [((4, 1), (4, 3))], 8, 6, 2)  # not largest first
    assert not _all_kept(strategies, 8, 5, 2)  # targets of 6
    assert _all_kept([((4, 1), (4, 1)), ((2, 1),) * 3], 8, 6, 3)  # equal pairs, the depth reached
    assert not _all_kept([((2, 1),) * 3], 8, 6, 2)  # past the depth
    assert not _all_kept([((4, 1), (4, 2))], 8, 6, 2)  # equal inputs: longer target first
