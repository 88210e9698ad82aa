"""The flash kernel's block loops visit exactly the blocks the packs need.

The minimum is computed here independently, by brute force: the `[L, L]`
mask of allowed pairs cut into blocks; a key block is needed by a query
block when any pair between them is allowed.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.layers.flash_blocks import block_bounds, key_blocks_visited


def allowed_pairs(ids, causal, window):
    """Boolean `[B, L, L]`: query i may see key j."""
    ids = np.asarray(ids)
    index = np.arange(ids.shape[1])
    mask = (ids[:, :, None] == ids[:, None, :]) & (ids[:, :, None] > 0)
    if causal:
        mask &= index[None, :, None] >= index[None, None, :]
    if window is not None:
        offset = index[None, None, :] - index[None, :, None]  # j - i
        mask &= (offset >= -window[0]) & (offset <= window[1])
    return mask


def needed_blocks(ids, block_q, block_k, causal=False, window=None):
    """Boolean `[B, L / block_q, L / block_k]` by brute force."""
    mask = allowed_pairs(ids, causal, window)
    batch, length, _ = mask.shape
    blocks = mask.reshape(batch, length // block_q, block_q,
                          length // block_k, block_k)
    return blocks.any(axis=(2, 4))


def ranges_to_sets(ranges, blocks):
    ranges = np.asarray(ranges)
    out = np.zeros(ranges.shape[:2] + (blocks,), bool)
    for b, row in enumerate(ranges):
        for i, (low, high) in enumerate(row):
            out[b, i, low:high] = True
    return out


def test_hand_computed_pack():
    # Sequences of 3, 1 (one token) and 5 tokens, then 7 padding, blocks of 4.
    ids = np.array([[1, 1, 1, 2, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0]])
    keys, queries = block_bounds(ids, 4, 4)
    # Query block 0 holds sequences 1 and 2 (keys 0-3: block 0); block 1
    # sequence 3 (keys 4-8: blocks 1-2); block 2 sequence 3's last token;
    # block 3 padding only (nothing).
    assert np.asarray(keys).tolist() == [[[0, 1], [1, 3], [1, 3], [0, 0]]]
    assert np.asarray(queries).tolist() == [[[0, 1], [1, 3], [1, 3], [0, 0]]]
    # Causal: query block 1 (tokens 4-7) needs keys 4-7 only.
    assert np.asarray(key_blocks_visited(ids, 4, 4, causal=True)).tolist() == [
        [1, 1, 2, 0]]
    # One sequence filling the row: the whole (triangle of) blocks.
    full = np.ones((1, 16), int)
    assert np.asarray(key_blocks_visited(full, 4, 4)).tolist() == [[4] * 4]
    assert np.asarray(key_blocks_visited(full, 4, 8, causal=True)).tolist() == [
        [1, 1, 2, 2]]


def test_visits_fall_with_more_sequences():
    ids = np.repeat(np.arange(1, 9), 8)[None]  # 8 sequences of 8, L = 64
    visited = np.asarray(key_blocks_visited(ids, 8, 8)).sum()
    assert visited == 8  # one key block each, instead of 64 for dense


@st.composite
def packs(draw):
    # One shape (8 rows of 64) so that each block size compiles once; rows
    # are many per call, so that fewer calls (about 0.3 s each) cover as much.
    block_q = draw(st.sampled_from([1, 4, 16]))
    block_k = draw(st.sampled_from([2, 8, 16]))
    length = 64
    rows = []
    for _ in range(8):
        lengths, used = [], 0
        while used < length and draw(st.integers(0, 4)):
            size = draw(st.integers(1, min(length - used, 24)))
            lengths.append(size)
            used += size
        row = np.concatenate([np.full(n, k + 1) for k, n in enumerate(lengths)]
                             + [np.zeros(length - used, int)]).astype(int)
        rows.append(row)
    causal = draw(st.booleans())
    window = draw(st.none() | st.tuples(st.integers(0, 9), st.integers(0, 9)))
    if causal and window is not None:
        window = (window[0], 0)
    return np.stack(rows), block_q, block_k, causal, window


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(packs())
def test_bounds_visit_exactly_the_needed_blocks(case):
    ids, block_q, block_k, causal, window = case
    keys, queries = block_bounds(ids, block_q, block_k, causal=causal,
                                 window=window)
    needed = needed_blocks(ids, block_q, block_k, causal, window)
    length = ids.shape[1]
    assert (ranges_to_sets(keys, length // block_k) == needed).all()
    assert (ranges_to_sets(queries, length // block_q)
            == needed.transpose(0, 2, 1)).all()
    visited = np.asarray(key_blocks_visited(ids, block_q, block_k,
                                            causal=causal, window=window))
    assert (visited == needed.sum(axis=2)).all()


@settings(max_examples=5, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=32, max_size=32),
                min_size=1, max_size=12),
       st.booleans())
def test_bounds_cover_every_allowed_pair_of_any_ids(rows, causal):
    # Ids out of order or split (not tfpack's packs): maybe not minimal, but
    # every allowed pair lies in a visited block. Rows are independent: a
    # batch of them per call (each eager call costs about a second).
    ids = np.array(rows)
    keys, queries = block_bounds(ids, 4, 2, causal=causal)
    needed = needed_blocks(ids, 4, 2, causal)
    assert not (needed & ~ranges_to_sets(keys, ids.shape[1] // 2)).any()
    assert not (needed.transpose(0, 2, 1)
                & ~ranges_to_sets(queries, ids.shape[1] // 4)).any()


@pytest.mark.parametrize("window", [(2, 0), (0, 3), (3, 1)])
def test_windows_narrow_the_loop(window):
    ids = np.ones((1, 32), int)
    causal = window[1] == 0
    narrowed = np.asarray(key_blocks_visited(ids, 4, 4, causal=causal,
                                             window=window))
    whole = np.asarray(key_blocks_visited(ids, 4, 4, causal=causal))
    assert (narrowed <= 3).all() and narrowed.sum() < whole.sum()
    assert (narrowed == needed_blocks(ids, 4, 4, causal, window).sum(2)).all()
