"""The planner's compiled kernels (tfpack/packing/_kernels.c) against plain references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import exact_fill_reference
import knapsack_reference
from tfpack.packing import compiled
from tfpack.packing.algorithms import _budget, _exact_fill, _knapsack


def same_pricing(lengths, bounds, values, max_length, depth, *, min_value, max_patterns,
                 exact=False):
    """`_knapsack.price` (compiled) equals the numpy reference bit for bit."""
    got = _knapsack.price(lengths, bounds, values, max_length, depth, min_value=min_value,
                          max_patterns=max_patterns, exact=exact)
    want = knapsack_reference.price(lengths, bounds, values, max_length, depth,
                                    min_value=min_value, max_patterns=max_patterns, exact=exact)
    best, patterns, worth = want.best_value, want.patterns, want.pattern_values
    assert got.best_value == best
    assert [(r.tolist(), c.tolist()) for r, c in got.patterns] == \
        [(r.tolist(), c.tolist()) for r, c in patterns]
    assert got.pattern_values.tolist() == worth.tolist()
    return got


def test_pricing_by_hand():
    """`_knapsack`'s module example: best .95 by [5, 3]; anchors 3 -> [3, 3, 2], 2 -> [2, 2]."""
    lengths, bounds = np.array([2, 3, 5]), np.array([2, 2, 1])
    got = same_pricing(lengths, bounds, np.array([.2, .35, .6]), 8, 3, min_value=0.0,
                       max_patterns=3, exact=True)
    assert got.best_value == pytest.approx(.95)
    assert [(r.tolist(), c.tolist()) for r, c in got.patterns] == [
        ([1, 2], [1, 1]), ([0, 1], [1, 2]), ([0], [2])]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pricing_equals_the_reference(data):
    """Small and wide tables (the vector path runs on rows of 8 cells and more),
    float32 and float64, with and without a depth, values in plateaus or not."""
    max_length = data.draw(st.integers(1, 300), label="max_length")
    n = data.draw(st.integers(1, min(max_length, 24)), label="n")
    lengths = np.sort(np.array(data.draw(st.lists(st.integers(1, max_length), min_size=n,
                                                  max_size=n)), dtype=np.int64))
    bounds = np.array(data.draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)))
    plateaus = data.draw(st.booleans())
    raw = data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    values = np.sort(np.array(raw) / 8.0) if plateaus else \
        np.array(raw) / 8.0 * lengths / max_length + 1e-3 * np.arange(n)
    depth = data.draw(st.one_of(st.none(), st.integers(1, 12)), label="depth")
    same_pricing(lengths, bounds, values, max_length, depth,
                 min_value=data.draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0])),
                 max_patterns=data.draw(st.integers(0, 8)), exact=data.draw(st.booleans()))


def test_pricing_equals_the_reference_on_a_planner_sized_table():
    """A table of the size column generation prices (L=2,048, depth 16, hundreds of lengths)."""
    rng = np.random.default_rng(3)
    lengths = np.unique(rng.integers(1, 2049, 300))
    bounds = rng.integers(1, 17, len(lengths))
    values = np.sort(rng.random(len(lengths))) * lengths / 2048 + 0.02
    got = same_pricing(lengths, bounds, values, 2048, 16, min_value=1.0, max_patterns=64)
    assert len(got.patterns) > 10


def ending_on(call: int, asked: list) -> _budget.Budget:
    """A budget that has ended from its ``call``-th asking on; each asking appends to ``asked``."""
    class Ends(_budget.Budget):
        def expired(self):
            asked.append(1)
            return len(asked) >= call

    return Ends(None)


def test_pricing_stops_when_the_budget_ends():
    """The kernel asks the budget every 32 lengths and gives up when it has ended."""
    asked = []
    lengths = np.arange(1, 101)
    with pytest.raises(_budget.OutOfTime):
        _knapsack.price(lengths, np.ones(100, dtype=np.int64), lengths / 100.0, 100, 4,
                        min_value=0.0, max_patterns=4, budget=ending_on(2, asked))
    assert len(asked) == 2  # after lengths 32 and 64


