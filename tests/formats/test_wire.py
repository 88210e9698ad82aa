"""The compiled serializer (`tfpack.formats.protos` over `_wire`) against independent writers:
protobuf's own `SerializeToString` and TensorFlow's `TFRecordWriter`."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.formats.blocks import ShardWriter
from tfpack.formats.protos import Column, encode, encode_examples, frame


def _tf_records(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path.read_bytes()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=6))
def test_framing_is_the_bytes_tfrecordwriter_writes(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("frame") / "tf.tfrecord"
    assert frame(records) == _tf_records(path, records)


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=100))
def test_crc32c_is_the_same_on_both_paths(data):
    from tfpack.formats import _wire

    assert _wire.crc32c(data) == _wire.crc32c(data, True)
    assert _wire.crc32c(b"123456789") == _wire.crc32c(b"123456789", True) == 0xE3069283


def test_shard_writer_writes_tfrecordwriter_bytes_either_way(tmp_path):
    records = encode_examples({"ids": np.arange(40).reshape(8, 5), "w": np.ones((8, 2), "f4")})
    expected = _tf_records(tmp_path / "tf.tfrecord", records)
    with ShardWriter(str(tmp_path / "many.tfrecord"), block_bytes=200) as many:
        many.write_many(records[:3])
        many.write_many(records[3:])
    data, sizes = encode(*_dense({"ids": np.arange(40).reshape(8, 5),
                                  "w": np.ones((8, 2), "f4")}), framed=True)
    with ShardWriter(str(tmp_path / "framed.tfrecord"), block_bytes=200) as framed:
        framed.write_framed(data, sizes)
    assert (tmp_path / "many.tfrecord").read_bytes() == expected
    assert (tmp_path / "framed.tfrecord").read_bytes() == expected
    assert many.block_records == 3 and many.blocks == framed.blocks and len(many.blocks) == 16 * 3


def _dense(features):
    from tfpack.formats.protos import dense_columns

    return dense_columns(features)


def _expected(rows: dict) -> bytes:
    feature = {n: tf.train.Feature(float_list=tf.train.FloatList(value=v))
               if isinstance(v[0] if v else 0, float) and n.startswith("f")
               else tf.train.Feature(int64_list=tf.train.Int64List(value=v))
               for n, v in rows.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True)


def test_members_make_each_row_as_documented():
    # Two records: members (a, b) then (c); hand-computed rows below.
    values = np.array([5, 6, 7, 8, 9, 300], np.int32)
    splits = np.array([0, 2, 3])
    starts, runs = np.array([0, 3, 4]), np.array([3, 1, 2])
    columns = [
        Column("ids", 6, values=values, starts=starts, runs=runs),
        Column("pos", 6, ramp=True, runs=runs),
        Column("seq", 6, base=np.array([1, 2, 1]), runs=runs, padding=-1),
        Column("shift", 3, values=values, starts=starts, base=np.array([0, 10, 0])),
        Column("fone", 2, is_float=True, constant=1.0),
        Column("empty", 0, runs=np.zeros(3)),
    ]
    data, sizes = encode(splits, columns)
    assert sizes.tolist() == [len(data) - sizes[1], sizes[1]]
    first = {"empty": [], "fone": [1.0, 1.0], "ids": [5, 6, 7, 8, 0, 0],
             "pos": [0, 1, 2, 0, 0, 0], "seq": [1, 1, 1, 2, -1, -1], "shift": [5, 18, 0]}
    second = {"empty": [], "fone": [1.0, 0.0], "ids": [9, 300, 0, 0, 0, 0],
              "pos": [0, 1, 0, 0, 0, 0], "seq": [1, 1, -1, -1, -1, -1], "shift": [9, 0, 0]}
    assert data == _expected(first) + _expected(second)


def test_a_row_wider_than_its_width_or_a_read_outside_values_raises():
    with pytest.raises(ValueError, match="more values than its width"):
        encode(np.array([0, 2]), [Column("ids", 3, runs=np.array([2, 2]))])
    with pytest.raises(ValueError, match="outside its values"):
        encode(np.array([0, 1]), [Column("ids", 3, values=np.zeros(2, np.int32),
                                         starts=np.array([1]), runs=np.array([2]))])
    with pytest.raises(ValueError, match="non-decreasing"):
        encode(np.array([0, 2, 1]), [Column("ids", 3)])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_members_equal_protobuf_on_random_rows(data):
    records = data.draw(st.integers(0, 4))
    counts = data.draw(st.lists(st.integers(0, 3), min_size=records, max_size=records))
    members = sum(counts)
    width = data.draw(st.integers(0, 5))
    runs = np.array(data.draw(st.lists(st.integers(0, 2), min_size=members,
                                       max_size=members)), np.int64)
    ok = all(runs[sum(counts[:p]):sum(counts[:p + 1])].sum() <= width for p in range(records))
    values = np.array(data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=2 * members,
                                         max_size=2 * members)), np.int64)
    base = np.array(data.draw(st.lists(st.integers(-2**40, 2**40), min_size=members,
                                       max_size=members)), np.int64)
    starts = np.arange(members, dtype=np.int64) * 2
    pad = data.draw(st.integers(-5, 200))
    splits = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    column = Column("v", width, padding=pad, values=values, starts=starts, runs=runs, base=base,
                    ramp=True)
    if not ok:
        with pytest.raises(ValueError):
            encode(splits, [column])
        return
    expected = b""
    for p in range(records):
        row = []
        for m in range(splits[p], splits[p + 1]):
            row += [_wrap(int(values[starts[m] + i]) + int(base[m]) + i) for i in range(runs[m])]
        expected += _expected({"v": row + [pad] * (width - len(row))})
    assert encode(splits, [column])[0] == expected


def _wrap(value: int) -> int:
    """``value`` as int64 wraps it (two's complement)."""
    return (value + 2**63) % 2**64 - 2**63


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(1, 5), st.data())
def test_record_batches_read_what_tfrecordwriter_wrote_and_refuse_damage(
        tmp_path_factory, records, batch_size, data):
    from tfpack.formats import protos

    path = tmp_path_factory.mktemp("read") / "r.tfrecord"
    raw = _tf_records(path, records)
    protos._READ, read = data.draw(st.integers(1, 64)), protos._READ  # chunks cut records
    try:
        batches = list(protos.record_batches(str(path), batch_size))
        assert [r for b in batches for r in b] == records
        assert all(len(b) == batch_size for b in batches[:-1])
        if not raw:
            return
        at = data.draw(st.integers(0, len(raw) - 1))
        damage = data.draw(st.sampled_from(["flip", "cut"]))
        path.write_bytes(raw[:at] + bytes([raw[at] ^ 0x10]) + raw[at + 1:] if damage == "flip"
                         else raw[:at])
        got = []
        ends = np.cumsum([0] + [len(r) + 16 for r in records]).tolist()
        if damage == "cut" and at in ends:  # a shorter file of whole records: nothing wrong
            assert [r for b in protos.record_batches(str(path), batch_size)
                    for r in b] == records[:ends.index(at)]
            return
        with pytest.raises(protos.RecordError, match="corrupted|truncated") as error:
            for batch in protos.record_batches(str(path), batch_size):
                got += batch
        assert got == records[:len(got)] and error.value.records == len(got)
        # Named by where the bad record starts in the file, whatever chunk it was read in.
        assert str(error.value).endswith(f" at byte {ends[len(got)]}"), (error.value, ends)
    finally:
        protos._READ = read
