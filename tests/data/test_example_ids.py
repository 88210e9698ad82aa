"""`example_ids`: every pack knows where its sequences came from."""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.formats.records import google_example

from packed_checks import assert_example_ids, dataset_from_examples

EXAMPLES = [{"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}, {"input_ids": [3]},
            {"input_ids": [4, 4, 4, 4]}]


def _ids_by_tokens(packs):
    """``{tuple(tokens): example_id}`` of every real slot, and the empty slots' ids."""
    found, empty = {}, []
    for p in packs:
        for k, present in enumerate(p["sequence_mask"]):
            if present:
                tokens = p["input_ids"][p["sequence_ids"] == k + 1]
                found[tuple(tokens.tolist())] = int(p["example_ids"][k])
            else:
                empty.append(int(p["example_ids"][k]))
    return found, empty


@pytest.mark.parametrize("window", [None, 2])
def test_each_slot_names_its_input_index(window):
    # L=7, K=2; streaming windows [0, 1] and [2, 3]: ids are global, not per window.
    packs = list(dataset_from_examples(EXAMPLES).apply(tfpack.data.pack(
        max_length=7, max_sequences_per_pack=2, algorithm="ffd", window=window,
        shuffle=False)).as_numpy_iterator())
    found, empty = _ids_by_tokens(packs)
    assert found == {(5, 6, 7): 0, (8, 9): 1, (3,): 2, (4, 4, 4, 4): 3}
    assert set(empty) <= {-1}
    assert_example_ids(EXAMPLES, packs)
    assert packs[0]["example_ids"].dtype == np.int32


def test_flatten_rows_name_their_inputs():
    rows = list(dataset_from_examples(EXAMPLES[:3]).apply(
        tfpack.data.flatten(batch_size=2, token_budget=6)).as_numpy_iterator())
    assert [r["example_ids"].tolist() for r in rows] == [[0, 1], [2, -1]]


def test_reference_packer_writes_example_ids():
    packed = tfpack.testing.pack_examples(EXAMPLES, 7, packs=[[3, 2], [1, 0]],
                                          max_sequences_per_pack=3)
    assert packed["example_ids"].tolist() == [[3, 2, -1], [1, 0, -1]]


def test_outputs_without_example_ids_still_read(tmp_path):
    # What tfpack wrote before example_ids: the manifest lists the features it has.
    packs = {"input_ids": np.array([[5, 6, 7, 0]]), "sequence_ids": np.array([[1, 1, 2, 0]]),
             "position_ids": np.array([[0, 1, 0, 0]]), "cls_positions": np.array([[0, 2]]),
             "sequence_mask": np.array([[1.0, 1.0]], np.float32)}
    tfpack.formats.write_packed([packs], str(tmp_path))
    read = list(tfpack.formats.read_packed(str(tmp_path)).as_numpy_iterator())
    assert "example_ids" not in read[0] and read[0]["sequence_ids"].tolist() == [1, 1, 2, 0]


def test_tfpack_pack_ids_are_positions_across_input_files(tmp_path):
    # Two input files (3 and 2 records): ids 0-2 in the first, 3-4 in the second.
    lengths = [[4, 6, 3], [5, 2]]
    examples = []
    for f, file_lengths in enumerate(lengths):
        with tf.io.TFRecordWriter(str(tmp_path / f"in-{f}.tfrecord")) as writer:
            for n in file_lengths:
                ids = [len(examples) + 10] * n
                examples.append({"input_ids": ids})
                writer.write(google_example(ids, [0] * n, [1], [ids[0]], 0, max_seq_length=8,
                                            max_predictions_per_seq=2))
    from tfpack.engines.local import pack_records

    pack_records(str(tmp_path / "in-*.tfrecord"), str(tmp_path / "out"), max_length=8,
                 max_sequences_per_pack=2, algorithm="ffd", seed=1, packs_per_shard=1)
    packs = list(tfpack.formats.read_packed(str(tmp_path / "out")).as_numpy_iterator())
    found, _ = _ids_by_tokens(packs)
    assert found == {tuple(e["input_ids"]): i for i, e in enumerate(examples)}
    assert_example_ids(examples, packs)
