"""The conflict bound of two-length plans (`pairs.bounds.conflict`) and the compound templates
(`pairs._compounds`): exact small cases, bound <= brute-force optimum, valid plans."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfpack.packing import plan
from tfpack.packing.pairs import bounds
from tfpack.packing.pairs._compounds import compound, compound_swapped, joined
from tfpack.packing.pairs._packs import histogram_of, strategies_of
from tfpack.packing.pairs.checks import check_pair_plan

from tests.packing.test_pair_grid import balanced
from tests.packing.test_pair_plans import brute_force_packs, counts_of


def test_a_full_target_packs_alone():
    # Three (1, 4) fill Ld=4 alone; three (6, 1) conflict on Le=8: 6 packs, where tokens prove 4.
    counts = counts_of([(1, 4)] * 3 + [(6, 1)] * 3, (8, 4))
    assert bounds.conflict(counts, (8, 4, None)) == {"target_conflict": 6, "input_conflict": 4}
    assert brute_force_packs([(1, 4)] * 3 + [(6, 1)] * 3, (8, 4), None) == 6
    p = plan(counts, max_length=(8, 4), max_sequences_per_pack=None, algorithm="optimal", time_limit=None)
    assert (p.metrics["packs"], p.metrics["lower_bound_packs"], p.metrics["lower_bound_kind"]) == \
        (6, 6, "target_conflict")


def test_pairs_that_cannot_join_the_conflicting_ones_need_packs_of_their_own():
    # Ld=6, k=2: the (1, 5) conflict (targets 10 > 6) and leave a target of 1 beside them; the (5, 2)
    # cannot join them and need ceil(10 / 8) = 2 packs: 4, where the tokens prove 3.
    pairs = [(1, 5)] * 2 + [(5, 2)] * 2
    counts = counts_of(pairs, (8, 6))
    assert bounds.conflict(counts, (8, 6, None))["target_conflict"] == 4 == brute_force_packs(pairs, (8, 6), None)
    assert max(bounds.simple(counts, (8, 6, None)).values()) == 4


tiny = st.integers(2, 9).flatmap(lambda le: st.integers(1, 6).flatmap(lambda ld: st.tuples(
    st.just((le, ld)), st.lists(st.tuples(st.integers(1, le), st.integers(1, ld)), min_size=1, max_size=8))))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny)
def test_conflict_bound_is_below_the_optimum(case):
    max_length, pairs = case
    found = bounds.conflict(counts_of(pairs, max_length), (*max_length, None))
    assert max(found.values()) <= brute_force_packs(pairs, max_length, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny, st.sampled_from([None, 2, 3, 4]))
def test_compound_plans_are_valid(case, depth):
    max_length, pairs = case
    counts = counts_of(pairs, max_length)
    for make in (compound, compound_swapped):
        placed, bound = make(counts, (*max_length, depth), time_limit=None)
        assert bound is None
        strategies, packs = strategies_of(placed.pack, placed.a, placed.b, max_length[1])
        check_pair_plan(strategies, packs, counts, max_length=max_length, max_sequences_per_pack=depth)
        np.testing.assert_array_equal(histogram_of(strategies, packs, max_length), counts)


def test_joined_pairs_are_input_heavy_and_fit():
    rng = np.random.default_rng(1)
    a, b = rng.integers(1, 65, 500), rng.integers(1, 17, 500)
    partner = joined(a, b, (64, 16, None))
    assert (partner[partner] == np.arange(500)).all()  # an involution: compounds of two
    both = partner != np.arange(500)
    assert both.sum() > 100
    ja, jb = a + a[partner], b + b[partner]
    assert (ja[both] <= 64).all() and (jb[both] <= 16).all() and (ja[both] * 16 >= jb[both] * 64).all()


def test_compounds_spread_target_heavy_pairs():
    # Long inputs with short targets and short inputs with long targets (1,000 each), Le=16, Ld=8:
    # one of each fills a pack, templates of pairs put the short inputs together.
    counts = counts_of([(12, 2)] * 1000 + [(4, 6)] * 1000, (16, 8))
    placed, _ = compound(counts, (16, 8, 4), time_limit=None)
    assert placed.packs == 1000


def test_optimal_plans_compounds_where_both_kinds_of_pair_mix():
    # 20,000 bimodal pairs (long inputs with short targets, short inputs with long targets), 128/32,
    # K=16: 4,743 packs on a bound of 4,709 (0.7%); without compounds 4,815 (2.2%).
    rng = np.random.default_rng(1)
    heavy = rng.random(20_000) < 0.3
    a = np.exp(np.log(np.where(heavy, 0.05, 0.25) * 128) + 0.6 * rng.standard_normal(20_000)).astype(int) + 1
    b = np.exp(np.log(np.where(heavy, 0.30, 0.05) * 32) + 0.6 * rng.standard_normal(20_000)).astype(int) + 1
    counts = np.zeros((128, 32), dtype=np.int64)
    np.add.at(counts, (np.minimum(a, 128) - 1, np.minimum(b, 32) - 1), 1)
    p = plan(counts, max_length=(128, 32), max_sequences_per_pack=16, algorithm="optimal", time_limit=None)
    assert p.metrics["lower_bound_kind"] == "target_conflict"
    assert p.metrics["packs"] <= 1.01 * p.metrics["lower_bound_packs"]


def test_compounds_are_tried_where_partners_and_places_suffice():
    from tfpack.packing.pairs.algorithms import _compounds_fit
    counts = counts_of([(12, 2)] * 10 + [(4, 6)] * 10, (16, 8))  # as many target-heavy as input-heavy
    assert _compounds_fit(counts, (16, 8, 16), 4, inputs=True)
    assert not _compounds_fit(counts, (16, 8, 4), 4, inputs=True)  # 2 places for 4 pairs a pack
    counts[3, 5] += 1  # one more target-heavy (4, 6): they outnumber their partners
    assert not _compounds_fit(counts, (16, 8, 16), 4, inputs=True)
    assert _compounds_fit(counts, (16, 8, 16), 4, inputs=False)  # joined on the targets' side


def test_compounds_take_two_pairs_a_place_where_both_rows_bind():
    from tfpack.packing.pairs.algorithms import _compounds_fit
    counts = counts_of([(12, 2)] * 10 + [(4, 6)] * 10, (16, 8))  # 10 packs of tokens on each row
    both = (10, 10)
    assert _compounds_fit(counts, (16, 8, 8), 6, inputs=True, tokens=both)  # 4 places, 6 pairs: two a place
    assert not _compounds_fit(counts, (16, 8, 8), 6, inputs=True)  # rows not known to bind: a place a pair
    assert not _compounds_fit(counts, (16, 8, 5), 4, inputs=True, tokens=both)  # 2 places only
    assert not _compounds_fit(counts, (16, 8, 8), 9, inputs=True, tokens=both)  # 8 pairs on 4 places, not 9
    assert not _compounds_fit(counts, (16, 8, 8), 6, inputs=True, tokens=(10, 8))  # one row binds: 0.8


def test_optimal_plans_compounds_at_eight_places_where_both_rows_bind():
    # 20,000 balanced pairs (both medians 0.2 of their limits): about 4 pairs a pack, template
    # depth 5, 4 places for compounds. Templates of pairs alone: 5,301 packs.
    counts = balanced(20_000, (128, 32))
    p = plan(counts, max_length=(128, 32), max_sequences_per_pack=8, algorithm="optimal", time_limit=None)
    compounds = compound_swapped(counts, (128, 32, 8), None)[0].packs  # the targets bind: joined on their side
    assert p.metrics["packs"] <= compounds < 5_301
    assert p.metrics["lower_bound_packs"] <= p.metrics["packs"]


def test_the_grid_comes_first_at_five_places_where_both_rows_bind():
    # K=5: compounds would have 2 places; the grid's plan is the best candidate there.
    from tfpack.packing.pairs.algorithms import _grid_first
    found = {"input_tokens": 95, "target_tokens": 100, "sequences": 40}
    assert _grid_first(found, (16, 8, 5))
    assert not _grid_first(found, (16, 8, 6))  # compounds have 3 places
    assert not _grid_first({**found, "input_tokens": 80}, (16, 8, 5))  # one row binds: 0.8
    assert not _grid_first(found, (16, 8, 4))  # at K=4 tokens must need about the packs places do
    assert _grid_first({**found, "sequences": 100}, (16, 8, 4))