def price_at_every_vector_level(lengths, bounds, values, max_length, depth, single):
    """The kernel's output at vector levels 0 (none), 1 (SSE2) and 2 (AVX2), each capped at
    what this CPU runs: one table, bits and packs, so all equal."""
    lengths = np.asarray(lengths, dtype=np.int64)
    usable = np.ascontiguousarray(_knapsack._copies(lengths, bounds, max_length, depth),
                                  dtype=np.int64)
    priced = np.asarray(values, dtype=np.float32 if single else np.float64).astype(np.float64)
    skip = np.zeros(len(lengths), dtype=np.uint8)
    args = (lengths, usable, priced, skip, max_length, -1 if depth is None else depth, single,
            0.0, len(lengths), None)
    outs = [compiled.kernels.price(*args, level) for level in (0, 1, 2)]
    assert outs[1] == outs[0] and outs[2] == outs[0]
    return outs[0]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_vector_level_prices_alike(data):
    """Rows a few blocks of 8 wide or with a ragged end, items under and over 8 tokens, with a
    depth and without (an item then reads its own row, so its blocks run from the right),
    values that tie often and values that do not."""
    max_length = data.draw(st.integers(1, 200), label="max_length")
    n = data.draw(st.integers(1, min(max_length, 16)), label="n")
    lengths = np.unique(data.draw(st.lists(st.integers(1, max_length), min_size=n, max_size=n)))
    bounds = np.array(data.draw(st.lists(st.integers(1, 12), min_size=len(lengths),
                                         max_size=len(lengths))))
    raw = np.array(data.draw(st.lists(st.integers(1, 64), min_size=len(lengths),
                                      max_size=len(lengths)))) / 64.0
    # In plateaus (the duals' shape), many sums tie: a tie keeps the cell and sets no bit.
    values = np.sort(np.ceil(raw * 4) / 4) if data.draw(st.booleans(), label="plateaus") \
        else raw * lengths / max_length
    depth = data.draw(st.one_of(st.none(), st.integers(1, 8)), label="depth")
    price_at_every_vector_level(lengths, bounds, values, max_length, depth,
                                data.draw(st.booleans(), label="single"))


@pytest.mark.parametrize("depth", [None, 6])
def test_every_vector_level_prices_a_long_context_table_alike(depth):
    """L=6,000 with 400 lengths, the long-context tables the vector loops were written for;
    the packs are real (most anchors worth something)."""
    rng = np.random.default_rng(5)
    lengths = np.unique(rng.integers(9, 6001, 400))
    values = np.sort(rng.random(len(lengths))) * 0.1 + lengths / 6000
    corner, anchor_value, rows, counts, offsets = price_at_every_vector_level(
        lengths, np.full(len(lengths), 4), values, 6000, depth, single=True)
    assert corner > 1.0 and len(offsets) // 8 - 1 == len(lengths)


def same_fill(histogram, max_length, depth, most_left=None):
    """`_exact_fill.fill` (compiled) equals the Python greedy: packs in the same order, the
    same rest, and the same refusal (TooMuchLeft) where it refuses."""
    outcomes = []
    for fill in (_exact_fill.fill, exact_fill_reference.fill):
        try:
            packs, rest = fill(histogram, max_length, depth, most_left=most_left)
            outcomes.append((list(packs.items()), rest.tolist()))
        except _exact_fill.TooMuchLeft:
            outcomes.append("too much")
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_exact_fill_equals_the_reference(data):
    """Small and long rows, sparse and dense, every depth the planner passes (1-8), with and
    without a limit on what is left."""
    max_length = data.draw(st.sampled_from([1, 2, 8, 16, 64, 100, 257]), label="max_length")
    dense = data.draw(st.booleans(), label="dense")
    counts = data.draw(st.lists(st.integers(0, 30) if dense else
                                st.sampled_from([0, 0, 0, 0, 1, 2, 7, 40]),
                                min_size=max_length, max_size=max_length))
    histogram = np.array(counts, dtype=np.int64)
    depth = data.draw(st.one_of(st.none(), st.integers(1, 10)), label="depth")
    most = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, 2000), st.integers(0, 40))))
    same_fill(histogram, max_length, depth, most)


