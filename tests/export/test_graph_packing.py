"""The in-graph packer behind `serve_sequences`: hand-computed packs and invariants."""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from tfpack.export import pack_sequences
from tfpack.export.graph_packing import gather_sequence_outputs, gather_token_outputs


def test_hand_computed_packs():
    features, placement = pack_sequences(
        tf.ragged.constant([[5, 6, 7], [8, 9], [4, 4, 4, 4], [3]]), max_length=6,
        max_sequences_per_pack=2, token_type_ids=tf.ragged.constant(
            [[0, 0, 1], [0, 1], [0, 0, 0, 1], [1]]))
    got = {k: v.numpy().tolist() for k, v in features.items()}
    assert got["input_ids"] == [[5, 6, 7, 8, 9, 0], [4, 4, 4, 4, 3, 0]]
    assert got["sequence_ids"] == [[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 2, 0]]
    assert got["position_ids"] == [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 0]]
    assert got["token_type_ids"] == [[0, 0, 1, 0, 1, 0], [0, 0, 0, 1, 1, 0]]
    assert got["cls_positions"] == [[0, 3], [0, 4]]
    assert got["sequence_mask"] == [[1.0, 1.0], [1.0, 1.0]]
    assert placement["pack"].numpy().tolist() == [0, 0, 1, 1]
    assert placement["slot"].numpy().tolist() == [0, 1, 0, 1]


def test_too_long_sequences_are_cut_and_k_is_respected():
    features, placement = pack_sequences(
        tf.ragged.constant([[1] * 9, [2], [3], [4]]), max_length=4, max_sequences_per_pack=2)
    assert features["input_ids"].numpy().tolist() == [[1, 1, 1, 1], [2, 3, 0, 0], [4, 0, 0, 0]]
    assert placement["length"].numpy().tolist() == [4, 1, 1, 1]


@settings(max_examples=25)
@given(lengths=st.lists(st.integers(1, 8), min_size=1, max_size=12), K=st.integers(1, 4))
def test_every_sequence_lands_once_and_comes_back(lengths, K):
    L = 8
    rows = [[10 * i + j + 1 for j in range(n)] for i, n in enumerate(lengths)]
    features, placement = pack_sequences(tf.ragged.constant(rows, dtype=tf.int32), L, K)
    ids = features["input_ids"].numpy()
    seq = features["sequence_ids"].numpy()
    assert ids.shape[1] == L and seq.max() <= K
    assert (ids > 0).sum() == sum(lengths)  # Nothing lost, nothing duplicated.
    # Per-token outputs gathered back give each sequence its own tokens.
    tokens = gather_token_outputs(features["input_ids"][..., None], placement, max(lengths))
    for i, row in enumerate(rows):
        assert tokens.numpy()[i, :len(row), 0].tolist() == row
    # Per-slot outputs gathered back: the slot's first token is the sequence's first.
    first = tf.gather(features["input_ids"], features["cls_positions"], batch_dims=1)
    assert gather_sequence_outputs(first, placement).numpy().tolist() == [r[0] for r in rows]
    np.testing.assert_array_equal(features["sequence_mask"].numpy().sum(), len(lengths))
