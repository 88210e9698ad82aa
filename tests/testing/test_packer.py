import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.testing import next_fit, next_token_labels, pack_examples


def test_pack_by_hand():
    examples = [
        {"input_ids": [5, 6], "token_type_ids": [0, 1],
         "masked_lm_positions": [1], "masked_lm_ids": [9],
         "next_sentence_labels": 1},
        {"input_ids": [7, 8, 9], "token_type_ids": [0, 0, 1],
         "masked_lm_positions": [0, 2], "masked_lm_ids": [3, 4],
         "next_sentence_labels": 0},
    ]
    packed = pack_examples(examples, max_length=6, max_sequences_per_pack=3,
                           max_predictions=4)
    expected = {
        "input_ids": [[5, 6, 7, 8, 9, 0]],
        "sequence_ids": [[1, 1, 2, 2, 2, 0]],
        "position_ids": [[0, 1, 0, 1, 2, 0]],
        "token_type_ids": [[0, 1, 0, 0, 1, 0]],
        "cls_positions": [[0, 2, 0]],
        "sequence_mask": [[1, 1, 0]],
        "example_ids": [[0, 1, -1]],
        "masked_lm_positions": [[1, 2, 4, 0]],
        "masked_lm_ids": [[9, 3, 4, 0]],
        "masked_lm_weights": [[1, 1, 1, 0]],
        "masked_lm_sequence_ids": [[1, 2, 2, 0]],
        "next_sentence_labels": [[1, 0, 0]],
    }
    assert sorted(packed) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(packed[name], value, err_msg=name)


def test_causal_labels_never_cross_sequences():
    examples = [{"input_ids": ids, "labels": next_token_labels(ids)}
                for ids in ([3, 4, 5], [6, 7])]
    packed = pack_examples(examples, max_length=6)
    np.testing.assert_array_equal(packed["labels"],
                                  [[4, 5, -100, 7, -100, -100]])


def test_next_fit_and_errors():
    assert next_fit([2, 2, 2], 6, max_sequences_per_pack=2) == [[0, 1], [2]]
    with pytest.raises(TfpackError, match=r"Received: lengths=\[7\]"):
        pack_examples([{"input_ids": list(range(1, 8))}], max_length=6)
    with pytest.raises(TfpackError, match=r"Received: pack=\[0, 1\]"):
        pack_examples([{"input_ids": [1] * 4}] * 2, 6, packs=[[0, 1]])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=12),
       st.integers(1, 4))
def test_every_example_lands_once_with_restarting_positions(lengths, k):
    examples = [{"input_ids": np.full(n, i + 1)} for i, n in enumerate(lengths)]
    packed = pack_examples(examples, max_length=8, max_sequences_per_pack=k)
    seen = []
    for row in range(packed["input_ids"].shape[0]):
        ids, seq = packed["input_ids"][row], packed["sequence_ids"][row]
        pos = packed["position_ids"][row]
        assert np.all((seq == 0) == (ids == 0))
        for slot in np.unique(seq[seq > 0]):
            tokens = ids[seq == slot]
            assert len(set(tokens)) == 1
            seen.append(int(tokens[0]) - 1)
            np.testing.assert_array_equal(pos[seq == slot],
                                          np.arange(len(tokens)))
            assert packed["cls_positions"][row, slot - 1] == np.argmax(
                seq == slot)
        assert packed["sequence_mask"][row].sum() == len(np.unique(
            seq[seq > 0]))
    assert sorted(seen) == list(range(len(lengths)))