def test_exact_fill_equals_the_reference_on_a_long_context_histogram():
    """L=12,288, 200,000 documents cut into windows: full windows, and a remainder of every
    length, the kind of histogram `optimal` fills first; most of it lands in full packs."""
    rng = np.random.default_rng(7)
    lengths = np.minimum(rng.lognormal(np.log(4000), 0.8, 200_000).astype(np.int64) + 1, 12288)
    histogram = np.bincount(lengths - 1, minlength=12288).astype(np.int64)
    histogram[-1] += 50_000
    packs, rest = same_fill(histogram, 12288, 8)
    assert sum(packs_count for _, packs_count in packs) > 50_000 and sum(rest) < 200_000


def test_exact_fill_refuses_a_histogram_not_of_max_length():
    with pytest.raises(ValueError, match="histogram has 7 lengths, not max_length=8"):
        _exact_fill.fill(np.ones(7, dtype=np.int64), 8, 3)


def test_exact_fill_stops_when_the_budget_ends():
    """Asked every 64 openers and joiner searches, the kernel gives up once the budget ends."""
    asked = []
    with pytest.raises(_budget.OutOfTime):
        _exact_fill.fill(np.ones(4096, dtype=np.int64), 4096, 8, ending_on(3, asked))
    assert len(asked) == 3


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_dominated_equals_the_reference(data):
    n = data.draw(st.integers(1, 30))
    lengths = np.sort(np.array(data.draw(st.lists(st.integers(1, 50), min_size=n, max_size=n))))
    copies = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    values = np.sort(np.array(data.draw(st.lists(st.integers(0, 4), min_size=n,
                                                 max_size=n)))) / 4.0
    depth = data.draw(st.one_of(st.none(), st.integers(1, 8)))
    assert _knapsack._dominated(lengths, copies, values, 60, depth).tolist() == \
        knapsack_reference.dominated(lengths, copies, values, 60, depth).tolist()


def per_sequence_best_fit(histogram, max_length, depth):
    """Best fit decreasing one sequence at a time, the textbook way: packs in opening order."""
    bins = []  # [free space, lengths]
    for length in range(max_length, 0, -1):
        for _ in range(int(histogram[length - 1])):
            fits = [i for i, (space, items) in enumerate(bins)
                    if space >= length and len(items) < depth]
            if not fits:
                bins.append([max_length, []])
                fits = [len(bins) - 1]
            i = min(fits, key=lambda i: (bins[i][0], i))
            bins[i][0] -= length
            bins[i][1].append(length)
    return [tuple(items) for _, items in bins]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_best_fit_decreasing_equals_per_sequence_best_fit_pack_by_pack(data):
    """The compiled groups, expanded, are the per-sequence packs in their opening order:
    every sequence in exactly one pack, tokens and depth within the limits."""
    from tfpack.packing.algorithms import _fit_decreasing

    max_length = data.draw(st.integers(1, 40), label="max_length")
    histogram = np.array(data.draw(st.lists(st.integers(0, 12), min_size=max_length,
                                            max_size=max_length)), dtype=np.int64)
    spike = data.draw(st.integers(0, max_length - 1))
    histogram[spike] += data.draw(st.integers(0, 60))  # many copies: groups split
    depth = data.draw(st.one_of(st.none(), st.integers(1, 8)), label="depth")
    result = _fit_decreasing.fit_decreasing(histogram, max_length, depth, best_fit=True)
    expanded = [s for s, c in zip(result.strategies, result.counts.tolist()) for _ in range(c)]
    assert expanded == per_sequence_best_fit(histogram, max_length, depth or max_length)
    assert all(sum(s) <= max_length and len(s) <= (depth or max_length) for s in expanded)
    assert np.bincount([x for s in expanded for x in s], minlength=max_length + 1)[1:].tolist() \
        == histogram.tolist()


def test_best_fit_decreasing_counts_in_the_billions():
    """Counts, not sequences: 3e9 sequences of two lengths plan at once, as the algorithm says."""
    from tfpack.packing.algorithms import _fit_decreasing

    histogram = np.zeros(10, dtype=np.int64)
    histogram[[6, 2]] = [3_000_000_001, 4_000_000_000]  # lengths 7 and 3
    result = _fit_decreasing.fit_decreasing(histogram, 10, None, best_fit=True)
    # Each 7 opens a pack (space 3), a 3 fills each; 999,999,999 3s left: three a pack.
    assert result.strategies == [(7, 3), (3, 3, 3)]
    assert result.counts.tolist() == [3_000_000_001, 333_333_333]


