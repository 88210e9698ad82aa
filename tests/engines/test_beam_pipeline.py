"""The Beam engine writes what the local engine writes, and refuses what it refuses."""

import filecmp
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tfpack
import tfpack.beam
from tfpack.engines.local import pack_records
from tfpack.formats.records import google_example
from tfpack.errors import TfpackError

IN_PROCESS = "--direct_running_mode=in_memory"  # fast, for runs where workers do not matter
WORKER_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "beam_worker_site")


def _write(path, examples):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for e in examples:
            writer.write(google_example(
                e["input_ids"], e["token_type_ids"], e["masked_lm_positions"],
                e["masked_lm_ids"], e["next_sentence_labels"], max_seq_length=128,
                max_predictions_per_seq=20))


@pytest.fixture(scope="module")
def bert_files(tmp_path_factory):
    """~940 real BERT examples (stdlib text) in 4 uneven input files and an empty one.

    The engines must agree byte for byte whatever the input's size; the tests' shard sizes
    are set so that each output still has several shards (5-8) and files of 100 to ~550
    records. (2,800 examples of 400 documents before: ~3 CPU s more to build, and each
    engine's run packed three times as much.)"""
    folder = tmp_path_factory.mktemp("google")
    docs = tfpack.datasets.stdlib_documents(max_documents=100)
    examples = list(tfpack.builders.bert_pretraining_examples(docs, max_seq_length=128, seed=1)
                    .as_numpy_iterator())
    cuts = [0, 100, 370, 390, len(examples)]
    for f in range(4):
        _write(folder / f"in-{f}.tfrecord", examples[cuts[f]:cuts[f + 1]])
    _write(folder / "in-4.tfrecord", [])
    return str(folder / "in-*.tfrecord"), examples


def _outputs(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith("part-"))


@pytest.mark.slow  # two Beam worker processes each import TensorFlow: ~30-60 s on 2 cores
def test_beam_on_two_worker_processes_writes_the_local_shards(bert_files, tmp_path,
                                                               monkeypatch):
    pattern, examples = bert_files
    args = dict(max_length=128, max_sequences_per_pack=3, algorithm="lpfhp",
                packs_per_shard=100, seed=3)
    local = pack_records(pattern, str(tmp_path / "local"), **args)
    # The workers start with beam_worker_site/sitecustomize.py: their imports, GC paused.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([WORKER_SITE,
                                                      os.environ.get("PYTHONPATH", "")]))
    beam = tfpack.beam.pack_tfrecords(pattern, str(tmp_path / "beam"), **args)  # default runner
    names = _outputs(tmp_path / "local")
    assert len(names) >= 5 and names == _outputs(tmp_path / "beam") == local["output_files"]
    for name in names:  # same packs, same examples, same order: the same bytes
        assert filecmp.cmp(tmp_path / "local" / name, tmp_path / "beam" / name, shallow=False)
    assert {k: beam[k] for k in ("packs", "sequences", "tokens", "max_predictions_per_pack")} \
        == {k: local[k] for k in ("packs", "sequences", "tokens", "max_predictions_per_pack")}
    # Every example exactly once, read back (manifest checked) in shard order.
    packs = list(tfpack.formats.read_packed(str(tmp_path / "beam")).as_numpy_iterator())
    assert sum(int(p["sequence_mask"].sum()) for p in packs) == len(examples)
    assert sum(int((p["sequence_ids"] > 0).sum()) for p in packs) == \
        sum(len(e["input_ids"]) for e in examples)


def test_beam_follows_a_given_plan_unshuffled_like_local(bert_files, tmp_path):
    # A plan made for other lengths: surplus examples take unused longer slots or new packs.
    pattern, examples = bert_files
    lengths = np.array([len(e["input_ids"]) for e in examples])
    other = tfpack.packing.plan(tfpack.packing.histogram(lengths[::2], 128), 128, 2,
                                algorithm="spfhp")
    args = dict(max_length=128, max_sequences_per_pack=None, plan=other, packs_per_shard=230,
                seed=0, shuffle=False, max_predictions_per_pack=60)
    pack_records(pattern, str(tmp_path / "local"), **args)
    tfpack.beam.pack_tfrecords(pattern, str(tmp_path / "beam"), beam_options=IN_PROCESS, **args)
    names = _outputs(tmp_path / "local")
    assert len(names) >= 2 and names == _outputs(tmp_path / "beam")
    for name in names:
        assert filecmp.cmp(tmp_path / "local" / name, tmp_path / "beam" / name, shallow=False)
    # Each slot's example_ids is its record's position across the input files, in order.
    ids = {}
    for p in tfpack.formats.read_packed(str(tmp_path / "beam")).as_numpy_iterator():
        for k in np.flatnonzero(p["sequence_mask"]):
            ids[int(p["example_ids"][k])] = p["input_ids"][p["sequence_ids"] == k + 1].tolist()
    assert sorted(ids) == list(range(len(examples)))
    assert all(ids[i] == examples[i]["input_ids"].tolist() for i in range(len(examples)))


