"""The local engine's one read: examples parsed by the scan give the bytes a second parse gave.

`tfpack pack --engine local` parses every record once (`scan_google_records`
with ``keep=``, into `tfpack.engines.spill.Spill`) and builds each shard from
what the scan kept (`Spill.reader`, `tfpack.engines.columns`); the Beam engine
parses each shard's records again (`ShardBuilder.write`). The kept values must
be the parsed ones, and both must write the same shard, byte for byte, on
padded (Google's layout), unpadded (one width per record) and mixed files.
"""

import numpy as np
import tensorflow as tf
from hypothesis import given, settings, strategies as st

from tfpack.engines.shards import ShardBuilder
from tfpack.engines.spill import Spill
from tfpack.formats import blocks
from tfpack.formats.protos import encode_examples
from tfpack.formats.records import google_example, parse_google_batch, scan_google_records

L, K, M, PRED = 16, 3, 8, 4


def _records(count, seed, layout):
    """Google records; ``layout``: padded to L, unpadded (own widths) or mixed."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(count):
        n = int(rng.integers(2, L + 1))
        m = int(rng.integers(0, min(PRED, n - 1) + 1))
        ids = rng.integers(1, 30000, n).tolist()
        positions = sorted(rng.choice(np.arange(1, n), m, replace=False).tolist())
        padded = layout == "padded" or (layout == "mixed" and i % 2)
        records.append(google_example(
            ids, rng.integers(0, 2, n).tolist(), positions, [ids[p] for p in positions],
            int(rng.integers(0, 2)), max_seq_length=L if padded else n,
            max_predictions_per_seq=PRED if padded else m))
    return records


def _scan(tmp_path, records):
    path = str(tmp_path / "in.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    spill = Spill(str(tmp_path))
    lengths, predictions = scan_google_records([path], keep=spill.append)
    spill.close()
    counts = {n: predictions if n.startswith("masked_lm") else lengths
              for n in ("input_ids", "token_type_ids", "masked_lm_positions", "masked_lm_ids",
                        "masked_lm_weights")}
    return spill, counts, {n: np.cumsum(c) - c for n, c in counts.items()}


def _values_of(reader, counts, offsets, members):
    """Each member's values, read from the spill: what pass 2 reads."""
    members = np.asarray(members, np.int64)
    read = reader.read({n: offsets[n][members] if n in counts else members for n in SPILLED},
                       {n: counts[n][members] for n in counts})
    return {name: [flat[where[j]:where[j] + counts[name][i]].tolist() if name in counts
                   else flat[where[j]].item() for j, i in enumerate(members)]
            for name, (flat, where) in read.items()}


def _whole(reader, counts, offsets, count):
    """Every feature's flat values, the whole spill read back (in memory)."""
    kept = _values_of(reader, counts, offsets, np.arange(count))
    dtypes = {n: flat.dtype for n, (flat, _) in reader.read(
        {n: np.zeros(0, np.int64) for n in SPILLED}, {}).items()}
    return {name: np.array(sum(v, []) if name in counts else v, dtypes[name])
            for name, v in kept.items()}


SPILLED = ("input_ids", "token_type_ids", "masked_lm_positions", "masked_lm_ids",
           "masked_lm_weights", "next_sentence_labels")


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), layout=st.sampled_from(["padded", "unpadded", "mixed"]),
       count=st.integers(1, 40))
def test_kept_examples_are_the_parsed_ones(tmp_path_factory, seed, layout, count):
    """The spill's values, sliced per example, are what a second parse gives."""
    tmp_path = tmp_path_factory.mktemp("one-read")
    records = _records(count, seed, layout)
    spill, counts, offsets = _scan(tmp_path, records)
    rng = np.random.default_rng(seed)
    members = rng.permutation(count)[:int(rng.integers(1, count + 1))]
    parsed = parse_google_batch(tf.constant([records[i] for i in members]))
    assert set(SPILLED) == set(parsed)
    with spill.reader() as reader:
        kept = _values_of(reader, counts, offsets, members)
        dtypes = {n: flat.dtype for n, (flat, _) in reader.read(
            {n: np.zeros(0, np.int64) for n in SPILLED}, {}).items()}
    for name, value in parsed.items():
        assert dtypes[name] == value.dtype.as_numpy_dtype, name
        expected = value.to_list() if isinstance(value, tf.RaggedTensor) else value.numpy().tolist()
        assert kept[name] == expected, name


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), layout=st.sampled_from(["padded", "unpadded", "mixed"]),
       count=st.integers(1, 40))
