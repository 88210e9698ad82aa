"""SFT examples: prompt/response pairs -> input_ids + loss_weights -> packs."""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.errors import TfpackError


def _lists(dataset):
    return [{k: v.numpy().tolist() for k, v in x.items()} for x in dataset]


def test_weights_train_response_targets_only():
    pairs = [([1, 2, 3], [7, 8]), ([4], [5, 6, 9]), ([10, 11], [12, 13, 14, 15, 16])]
    examples = _lists(tfpack.data.sft_examples(pairs, max_length=5))
    assert examples == [
        {"input_ids": [1, 2, 3, 7, 8], "loss_weights": [0.0, 0.0, 1.0, 1.0, 0.0]},
        {"input_ids": [4, 5, 6, 9], "loss_weights": [1.0, 1.0, 1.0, 0.0]},
        # Too long: the end of the response is cut.
        {"input_ids": [10, 11, 12, 13, 14], "loss_weights": [0.0, 1.0, 1.0, 1.0, 0.0]},
    ]


def test_hand_computed_packs():
    pairs = [([1, 2, 3], [7, 8]), ([4], [5, 6, 9]), ([10, 11], [12])]
    dataset = tfpack.data.sft_examples(pairs, max_length=8)
    assert tfpack.data.FeatureRoles.infer(dataset.element_spec).name == "sft"
    packs = _lists(dataset.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2,
                                                  algorithm="ffd")))
    by_first = {p["input_ids"][0]: p for p in packs}
    assert sorted(by_first) == [1, 4]
    # ffd: [1 2 3 7 8] (5) + [10 11 12] (3) = 8; [4 5 6 9] alone.
    assert by_first[1] == {
        "input_ids": [1, 2, 3, 7, 8, 10, 11, 12],
        "loss_weights": [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        "labels": [2, 3, 7, 8, -100, 11, 12, -100],
        "sequence_ids": [1, 1, 1, 1, 1, 2, 2, 2],
        "position_ids": [0, 1, 2, 3, 4, 0, 1, 2],
        "cls_positions": [0, 5], "sequence_mask": [1.0, 1.0],
        "example_ids": [0, 2]}
    assert by_first[4]["loss_weights"] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert by_first[4]["labels"] == [5, 6, 9, -100, -100, -100, -100, -100]
    spec = dataset.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2,
                                          algorithm="ffd")).element_spec
    assert spec["loss_weights"] == tf.TensorSpec([8], tf.float32)


def test_text_pairs_are_wordpiece_tokenized():
    (example,) = _lists(tfpack.data.sft_examples([("what is a cat", "an animal")],
                                                 max_length=16))
    vocab = tfpack.data.load_vocab()
    tokens = [vocab[i] for i in example["input_ids"]]
    assert tokens == ["[CLS]", "what", "is", "a", "cat", "[SEP]", "an", "animal", "[SEP]"]
    # Trained: the targets "an", "animal", "[SEP]" (predicted at positions 5..7).
    assert example["loss_weights"] == [0.0] * 5 + [1.0] * 3 + [0.0]


def test_errors_name_the_pair():
    with pytest.raises(TfpackError, match=r"leave room for its response in max_length=3. "
                                          r"Received: pair 1 with a prompt of 3 tokens"):
        tfpack.data.sft_examples([([1], [2]), ([1, 2, 3], [4])], max_length=3)
    with pytest.raises(TfpackError, match=r"Received: pair 0 with an empty response"):
        tfpack.data.sft_examples([([1], [])], max_length=3)
    with pytest.raises(TfpackError, match=r"Received: max_length=1"):
        tfpack.data.sft_examples([([1], [2])], max_length=1)
    with pytest.raises(TfpackError, match=r"list of \(prompt, response\)"):
        tfpack.data.sft_examples([([1], [2], [3])], max_length=4)
    ds = tf.data.Dataset.from_tensor_slices(
        {"input_ids": [[1, 2]], "loss_weights": [[1, 0]]})
    with pytest.raises(TfpackError, match=r"'loss_weights' must be a float tensor"):
        list(ds.apply(tfpack.data.pack(max_length=4, max_sequences_per_pack=2)))
    np.testing.assert_equal(tfpack.features.IGNORE_LABEL, -100)
