"""The dot-product fill of two-length pairs (`tfpack.packing.pairs._dot`) and its place in ``optimal``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.packing import plan
from tfpack.packing.pairs import _dot
from tfpack.packing.pairs._dot import dot_fill

from tests.packing.test_pair_grid import balanced
from tests.packing.test_pair_plans import counts_of


def reference(counts: np.ndarray, limits, aimed: bool = False) -> list[list[tuple[int, int]]]:
    """The fill pair by pair over every cell: first the largest share of a limit, then its sum, then
    e; then the largest e*re/Le^2 + d*rd/Ld^2, then e, then d; ``aimed``: within (re, rd) // s first."""
    max_input, max_target, depth = limits
    left = counts.copy()
    packs = []
    while left.sum():
        re, rd, pack = max_input, max_target, []
        while depth is None or len(pack) < depth:
            s = None if depth is None else depth - len(pack)
            boxes = [(re // s, rd // s)] if aimed and pack and s > 1 else []
            for box_e, box_d in boxes + [(re, rd)]:
                cells = [(e * box_e * max_target ** 2 + d * box_d * max_input ** 2, e, d) for e in range(1, box_e + 1)
                         for d in range(1, box_d + 1) if left[e - 1, d - 1]]
                if cells:
                    break
            if not pack:
                cells = [(max(e * max_target, d * max_input), e * max_target + d * max_input, e, d)
                         for _, e, d in cells]
            if not cells:
                break
            e, d = max(cells)[-2:]
            left[e - 1, d - 1] -= 1
            re, rd = re - e, rd - d
            pack.append((e, d))
        packs.append(pack)
    return packs


def packs_of(placed) -> list[list[tuple[int, int]]]:
    packs = [[] for _ in range(placed.packs)]
    for p, a, b in zip(placed.pack.tolist(), placed.a.tolist(), placed.b.tolist()):
        packs[p].append((a, b))
    return packs


def test_hand_case():
    # Le = Ld = 10. First (4, 8) (8 of 10 the largest share), then in room (6, 2) only (6, 2)
    # fits; then (5, 5) and, in room (5, 5), the other (5, 5) (score 50 over (3, 3)'s 30); (3, 3).
    counts = counts_of([(6, 2), (4, 8), (5, 5), (5, 5), (3, 3)], (10, 10))
    placed, bound = dot_fill(counts, (10, 10, None), aimed=False)
    assert bound is None
    assert packs_of(placed) == [[(4, 8), (6, 2)], [(5, 5), (5, 5)], [(3, 3)]]
    # One pair a pack: largest share first, the two (5, 5) as one repeated pack.
    assert packs_of(dot_fill(counts, (10, 10, 1), aimed=False)[0]) == [[(4, 8)], [(6, 2)], [(5, 5)], [(5, 5)], [(3, 3)]]


def test_room_weights_the_row_used_least():
    # Le = 8, Ld = 4: (6, 1) first (shares 6/8 and 3/4 of (1, 3) tie; its sum is larger); the
    # room (2, 3) weights targets: (1, 3) scores 1*2*16 + 3*3*64 = 608, (2, 1) 2*2*16 + 1*3*64 = 256.
    counts = counts_of([(6, 1), (2, 1), (1, 3)], (8, 4))
    assert packs_of(dot_fill(counts, (8, 4, None), aimed=False)[0]) == [[(6, 1), (1, 3)], [(2, 1)]]


def test_aimed_picks_leave_room_for_the_places_left():
    # Le = Ld = 12, K = 3: (6, 6) first; room (6, 6) with 2 places: aimed, within (3, 3) first,
    # so (3, 3) and then (3, 3) fill the pack; unaimed, (5, 5) (score 60 over 36) strands the rest.
    counts = counts_of([(6, 6), (5, 5), (3, 3), (3, 3)], (12, 12))
    assert packs_of(dot_fill(counts, (12, 12, 3), aimed=True)[0]) == [[(6, 6), (3, 3), (3, 3)], [(5, 5)]]
    assert packs_of(dot_fill(counts, (12, 12, 3), aimed=False)[0]) == [[(6, 6), (5, 5)], [(3, 3), (3, 3)]]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.one_of(st.none(), st.integers(1, 5)),
       st.lists(st.tuples(st.integers(0, 80), st.integers(0, 3)), min_size=1, max_size=12), st.booleans())
def test_matches_the_reference_and_keeps_every_pair_once(max_input, max_target, depth, cells, aimed):
    counts = np.zeros((max_input, max_target), dtype=np.int64)
    for index, copies in cells:
        counts.flat[index % counts.size] += copies
    placed, _ = dot_fill(counts, (max_input, max_target, depth), aimed=aimed)
    assert packs_of(placed) == reference(counts, (max_input, max_target, depth), aimed and depth is not None)
    held = np.zeros_like(counts)
    np.add.at(held, (placed.a - 1, placed.b - 1), 1)
    assert (held == counts).all()  # every pair in exactly one pack
    if placed.pack.size:
        assert (np.bincount(placed.pack, minlength=placed.packs) > 0).all()  # ids 0..P-1, none empty
        assert np.bincount(placed.pack, placed.a).max() <= max_input
        assert np.bincount(placed.pack, placed.b).max() <= max_target
        assert np.bincount(placed.pack).max() <= (depth or max_input)


def test_aimed_matches_the_reference_on_seeded_histograms():
    # Aimed picks change a plan on few small histograms (hypothesis may miss them): 300 seeded
    # ones, 13 of which the aimed reference plans otherwise than the unaimed one.
    rng = np.random.default_rng(0)
    changed = 0
    for _ in range(300):
        counts = (rng.integers(0, 3, (9, 9)) * (rng.random((9, 9)) < 0.2)).astype(np.int64)
        limits = (9, 9, int(rng.integers(2, 6)))
        aimed = reference(counts, limits, aimed=True)
        assert packs_of(dot_fill(counts, limits, aimed=True)[0]) == aimed
        changed += aimed != reference(counts, limits)
    assert changed == 13


@pytest.mark.parametrize("pairs, depth, time_limit, fill_packs", [
    # K=16, both rows binding: without the fill `optimal` planned 13,030 packs (b7450cf,
    # time_limit=1; bound 12,772).
    (50_000, 16, 1.0, 12_878),
    # K=4, where `optimal` runs the grid's LPs first: their plan had 5,262 packs (time_limit=1;
    # bound 5,120); the fill's picks are aimed there.
    (20_000, 4, 0.5, 5_219),
])
def test_optimal_keeps_the_fill(pairs, depth, time_limit, fill_packs):
    counts = balanced(pairs, (128, 32))
    fill, _ = dot_fill(counts, (128, 32, depth))
    result = plan(counts, max_length=(128, 32), max_sequences_per_pack=depth, algorithm="optimal",
                  time_limit=time_limit)
    assert fill.packs == fill_packs
    assert result.metrics["packs"] <= fill.packs


def test_no_fill_past_its_cells(monkeypatch):
    # Past `_MOST_CELLS` the fill plans nothing and `optimal` plans without it (here the grid runs first).
    counts = balanced(5_000, (128, 32))
    monkeypatch.setattr(_dot, "_MOST_CELLS", counts.size - 1)
    assert dot_fill(counts, (128, 32, 4)) == (None, None)
    result = plan(counts, max_length=(128, 32), max_sequences_per_pack=4, algorithm="optimal", time_limit=0.3)
    assert result.metrics["packs"] >= result.metrics["lower_bound_packs"] > 0