def test_backtracking_stops_when_the_budget_ends():
    """Backtracking many packs asks the budget too (every 32 packs): 100 lengths ask it
    3 times forward (after lengths 32, 64, 96), the 4th time after 32 packs."""
    asked = []

    def ends_on(call):
        return ending_on(call, asked)

    lengths = np.arange(1, 101)
    args = (lengths, np.ones(100, dtype=np.int64), lengths / 100.0, 100, 4)
    whole = _knapsack.price(*args, min_value=0.0, max_patterns=100, exact=True,
                            budget=ends_on(10 ** 6))
    assert len(whole.patterns) == 100 and len(asked) == 3 + 3  # packs 32, 64, 96
    asked.clear()
    with pytest.raises(_budget.OutOfTime):
        _knapsack.price(*args, min_value=0.0, max_patterns=100, exact=True, budget=ends_on(4))
    assert len(asked) == 4


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_real_packs_equal_the_reference(data):
    """The real lengths in the slots of a plan for the rounded-up histogram: the same
    packs, in the same order, as the Python loops; spare slots dropped; every sequence
    in exactly one slot (counts up to 10**11: runs change inside groups of packs)."""
    import groups_reference
    from tfpack.packing.algorithms import _fit_decreasing, _groups

    max_length = data.draw(st.integers(1, 40), label="max_length")
    histogram = np.array(data.draw(st.lists(st.integers(0, 5), min_size=max_length,
                                            max_size=max_length)), dtype=np.int64)
    histogram[data.draw(st.integers(0, max_length - 1))] += data.draw(
        st.sampled_from([0, 7, 10 ** 4, 10 ** 11]))
    if not histogram.any():
        histogram[-1] = 1
    starts = np.unique(np.array([1] + data.draw(st.lists(st.integers(1, max_length),
                                                         max_size=max_length)), dtype=np.int64))
    depth = data.draw(st.one_of(st.none(), st.integers(1, 6)))
    up = _groups.rounded(histogram, starts, up=True)
    plan = _fit_decreasing.fit_decreasing(up, max_length, depth,
                                          best_fit=data.draw(st.booleans()))
    counts = plan.counts.copy()
    counts[0] += data.draw(st.integers(0, 3))  # spare slots
    got = _groups.real_packs(plan.strategies, counts, histogram, starts)
    want = groups_reference.real_packs(plan.strategies, counts, histogram, starts)
    assert list(got.items()) == list(want.items())
    slots = np.zeros(max_length + 1, dtype=np.int64)
    for pack, number in got.items():
        assert sum(pack) <= max_length and len(pack) <= (depth or max_length)
        np.add.at(slots, list(pack), number)
    assert slots[1:].tolist() == histogram.tolist()


def test_real_packs_refuse_a_plan_that_misses_sequences():
    from tfpack.packing.algorithms import _groups

    with pytest.raises(AssertionError, match="misses sequences"):
        _groups.real_packs([(6,)], np.array([1]), np.array([0, 2, 0, 1, 1, 1]), np.array([1, 3]))


@pytest.mark.parametrize("max_length, depth", [(4096, 8), (4096, None), (1000, 3)])
def test_best_fit_decreasing_equals_the_python_groups_on_wide_histograms(max_length, depth):
    """Thousands of lengths and counts in the millions: the same groups, in the same
    order, as the Python loop the kernel replaced."""
    import fit_reference
    from tfpack.packing.algorithms import _fit_decreasing

    rng = np.random.default_rng(max_length + (depth or 0))
    histogram = rng.multinomial(2_000_000, rng.dirichlet(np.full(max_length, 0.3)))
    got = _fit_decreasing.fit_decreasing(histogram, max_length, depth, best_fit=True)
    want = fit_reference.best_fit_decreasing(histogram, max_length, depth or max_length)
    assert got.strategies == want.strategies
    assert got.counts.tolist() == want.counts.tolist()