def test_columns_from_the_spill_write_the_bytes_assemble_writes(tmp_path_factory, seed, layout,
                                                                count):
    """The local engine's pass 2 (`pack_columns` + the compiled encoder, from the
    spill) against the Beam engine's (`ShardBuilder.write`: the records parsed
    again, `assemble`, `encode_examples`), packs of 0 to K examples."""
    from tfpack.engines.columns import pack_columns, starts_of
    from tfpack.formats.protos import encode

    tmp_path = tmp_path_factory.mktemp("columns")
    records = _records(count, seed, layout)
    spill, counts, offsets = _scan(tmp_path, records)
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    sizes = []  # examples a pack, K at most, empty packs too
    while sum(sizes) < count:
        sizes.append(min(int(rng.integers(0, K + 1)), count - sum(sizes)))
    splits = np.r_[0, np.cumsum(sizes)]
    builder = ShardBuilder(L * K, K, K * PRED)  # the Beam engine's: records parsed again
    info, features = builder.write(str(tmp_path / "assemble.tfrecord"), records, order, splits)
    per_example = {"tokens": counts["input_ids"], "predictions": counts["masked_lm_ids"]}
    shape = {"L": L * K, "K": K, "M": K * PRED}
    with spill.reader() as reader:  # as pass 2 reads it: only the members' runs
        columns = pack_columns(reader, per_example, members=order, splits=splits, sizes=shape)
        whole = _whole(reader, counts, offsets, count)
    data, record_sizes = encode(splits, columns, framed=True)
    assert data == (tmp_path / "assemble.tfrecord").read_bytes()
    assert encode(splits, pack_columns(whole, per_example, members=order, splits=splits,
                                       sizes=shape), framed=True)[0] == data
    assert len(record_sizes) == len(sizes) == info.records
    assert {c.name: ("float32" if c.is_float else "int64", [c.width])
            for c in columns} == features
    # As the engine calls it: chunks of packs, the starts computed once for all.
    starts, cut = starts_of(per_example), int(rng.integers(0, len(sizes) + 1))
    chunks = b""
    with spill.reader() as reader:
        for first, last in ((0, cut), (cut, len(sizes))):
            local = splits[first:last + 1] - splits[first]
            chunks += encode(local, pack_columns(
                reader, per_example, members=order[splits[first]:splits[last]],
                splits=local, sizes=shape, starts=starts), framed=True)[0]
    assert chunks == data


def test_block_digests_do_not_depend_on_how_records_are_handed_over(tmp_path):
    records = [bytes([i]) * (10 + i % 7) for i in range(23)]
    whole = blocks.ShardWriter(str(tmp_path / "a"), block_records=5)
    with whole:
        for i in range(0, 23, 4):  # batches that straddle block boundaries
            whole.write_many(records[i:i + 4])
    expected = "".join(blocks.digest_hex(records[i:i + 5]) for i in range(0, 23, 5))
    assert whole.blocks == expected and whole.records == 23
    one = blocks.ShardWriter(str(tmp_path / "b"), block_records=5)
    with one:
        for record in records:
            one.write(record)
    assert one.blocks == expected
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


@settings(max_examples=25)
@given(data=st.data())
def test_encoder_writes_protobufs_deterministic_bytes(data):
    rows = data.draw(st.integers(1, 4))
    features = {}
    for f in range(data.draw(st.integers(1, 4))):
        width = data.draw(st.integers(0, 5))
        if data.draw(st.booleans()):
            values = data.draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=rows * width,
                                        max_size=rows * width))
            features[f"i{f}"] = np.array(values, np.int64).reshape(rows, width)
        else:
            values = data.draw(st.lists(st.floats(width=32), min_size=rows * width,
                                        max_size=rows * width))
            features[f"f{f}"] = np.array(values, np.float32).reshape(rows, width)
    for i, record in enumerate(encode_examples(features)):
        expected = tf.train.Example(features=tf.train.Features(feature={
            n: tf.train.Feature(float_list=tf.train.FloatList(value=v[i].tolist()))
            if v.dtype.kind == "f" else
            tf.train.Feature(int64_list=tf.train.Int64List(value=v[i].tolist()))
            for n, v in features.items()}))
        assert record == expected.SerializeToString(deterministic=True)
