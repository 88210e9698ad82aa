"""Google BERT TFRecords in, packed TFRecords out, and failures naming the file."""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.errors import TfpackError

from google_records import google_examples, write_google
from packed_checks import assert_same_examples


def test_google_records_strip_padding(tmp_path):
    examples = google_examples(7)
    write_google(tmp_path / "a.tfrecord", examples[:4])
    write_google(tmp_path / "b.tfrecord", examples[4:])
    ds = tfpack.data.read_google_records(str(tmp_path / "*.tfrecord"))
    got = [{k: v.tolist() for k, v in x.items()} for x in ds.as_numpy_iterator()]
    assert got == examples  # files in sorted order, records in order, padding gone


def test_pack_google_records_then_write_and_read_packed(tmp_path):
    examples = google_examples(30, seed=1)
    write_google(tmp_path / "in.tfrecord", examples)
    packer = tfpack.data.pack(max_length=64, max_sequences_per_pack=3,
                              max_predictions_per_pack=12, algorithm="lpfhp")
    packs = tfpack.data.read_google_records(str(tmp_path / "in.tfrecord")).apply(packer)
    batches = [{k: v.numpy() for k, v in b.items()} for b in packs.batch(8)]
    # Into its own folder: beside the user's input it is refused (issue 22).
    written = tfpack.data.write_packed(batches, str(tmp_path / "out" / "packed.tfrecord"))
    assert written == packer.report.packs
    read = tfpack.data.read_packed(str(tmp_path / "out" / "packed*.tfrecord"))
    assert read.element_spec == packs.element_spec
    assert_same_examples(examples, read.as_numpy_iterator())


def test_no_matching_file_fails_naming_the_pattern(tmp_path):
    with pytest.raises(TfpackError, match=r"Received: input='.*nothing-\*'"):
        tfpack.data.read_google_records(str(tmp_path / "nothing-*"))


def test_unreadable_shard_fails_when_opened_naming_it(tmp_path):
    write_google(tmp_path / "a.tfrecord", google_examples(2))
    (tmp_path / "b.tfrecord").write_bytes(b"this is not a tfrecord file at all")
    with pytest.raises(TfpackError,
                       match=r"readable TFRecord file. Received: file='.*b\.tfrecord'"):
        tfpack.data.read_google_records(str(tmp_path / "*.tfrecord"))


def test_record_missing_a_feature_fails_naming_file_and_feature(tmp_path):
    example = tf.train.Example(features=tf.train.Features(feature={
        "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))}))
    with tf.io.TFRecordWriter(str(tmp_path / "x.tfrecord")) as writer:
        writer.write(example.SerializeToString())
    with pytest.raises(TfpackError, match=r"missing \[.*'input_mask'.*x\.tfrecord"):
        tfpack.data.read_google_records(str(tmp_path / "x.tfrecord"))


def test_records_of_other_widths_are_packed_whole(tmp_path):
    """A file's first record gives the widths parsed dense; records of other widths
    (another ``max_seq_length`` or ``max_predictions_per_seq``) take the general parser."""
    from tfpack.engines.local import pack_records
    from tfpack.formats import records

    examples = google_examples(20, seed=3, max_seq_length=16, max_predictions=3)
    with tf.io.TFRecordWriter(str(tmp_path / "in.tfrecord")) as writer:
        for i, e in enumerate(examples):  # widths 32/5 first, then 16/3 or 32/5
            wide = i == 0 or i % 3 == 1
            writer.write(tfpack.data.google_example(
                e["input_ids"], e["token_type_ids"], e["masked_lm_positions"],
                e["masked_lm_ids"], e["next_sentence_labels"],
                max_seq_length=32 if wide else 16, max_predictions_per_seq=5 if wide else 3))
    lengths, predictions = records.scan_google_records([str(tmp_path / "in.tfrecord")])
    assert lengths.tolist() == [len(e["input_ids"]) for e in examples]
    assert predictions.tolist() == [len(e["masked_lm_positions"]) for e in examples]
    pack_records(str(tmp_path / "in.tfrecord"), str(tmp_path / "out"), max_length=32,
                 max_sequences_per_pack=3, max_predictions_per_pack=9, packs_per_shard=4)
    assert_same_examples(examples, tfpack.data.read_packed(str(tmp_path / "out")).as_numpy_iterator())


def test_fast_encoder_writes_the_same_bytes_as_protobuf():
    from tfpack.formats.protos import encode_examples

    rng = np.random.default_rng(0)
    features = {"ids": rng.integers(-300, 2**40, size=(6, 7)), "small": rng.integers(0, 9, (6, 3)),
                "none": np.zeros((6, 0), np.int64), "w": rng.random((6, 4)).astype(np.float32),
                "wide": rng.integers(0, 2**64 - 1, (6, 2), dtype=np.uint64),
                "flags": rng.integers(0, 2, (6, 2)).astype(bool),
                "grid": rng.integers(-9, 9, (6, 2, 3)).astype(np.int32),
                "special": np.array([[np.nan, -np.inf, -0.0]] * 6, np.float32)}
    for i, record in enumerate(encode_examples(features)):
        expected = {n: tf.train.Feature(float_list=tf.train.FloatList(value=v[i].ravel().tolist()))
                    if v.dtype.kind == "f" else
                    tf.train.Feature(int64_list=tf.train.Int64List(
                        value=v[i].ravel().astype(np.int64).tolist()))
                    for n, v in features.items()}
        assert tf.train.Example.FromString(record) == tf.train.Example(
            features=tf.train.Features(feature=expected))
        # Byte for byte: protobuf's own encoding of each feature, in sorted name order.
        body = b"".join(tf.train.Features(feature={n: expected[n]}).SerializeToString()
                        for n in sorted(expected))
        assert record.endswith(body) and len(record) - len(body) <= 3
    assert encode_examples({"ids": np.zeros((0, 3), np.int64)}) == []


def test_write_packed_beside_other_files_is_refused_naming_them(tmp_path):
    packs = {"input_ids": np.array([[5, 6, 0]]), "sequence_ids": np.array([[1, 1, 0]]),
             "position_ids": np.array([[0, 1, 0]]), "sequence_mask": np.array([[1.0]], np.float32)}
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(TfpackError, match=r"`write_packed` writes into a directory that is "
                       r"missing, empty .*holding \['notes.txt'\]"):
        tfpack.data.write_packed([packs], str(tmp_path / "packed.tfrecord"))
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
