"""The in-graph packer behind `serve_sequences`: hand-computed best-fit-decreasing packs,
empty rows, and invariants against a plain-Python best-fit decreasing."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from tfpack.export import pack_sequences
from tfpack.export.graph_packing import gather_sequence_outputs, gather_token_outputs


def test_hand_computed_best_fit_decreasing_packs():
    # L=6, K=2. Longest first: [4,4,4,4] opens pack 0; [5,6,7] opens pack 1; [8,9] fits
    # both and goes where least room is left (pack 0: 2 tokens); [3] fits pack 1 only.
    # Next-fit in the caller's order would need 3 packs.
    features, placement = pack_sequences(
        tf.ragged.constant([[5, 6, 7], [8, 9], [4, 4, 4, 4], [3]]), max_length=6,
        max_sequences_per_pack=2, token_type_ids=tf.ragged.constant(
            [[0, 0, 1], [0, 1], [0, 0, 0, 1], [1]]))
    got = {k: v.numpy().tolist() for k, v in features.items()}
    assert got["input_ids"] == [[4, 4, 4, 4, 8, 9], [5, 6, 7, 3, 0, 0]]
    assert got["sequence_ids"] == [[1, 1, 1, 1, 2, 2], [1, 1, 1, 2, 0, 0]]
    assert got["position_ids"] == [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 0, 0]]
    assert got["token_type_ids"] == [[0, 0, 0, 1, 0, 1], [0, 0, 1, 1, 0, 0]]
    assert got["cls_positions"] == [[0, 4], [0, 3]]
    assert got["sequence_mask"] == [[1.0, 1.0], [1.0, 1.0]]
    assert placement["pack"].numpy().tolist() == [1, 0, 0, 1]
    assert placement["slot"].numpy().tolist() == [0, 1, 0, 1]
    assert placement["offset"].numpy().tolist() == [0, 4, 0, 3]


def test_empty_rows_take_no_slot_and_gather_zeros():
    features, placement = pack_sequences(
        tf.ragged.constant([[], [5, 6], [], [7]], tf.int32), max_length=4,
        max_sequences_per_pack=2)
    assert features["input_ids"].numpy().tolist() == [[5, 6, 7, 0]]
    assert placement["pack"].numpy().tolist() == [-1, 0, -1, 0]
    nan = tf.fill([1, 2, 1], float("nan"))  # Even NaN in unused slots stays out.
    slots = tf.constant([[[1.0], [2.0]]]) + tf.where(features["sequence_mask"][..., None] > 0,
                                                     0.0, nan)
    assert gather_sequence_outputs(slots, placement).numpy()[:, 0].tolist() == [0, 1, 0, 2]
    tokens = gather_token_outputs(tf.constant([[[1.0], [2.0], [3.0], [4.0]]]), placement, 2)
    assert tokens.numpy()[..., 0].tolist() == [[0, 0], [1, 2], [0, 0], [3, 0]]


def test_all_rows_empty_gives_one_empty_pack():
    features, placement = pack_sequences(tf.ragged.constant([[], []], tf.int32), 4, 2)
    assert features["input_ids"].numpy().tolist() == [[0, 0, 0, 0]]
    assert placement["pack"].numpy().tolist() == [-1, -1]


def test_too_long_sequences_are_refused():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"at most max_length=4 tokens"):
        pack_sequences(tf.ragged.constant([[1] * 5, [2]]), max_length=4,
                       max_sequences_per_pack=2)


def _python_bfd(lengths, L, K):
    room, count, pack = [], [], [None] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):  # stable
        if lengths[i] == 0:
            pack[i] = -1
            continue
        fits = [p for p in range(len(room)) if room[p] >= lengths[i] and count[p] < K]
        p = min(fits, key=lambda p: (room[p], p)) if fits else len(room)
        if p == len(room):
            room.append(L)
            count.append(0)
        room[p] -= lengths[i]
        count[p] += 1
        pack[i] = p
    return pack


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 8), min_size=1, max_size=12), K=st.integers(1, 4))
def test_every_sequence_lands_once_and_comes_back(lengths, K):
    L = 8
    rows = [[10 * i + j + 1 for j in range(n)] for i, n in enumerate(lengths)]
    features, placement = pack_sequences(tf.ragged.constant(rows, dtype=tf.int32,
                                                            ragged_rank=1), L, K)
    assert placement["pack"].numpy().tolist() == _python_bfd(lengths, L, K)
    ids = features["input_ids"].numpy()
    seq = features["sequence_ids"].numpy()
    assert ids.shape[1] == L and seq.max() <= K
    assert (ids > 0).sum() == sum(lengths)  # Nothing lost, nothing duplicated.
    tokens = gather_token_outputs(features["input_ids"][..., None], placement, max(lengths))
    for i, row in enumerate(rows):
        assert tokens.numpy()[i, :len(row), 0].tolist() == row
        assert not tokens.numpy()[i, len(row):].any()
    first = tf.gather(features["input_ids"], features["cls_positions"], batch_dims=1)
    assert gather_sequence_outputs(first, placement).numpy().tolist() == [
        r[0] if r else 0 for r in rows]
    np.testing.assert_array_equal(features["sequence_mask"].numpy().sum(),
                                  sum(n > 0 for n in lengths))
