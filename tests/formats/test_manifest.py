"""Packed outputs prove they are complete: atomic shards, manifest last, checked on read."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.formats import manifest
from tfpack.errors import TfpackError


def packs(count, seed=0, L=8, K=2):
    """A batch of ``count`` one-sequence packs with distinct tokens."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, L + 1, size=count)
    seq = (np.arange(L)[None] < lengths[:, None]).astype(np.int64)
    return {"input_ids": seq * rng.integers(1, 1000, size=(count, L)), "sequence_ids": seq,
            "position_ids": seq * np.arange(L)[None],
            "sequence_mask": np.eye(K, dtype=np.float32)[np.zeros(count, int)]}


@pytest.fixture
def output(tmp_path):
    """A two-shard output written the way `tfpack pack` and Beam write them."""
    out = tmp_path / "out"
    out.mkdir()
    batches = [packs(3, seed=1), packs(2, seed=2)]
    names = []
    for i, batch in enumerate(batches):
        name = f"part-{i:05d}-of-00002.tfrecord"
        with manifest.atomic_path(str(out / name)) as tmp, tf.io.TFRecordWriter(tmp) as w:
            for record in tfpack.formats.records.serialize_packs(batch):
                w.write(record)
        names.append((name, len(batch["input_ids"])))
    (out / "plan.json").write_text("{}")
    manifest.write_manifest(
        str(out), names, features=tfpack.formats.records.packed_features(batches[0]),
        max_length=8, max_sequences_per_pack=2, max_predictions_per_pack=None,
        sequences=5, tokens=int(sum(b["sequence_ids"].sum() for b in batches)),
        files=["plan.json"], seed=0)
    return out, batches


def read_ids(source):
    return [p["input_ids"].tolist() for p in tfpack.data.read_packed(source).as_numpy_iterator()]


def test_manifest_lists_shards_with_counts_sizes_and_checksums(output):
    out, batches = output
    found = json.loads((out / "manifest.json").read_text())
    assert found["format"] == "tfpack-packed" and found["version"] == 1
    assert found["packs"] == 5 and found["sequences"] == 5
    assert [(s["name"], s["records"]) for s in found["shards"]] == [
        ("part-00000-of-00002.tfrecord", 3), ("part-00001-of-00002.tfrecord", 2)]
    shard = out / "part-00001-of-00002.tfrecord"
    assert found["shards"][1]["bytes"] == shard.stat().st_size
    assert found["shards"][1]["sha256"] == manifest.describe_file(str(shard))[1]
    assert found["features"]["input_ids"] == {"dtype": "int64", "shape": [8]}
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no temporaries left
    want = [row.tolist() for b in batches for row in b["input_ids"]]
    assert read_ids(str(out)) == want
    assert read_ids(str(out / "part-*.tfrecord")) == want


@pytest.mark.parametrize("damage, match", [
    (lambda out: (out / "manifest.json").unlink(), r"has no manifest\.json"),
    (lambda out: (out / "manifest.json").write_text('{"format": "tfpack-packed", "vers'),
     r"unreadable .*manifest\.json"),
    (lambda out: (out / "part-00001-of-00002.tfrecord").unlink(),
     r"part-00001-of-00002\.tfrecord' is missing"),
    (lambda out: truncate(out / "part-00000-of-00002.tfrecord"),
     r"part-00000-of-00002\.tfrecord' has \d+ bytes, the manifest \d+"),
    (lambda out: (out / "part-00000-of-00003.tfrecord").write_bytes(b"old run"),
     r"extra file\(s\) \['part-00000-of-00003\.tfrecord'\]"),
    (lambda out: (out / "plan.json").write_text('{"changed": 1}'), r"plan\.json' has"),
])
def test_damaged_output_is_refused_before_any_data(output, damage, match):
    out, _ = output
    damage(out)
    with pytest.raises(TfpackError, match=match):
        tfpack.data.read_packed(str(out))


@pytest.mark.parametrize("damage", ["flip", "replace"])
def test_a_damaged_shard_is_refused_as_it_is_read_before_its_packs(output, damage):
    # Sizes unchanged: opening costs metadata only, so the damage is found by the
    # block check as the shard is read; the packs of the good shard before it come
    # through, none of the bad one.
    out, batches = output
    shard = out / "part-00001-of-00002.tfrecord"
    if damage == "flip":
        flip_a_byte(shard)
    else:  # another shard of the same size: same shapes, other tokens
        with tf.io.TFRecordWriter(str(shard)) as w:
            other = packs(2, seed=2)
            other["input_ids"] = other["input_ids"] + 1
            for record in tfpack.formats.records.serialize_packs(other):
                w.write(record)
    seen = []
    with pytest.raises(TfpackError, match=r"part-00001-of-00002\.tfrecord"):
        for pack in tfpack.data.read_packed(str(out)).as_numpy_iterator():
            seen.append(pack["input_ids"].tolist())
    assert seen == batches[0]["input_ids"].tolist()
    with pytest.raises(TfpackError, match=r"part-00001-of-00002\.tfrecord' differs"):
        manifest.verify(str(out))  # the whole-output check still says which file


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_glob_must_match_exactly_the_listed_shards(output):
    out, _ = output
    with pytest.raises(TfpackError, match=r"without \['part-00001-of-00002\.tfrecord'\]"):
        tfpack.data.read_packed(str(out / "part-00000-*"))
    (out / "part-00009-of-00009.tfrecord").write_bytes(b"")
    with pytest.raises(TfpackError, match=r"extra file\(s\) \['part-00009-of-00009"):
        tfpack.data.read_packed(str(out / "part-*"))


def test_shards_without_a_manifest_are_refused(tmp_path):
    with tf.io.TFRecordWriter(str(tmp_path / "part-0.tfrecord")) as writer:
        for record in tfpack.formats.records.serialize_packs(packs(2)):
            writer.write(record)
    with pytest.raises(TfpackError, match=r"complete tfpack output.*has no manifest\.json"):
        tfpack.data.read_packed(str(tmp_path / "part-*"))


def test_write_packed_writes_a_checked_output_and_keeps_other_outputs(tmp_path):
    assert tfpack.data.write_packed([packs(3), packs(2, seed=1)], str(tmp_path / "a.tfrecord")) == 5
    assert len(read_ids(str(tmp_path))) == 5
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "manifest.json"]
    with pytest.raises(TfpackError, match=r"listing \['a\.tfrecord'\]"):
        tfpack.data.write_packed([packs(1)], str(tmp_path / "b.tfrecord"))
    assert not (tmp_path / "b.tfrecord").exists()
    with pytest.raises(TfpackError, match="same features and shapes"):
        tfpack.data.write_packed([packs(1), packs(1, L=9)], str(tmp_path / "a.tfrecord"))
    assert len(read_ids(str(tmp_path))) == 5  # the failed rewrite left the output as it was


def test_an_interrupted_shard_leaves_only_a_temporary(tmp_path):
    target = tmp_path / "part-0.tfrecord"
    with pytest.raises(RuntimeError):
        with manifest.atomic_path(str(target)) as tmp:
            open(tmp, "wb").write(b"half")
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []
