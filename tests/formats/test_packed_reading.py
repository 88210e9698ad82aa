"""Reading packed outputs: metadata-time open, block checks in the reading pass, ranges."""

import json
import os

import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings, strategies as st

import tfpack
from tfpack.errors import TfpackError
from tfpack.formats import blocks

from packed_outputs import K, L, make_packs, write_output


def firsts(dataset):
    return [int(p["input_ids"][0]) - 1 for p in dataset.as_numpy_iterator()]


def test_packed_output_is_the_manifest_metadata(tmp_path):
    out = str(tmp_path / "out")
    write_output(out, [3, 0, 4], block_records=2)
    found = tfpack.formats.packed_output(out)
    assert found.directory == out and found.packs == 7
    assert found.shards == tuple((os.path.join(out, f"part-{i:05d}-of-00003.tfrecord"), n)
                                 for i, n in enumerate([3, 0, 4]))
    assert (found.max_length, found.max_sequences_per_pack) == (L, K)
    assert found.max_predictions_per_pack is None and found.batch_size is None
    assert found.features["input_ids"] == {"dtype": "int64", "shape": [L]}
    assert isinstance(found.generation, str) and len(found.generation) == 16
    assert found == tfpack.formats.records.packed_output(os.path.join(out, "part-*"))
    # Same sizes, other bytes: opening does not read the shards.
    shard = tmp_path / "out" / "part-00002-of-00003.tfrecord"
    shard.write_bytes(b"\0" * shard.stat().st_size)
    assert tfpack.formats.packed_output(out).packs == 7


def test_blocks_are_recorded_by_every_writer(tmp_path):
    tfpack.formats.write_packed([make_packs(5)], str(tmp_path))
    (shard,) = json.loads((tmp_path / "manifest.json").read_text())["shards"]
    assert shard["block_records"] >= 5 and len(shard["blocks"]) == 16
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / shard["name"]))]
    assert shard["blocks"] == blocks.digest_hex(records)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(sizes=st.lists(st.integers(0, 7), min_size=1, max_size=4).filter(lambda s: sum(s) > 0),
       block_records=st.integers(1, 4), data=st.data())
def test_a_range_yields_exactly_its_packs_in_order(tmp_path_factory, sizes, block_records,
                                                   data):
    out = str(tmp_path_factory.mktemp("out"))
    total = write_output(out, sizes, block_records)
    start = data.draw(st.integers(0, total))
    stop = data.draw(st.integers(start, total))
    assert firsts(tfpack.formats.read_packed(out, packs=(start, stop))) == list(range(start, stop))
    got = sorted(firsts(tfpack.formats.read_packed(out, packs=(start, stop),
                                                deterministic=False)))
    assert got == list(range(start, stop))


def test_a_range_reads_only_the_shards_that_hold_it(tmp_path):
    out = tmp_path / "out"
    write_output(str(out), [4, 4, 4], block_records=2)
    for i in (0, 2):  # same size, garbage: any read of them would fail its check
        shard = out / f"part-{i:05d}-of-00003.tfrecord"
        shard.write_bytes(b"\xff" * shard.stat().st_size)
    assert firsts(tfpack.formats.read_packed(str(out), packs=(4, 8))) == [4, 5, 6, 7]
    with pytest.raises(TfpackError, match=r"part-00002-of-00003\.tfrecord"):
        firsts(tfpack.formats.read_packed(str(out), packs=(5, 9)))


@pytest.mark.parametrize("packs", [(-1, 2), (0, 13), (3, 2), (0.0, 2), (0,), (True, 2), "0:2"])
def test_a_bad_range_is_refused(tmp_path, packs):
    write_output(str(tmp_path), [12], block_records=4)
    with pytest.raises(TfpackError, match=r"`packs` must be (\(start, stop\) with 0 <= start|"
                                          r"a pair of .* Received: packs=)"):
        tfpack.formats.read_packed(str(tmp_path), packs=packs)


@pytest.mark.parametrize("change", ["truncate", "drop last record", "append a record",
                                    "swap blocks", "remove"])
def test_a_shard_changed_after_opening_is_refused_before_its_bad_block(tmp_path, change):
    out = tmp_path / "out"
    write_output(str(out), [6, 6], block_records=2)
    shard = out / "part-00001-of-00002.tfrecord"
    dataset = tfpack.formats.read_packed(str(out))  # opened: the manifest is what it checks
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(shard))]
    data = shard.read_bytes()
    if change == "truncate":  # mid-record, in the last block
        shard.write_bytes(data[:-5])
        good = 10
    elif change == "drop last record":  # at a record boundary: counts catch it
        write_records(shard, records[:-1])
        good = 10
    elif change == "append a record":
        write_records(shard, records + records[:1])
        good = 12  # every listed pack is right; the extra one is refused
    elif change == "swap blocks":
        write_records(shard, records[2:4] + records[:2] + records[4:])
        good = 6
    else:
        shard.unlink()
        good = 6
    seen = []
    with pytest.raises(TfpackError, match=r"part-00001-of-00002\.tfrecord"):
        for pack in dataset.as_numpy_iterator():
            seen.append(int(pack["input_ids"][0]) - 1)
    assert seen == list(range(good))


def write_records(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def test_repeat_never_mixes_generations(tmp_path):
    # issue 22: `.repeat()` while the output is re-packed mixed 100 old and 202 new packs.
    tfpack.formats.write_packed([make_packs(5)], str(tmp_path))
    iterator = iter(tfpack.formats.read_packed(str(tmp_path)).repeat())
    epoch = [int(next(iterator)["input_ids"][0]) - 1 for _ in range(5)]
    assert epoch == [0, 1, 2, 3, 4]
    tfpack.formats.write_packed([make_packs(5, first=100)], str(tmp_path))  # a new generation
    # Blocks read ahead before the rewrite are whole blocks of the old generation;
    # the first block read after it fails its check. Never a new pack in between.
    later = []
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"TfpackError: Every block of a shard must hold the records"):
        for _ in range(50):
            later.append(int(next(iterator)["input_ids"][0]) - 1)
    assert set(later) <= set(epoch) and len(later) % 5 == 0
    # A new reader reads the new generation.
    assert firsts(tfpack.formats.read_packed(str(tmp_path))) == [100, 101, 102, 103, 104]


def test_an_output_without_block_digests_is_verified_whole_before_reading(tmp_path):
    out = tmp_path / "out"
    write_output(str(out), [3, 2], block_records=2)
    found = json.loads((out / "manifest.json").read_text())
    for shard in found["shards"]:  # as tfpack wrote it before block digests
        del shard["blocks"], shard["block_records"]
    del found["generation"]
    (out / "manifest.json").write_text(json.dumps(found))
    old = tfpack.formats.packed_output(str(out))
    assert old.generation is None and not old.checked_in_pass
    assert firsts(tfpack.formats.read_packed(str(out))) == [0, 1, 2, 3, 4]
    assert firsts(tfpack.formats.read_packed(str(out), packs=(1, 4))) == [1, 2, 3]
    shard = out / "part-00001-of-00002.tfrecord"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(TfpackError, match=r"part-00001-of-00002\.tfrecord' differs"):
        tfpack.formats.read_packed(str(out))
    assert firsts(tfpack.formats.read_packed(str(out), packs=(0, 3))) == [0, 1, 2]


def test_a_feature_dropped_from_the_manifest_is_refused_at_open(tmp_path):
    tfpack.formats.write_packed([make_packs(3)], str(tmp_path))
    found = json.loads((tmp_path / "manifest.json").read_text())
    del found["features"]["position_ids"]
    (tmp_path / "manifest.json").write_text(json.dumps(found))
    with pytest.raises(TfpackError, match=r"first record: position_ids is not in the manifest"):
        tfpack.formats.read_packed(str(tmp_path))