@pytest.mark.parametrize("corrupt", ["garbage", "too long"])
def test_beam_refuses_a_bad_record_as_local_does(bert_files, tmp_path, corrupt):
    pattern, examples = bert_files
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "a.tfrecord", examples[:40])
    records = [google_example(e["input_ids"], e["token_type_ids"], e["masked_lm_positions"],
                              e["masked_lm_ids"], e["next_sentence_labels"], max_seq_length=128,
                              max_predictions_per_seq=20) for e in examples[40:80]]
    records[5] = b"\x0a\x03not an example" if corrupt == "garbage" else records[5]
    with tf.io.TFRecordWriter(str(folder / "b.tfrecord")) as writer:
        for record in records:
            writer.write(record)
    max_length = 128 if corrupt == "garbage" else 64  # "too long": examples over L
    args = dict(max_length=max_length, max_sequences_per_pack=3, algorithm="ffd")
    with pytest.raises(TfpackError) as local:
        pack_records(str(folder / "*.tfrecord"), str(tmp_path / "local"), **args)
    with pytest.raises(TfpackError) as beam:
        tfpack.beam.pack_tfrecords(str(folder / "*.tfrecord"), str(tmp_path / "beam"),
                                   beam_options=IN_PROCESS, **args)
    if corrupt == "garbage":
        assert re.search(r"Received: file='.*b\.tfrecord', record 5", str(beam.value))
    else:
        too_long = sum(len(e["input_ids"]) > max_length for e in examples[:80])
        assert too_long > 1  # the fixture's real text has long examples
        assert re.search(rf"{too_long} do not .*Received: example 0 with length=",
                         str(beam.value))
    assert str(beam.value) == str(local.value)
    # No shard, no plan, nothing claiming completeness, no staging left behind.
    assert not (tmp_path / "beam").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tfpack")]


def test_beam_options_come_after_the_defaults():
    options = tfpack.beam.pipeline_options("--direct_num_workers=3 --job_name=x").get_all_options()
    assert options["runner"] == "DirectRunner"
    assert options["direct_running_mode"] == "multi_processing"
    assert options["direct_num_workers"] == 3
    with pytest.raises(TfpackError, match=r"--name=value options\. Received: 'oops'"):
        tfpack.beam.pipeline_options("oops")
    with pytest.raises(TfpackError, match=r"parse like a command line"):
        tfpack.beam.pipeline_options("--job_name='x")


def test_keys_are_output_shards_and_spread_every_length():
    # No hot key: records are keyed by output shard (pack id // packs_per_shard),
    # at most packs_per_shard packs per key, and one length reaches many keys.
    from tfpack.engines.beam import steps

    lengths = np.random.default_rng(0).integers(1, 33, size=3000)
    counts = tfpack.packing.histogram(lengths, 32)
    plan = tfpack.packing.plan(counts, 32, 3, algorithm="lpfhp")
    rule = tfpack.packing.placement(plan, counts, seed=1)
    pack, position = rule.place(lengths, tfpack.packing.length_ranks(lengths, 32))
    placed = steps.Placed(0, "f", lengths, np.ones_like(lengths), pack, position, 0)
    groups = dict(steps.pack_totals(placed, packs_per_shard=100))
    assert sorted(groups) == list(range(-(-rule.num_packs // 100)))
    for shard, (index, packs, sizes, _) in groups.items():
        assert index == 0  # the file: merges keep one part per file
        assert np.all(packs // 100 == shard) and len(packs) <= 100
    common = np.bincount(lengths).argmax()
    assert len(np.unique(pack[lengths == common] // 100)) == len(groups)


def test_balanced_packs_are_the_same_bytes_on_both_engines(bert_files, tmp_path):
    # The balanced order is a function of the plan, histogram and seed: Beam
    # workers, placing their files apart, agree with the local engine byte for byte.
    pattern, examples = bert_files
    args = dict(max_length=128, max_sequences_per_pack=3, algorithm="lpfhp",
                packs_per_shard=170, seed=2, batch_size=24, balance=True)
    local = pack_records(pattern, str(tmp_path / "local"), **args)
    beam = tfpack.beam.pack_tfrecords(pattern, str(tmp_path / "beam"), beam_options=IN_PROCESS,
                                      **args)
    names = _outputs(tmp_path / "local")
    assert len(names) >= 2 and names == _outputs(tmp_path / "beam")
    for name in names:
        assert filecmp.cmp(tmp_path / "local" / name, tmp_path / "beam" / name, shallow=False)
    assert local["balance"] == beam["balance"] and local["balance"]["within_tolerance"]
    # Shards of whole batches (170 -> 168 packs), read back batch by batch.
    shards = tfpack.formats.manifest.read_manifest(str(tmp_path / "beam"))["shards"]
    assert [s["records"] for s in shards[:-1]] == [168] * (len(shards) - 1)
    batches = list(tfpack.formats.read_packed(str(tmp_path / "beam"), batched=True)
                   .as_numpy_iterator())
    sequences = [int(b["sequence_mask"].sum()) for b in batches]
    full = sequences[:local["balance"]["batches"]]
    assert (min(full), max(full)) == (local["balance"]["low"], local["balance"]["high"])
    assert sum(sequences) == len(examples)
    assert all(len(b["input_ids"]) == 24 for b in batches[:-1])
