"""Campaign: the compiled paths of ``tfpack pack`` (the record reader, the scan, pass 2's encoder).

`tfpack pack` reads records with the compiled reader (`protos.record_batches`),
checks them with the compiled scan (`validation.google_scan`, TensorFlow for
the batches it leaves) and writes packs with the compiled encoder on two
threads (`tfpack.engines.local`). Off their path:

- a damaged input file (a flipped bit anywhere, a wrong data or length CRC,
  a file cut short) is one stderr line, exit 2, naming the file, the records
  before the bad one and the byte where it starts; nothing is written and the
  input is untouched; a file cut at a record boundary is a shorter valid file
  and packs exactly its records;
- pass 1's spill cut short before pass 2 reads it (positioned reads,
  `tfpack.engines.spill`) is one line naming the spill file, and no output;
- a record whose Example is damaged in a sound file (CRCs right) is one line
  naming it, or, still a valid example, packed with the others;
- records the compiled scan cannot decide (valid protobuf it does not read:
  unpacked repeated values, an unknown field) are left to TensorFlow and give
  the same shards, byte for byte, as the same examples in the usual encoding;
- ``kill -9`` while pass 2's encoder threads run leaves no shard under its
  final name and no manifest: a new output is absent, an old one is exactly as
  it was; the next run packs and leaves nothing of the killed one.
- ``kill -9`` while pass 1 writes its spill (a batch half written) leaves the same:
  no output (or the old one exactly), and the next run removes the spill with its staging.

(A second run into the same place, refused or replacing: tests/faults/test_ownership.py.)
"""

import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import tfpack
from tests.faults import outcomes
from tests.faults.campaign import KILL_SEED, campaign, kill_rounds
from tests.faults.damage import damaged
from tests.faults.inprocess import run_cli_here
from tfpack.formats import validation

L = 32


def _records(count, seed, length=L):
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(count):
        n = int(rng.integers(5, length - 4))
        ids = rng.integers(1000, 2000, size=n).tolist()
        m = int(rng.integers(1, 4))
        positions = sorted(rng.choice(np.arange(1, n), m, replace=False).tolist())
        records.append(tfpack.formats.google_example(
            ids, rng.integers(0, 2, n).tolist(), positions, [ids[p] for p in positions],
            int(rng.integers(0, 2)), max_seq_length=length, max_predictions_per_seq=4))
    return records


def _write(path, records):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def _pack_args(source, out, *extra):
    return ("pack", "--input", source, "--output", out, "--max-length", L,
            "--max-sequences-per-pack", 3, "--algorithm", "ffd", *extra)


def _example_ids(out):
    return sorted(i for pack in tfpack.formats.read_packed(str(out)).as_numpy_iterator()
                  for i in pack["example_ids"].tolist() if i >= 0)


# --- damaged input files ----------------------------------------------------------------------

RECORDS = _records(30, seed=3)


@campaign(8)
@given(damage=st.sampled_from(["flip", "cut", "data-crc", "length-crc"]), data=st.data())
def test_a_damaged_input_file_is_one_line_naming_where(tmp_path_factory, damage, data):
    root = tmp_path_factory.mktemp("damaged")
    raw = _write(root / "good.tfrecord", RECORDS).read_bytes()
    starts = np.cumsum([0] + [len(r) + 16 for r in RECORDS]).tolist()  # each record's frame
    if damage in ("data-crc", "length-crc"):
        i = data.draw(st.integers(0, len(RECORDS) - 1))
        at = starts[i + 1] - 1 - data.draw(st.integers(0, 3)) if damage == "data-crc" else \
            starts[i] + 8 + data.draw(st.integers(0, 3))
    else:
        at = data.draw(st.integers(0, len(raw) - 1))
    bad = raw[:at] + bytes([raw[at] ^ 1 << data.draw(st.integers(0, 7))]) + raw[at + 1:] \
        if damage != "cut" else raw[:at]
    (root / "in").mkdir()
    (root / "in" / "bad.tfrecord").write_bytes(bad)
    users = outcomes.snapshot(root / "in")
    result = run_cli_here(*_pack_args(root / "in" / "bad.tfrecord", root / "out"))
    before = sum(s <= at for s in starts[1:])  # whole records before the damaged byte
    if damage == "cut" and at in starts:  # a shorter file of whole records: nothing wrong
        verdict = outcomes.judge_cli(result, refuse=at == 0, user_files=(root / "in", users),
                                     check=lambda r: at == 0 or _example_ids(root / "out") == list(
                                         range(before)))
    else:  # the first record is read before the scan, by TensorFlow, in its own words
        where = "bad.tfrecord" if before == 0 else \
            f"after record {before} (RecordError: "
        verdict = outcomes.judge_cli(
            result, refuse=True, match="must be a readable TFRecord file",
            user_files=(root / "in", users),
            check=lambda r: where in r.stderr and (
                before == 0 or r.stderr.rstrip().endswith(f" at byte {starts[before]})"))
            and sorted(os.listdir(root)) == ["good.tfrecord", "in"])
    assert verdict.outcome == outcomes.HELD, (damage, at, verdict)


@campaign(10)
@given(data=st.data())
def test_a_damaged_record_in_a_sound_file_is_one_line_naming_it_or_packs(tmp_path_factory, data):
    """Bytes of one record's Example damaged, its frame's CRCs right: the compiled scan decides
    it or leaves it to TensorFlow; either way one line naming the record, or its examples
    packed, all of them."""
    root = tmp_path_factory.mktemp("damaged-record")
    records = list(RECORDS)
    i = data.draw(st.integers(1, len(records) - 1))  # record 0 is opened first, by TensorFlow
    records[i] = data.draw(damaged(records[i]))
    source = _write(root / "in.tfrecord", records)
    result = run_cli_here(*_pack_args(source, root / "out"))
    verdict = outcomes.judge_cli(
        result, refuse=result.returncode != 0,
        check=lambda r: (f"record {i}" in r.stderr or "records 0 to" in r.stderr)
        if r.returncode else _example_ids(root / "out") == list(range(len(records))))
    assert verdict.outcome == outcomes.HELD, (i, verdict)


# --- records the compiled scan leaves to TensorFlow -------------------------------------------

def _varint(value):
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _delimited(field, payload):
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _unpacked(record):
    """The same `tf.train.Example` with every repeated value unpacked (one key a value)."""
    example = tf.train.Example.FromString(record)
    entries = b""
    for name in sorted(example.features.feature):
        feature = example.features.feature[name]
        if feature.HasField("float_list"):
            values = b"".join(b"\x0d" + struct.pack("<f", v) for v in feature.float_list.value)
            value = _delimited(2, values)
        else:
            value = _delimited(3, b"".join(b"\x08" + _varint(v)
                                           for v in feature.int64_list.value))
        entries += _delimited(1, _delimited(1, name.encode()) + _delimited(2, value))
    return _delimited(1, entries)


def _unknown_field(record):
    """The same example with a field `tf.train.Example` does not have (number 2, a varint)."""
    return record + b"\x10\x01"


@campaign(4)
@given(seed=st.integers(0, 2**16), share=st.floats(0.05, 1.0),
       change=st.sampled_from([_unpacked, _unknown_field]))
def test_records_the_compiled_scan_leaves_to_tensorflow_pack_to_the_same_bytes(
        tmp_path_factory, seed, share, change):
    root = tmp_path_factory.mktemp("deferred")
    records = _records(40, seed)
    rng = np.random.default_rng(seed)
    chosen = rng.random(len(records)) < share
    chosen[rng.integers(len(records))] = True
    other = [change(r) if c else r for r, c in zip(records, chosen)]
    for record, original, changed in zip(other, records, chosen):
        # The same example, which the compiled scan leaves to TensorFlow.
        assert tf.train.Example.FromString(record).features == tf.train.Example.FromString(
            original).features
        assert (validation.google_scan([record]) is None) == changed
    usual = run_cli_here(*_pack_args(_write(root / "usual.tfrecord", records), root / "usual"))
    assert usual.returncode == 0, usual.stderr
    result = run_cli_here(*_pack_args(_write(root / "other.tfrecord", other), root / "other"))

    def same_shards(_):
        names = sorted(n for n in os.listdir(root / "usual") if n.startswith("part-"))
        return names == sorted(n for n in os.listdir(root / "other") if n.startswith("part-")) \
            and all((root / "usual" / n).read_bytes() == (root / "other" / n).read_bytes()
                    for n in names)

    verdict = outcomes.judge_cli(result, refuse=False, check=same_shards)
    assert verdict.outcome == outcomes.HELD, verdict


# --- a spill cut short between the passes ------------------------------------------------------

@campaign(6)
@given(kept=st.floats(0.0, 0.999))
def test_a_spill_cut_short_before_pass_2_is_one_line_and_no_output(tmp_path_factory, kept):
    """Pass 1's spill (`tfpack.engines.spill`, in the staging folder) cut short, as a full
    disk or a careless cleanup would, before pass 2 reads it back: one line naming the spill
    file, no output, nothing left in the staging folder, the input untouched."""
    from unittest import mock

    from tfpack.engines.spill import Spill

    root = tmp_path_factory.mktemp("cut-spill")
    (root / "in").mkdir()
    source = _write(root / "in" / "in.tfrecord", RECORDS)
    users = outcomes.snapshot(root / "in")
    reader = Spill.reader

    def cut_then_read(spill):
        path = os.path.join(spill.folder, "examples.values")
        os.truncate(path, int(os.path.getsize(path) * kept))
        return reader(spill)

    with mock.patch.object(Spill, "reader", cut_then_read):
        result = run_cli_here(*_pack_args(source, root / "out"))
    verdict = outcomes.judge_cli(
        result, refuse=True, match="examples.values", user_files=(root / "in", users),
        check=lambda r: sorted(os.listdir(root)) == ["in"])
    assert verdict.outcome == outcomes.HELD, (kept, verdict)


# --- kill -9 while pass 2's encoder threads run -----------------------------------------------

# The child: chunks of 4 packs (so the two encoder threads run throughout pass 2) and each
# chunk's write slowed, so that a kill lands in pass 2 and not after it.
_CHILD = """
import sys, time
import tfpack.engines.local as local
from tfpack.formats import blocks
local._CHUNK_TOKENS = 4 * {length}
write = blocks.ShardWriter.write_framed
blocks.ShardWriter.write_framed = lambda self, *a: (time.sleep(0.01), write(self, *a))[1]
from tfpack.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _in_pass_2(root):
    """Shards (partial or renamed) in a staging folder beside ``root/out``, no manifest yet."""
    names = [n for d in os.listdir(root) if d.startswith(".tfpack-") and
             os.path.isdir(root / d) for n in os.listdir(root / d)]
    return any("part-" in n for n in names) and not any("manifest" in n for n in names)


def _kill_setup(tmp_path, target):
    """The kill scenarios' start: an input, an output place (empty, or an earlier run's
    output), a user's file beside it; their random source, the user's files, the child's env."""
    source = _write(tmp_path / "in.tfrecord", _records(600, seed=5))
    out = tmp_path / "out"
    if target == "old":
        old = run_cli_here(*_pack_args(_write(tmp_path / "old.tfrecord", _records(50, seed=6)),
                                       out, "--packs-per-shard", 8))
        assert old.returncode == 0, old.stderr
    (tmp_path / "NOTES.md").write_text("mine")
    users = outcomes.snapshot(tmp_path, skip=lambda rel: rel.startswith(".tfpack"))
    return (np.random.default_rng(KILL_SEED), source, out, users,
            dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


@pytest.mark.slow  # each round starts a process that imports TensorFlow (~5-10 s)
@pytest.mark.parametrize("target", ["new", "old"])
def test_kill_9_in_pass_2_leaves_no_shard_under_its_name_and_no_manifest(tmp_path, target):
    rng, source, out, users, env = _kill_setup(tmp_path, target)
    for round_ in range(kill_rounds(2)):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD.format(length=L),
             *map(str, _pack_args(source, out, "--packs-per-shard", 16, "--seed", round_,
                                  "--overwrite"))],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 240
        while child.poll() is None and not _in_pass_2(tmp_path):
            assert time.monotonic() < deadline
            time.sleep(0.002)
        time.sleep(float(rng.uniform(0.0, 0.3)))  # pass 2 lasts >= 0.8 s (80 slowed chunks)
        assert child.poll() is None and _in_pass_2(tmp_path), (
            "the kill must land in pass 2", child.returncode, child.stderr.read()[-2000:])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        child.stderr.close()
        # The old output exactly as it was (or none), the user's files too; no shard and
        # no manifest of the killed run under a final name.
        assert not outcomes.changed_files(tmp_path, users), round_
        if target == "new":
            assert not out.exists(), (round_, os.listdir(out))
        assert not [n for n in os.listdir(tmp_path) if n.startswith("part-")]
    last = run_cli_here(*_pack_args(source, out, "--packs-per-shard", 16, "--overwrite"))
    verdict = outcomes.judge_cli(
        last, refuse=False, check=lambda r: _example_ids(out) == list(range(600))
        and sorted(os.listdir(tmp_path)) == sorted(["NOTES.md", "in.tfrecord", "out"] + (
            ["old.tfrecord"] if target == "old" else [])))
    assert verdict.outcome == outcomes.HELD, (verdict, os.listdir(tmp_path))


@pytest.mark.slow  # two processes that import TensorFlow, at once
def test_two_runs_into_one_place_at_once_leave_one_whole_output(tmp_path):
    """Both runs' encoders write at the same time; whichever swaps in last wins whole, the
    other succeeds first or is refused in one line: the output is one run's, never a mix."""
    sources = {300: _write(tmp_path / "a.tfrecord", _records(300, seed=7)),
               200: _write(tmp_path / "b.tfrecord", _records(200, seed=8))}
    out = tmp_path / "out"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    children = [subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(length=L),
         *map(str, _pack_args(source, out, "--packs-per-shard", 16, "--overwrite"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for source in sources.values()]
    results = []
    for child in children:
        stdout, stderr = child.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr))
    for result in results:
        verdict = outcomes.judge_cli(result, refuse=result.returncode != 0)
        assert verdict.outcome == outcomes.HELD, verdict
    assert any(r.returncode == 0 for r in results), [r.stderr for r in results]
    ids = _example_ids(out)
    assert ids in (list(range(300)), list(range(200))), len(ids)
    assert json.loads((out / "stats.json").read_text())["sequences"] == len(ids)
    shards = [s["name"] for s in json.loads((out / "manifest.json").read_text())["shards"]]
    assert sorted(os.listdir(out)) == sorted(shards + ["manifest.json", "plan.json",
                                                       "stats.json"])  # no file of the other
    assert sorted(os.listdir(tmp_path)) == ["a.tfrecord", "b.tfrecord", "out"]


# --- kill -9 while pass 1 writes its spill ----------------------------------------------------

# The child: batches of 64 records, so pass 1 spills in ten writes; at write {kill_at} it lands
# {prefix} bytes of the batch (what a writev cut by the kill leaves) and dies by SIGKILL.
_CHILD_PASS_1 = """
import os, signal, sys
import tfpack.formats.records as records
from tfpack.formats.compiled import wire
records._BATCH = 64
write, calls = wire.write_interleaved, [0]
def dying(fd, sources, runs):
    calls[0] += 1
    if calls[0] == {kill_at}:
        os.write(fd, b"".join(bytes(memoryview(s)) for s in sources)[:{prefix}])
        os.kill(os.getpid(), signal.SIGKILL)
    return write(fd, sources, runs)
wire.write_interleaved = dying
from tfpack.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # each case starts a process that imports TensorFlow (~5-10 s)
@pytest.mark.parametrize("target", ["new", "old"])
def test_kill_9_while_pass_1_spills_leaves_no_output_and_the_next_run_clean(tmp_path, target):
    """A kill while the spill is written (a batch half on disk, in the staging folder): no
    output under its name (or the old one exactly), the user's files kept; the next run packs
    everything and leaves no staging folder or spill behind."""
    rng, source, out, users, env = _kill_setup(tmp_path, target)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD_PASS_1.format(kill_at=int(rng.integers(1, 10)),
                                                   prefix=int(rng.integers(0, 4000)))]
        + list(map(str, _pack_args(source, out, "--overwrite"))),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=240)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    staging = [d for d in os.listdir(tmp_path) if d.startswith(".tfpack")]
    assert staging, "the kill must land while the spill is in its staging folder"
    assert not outcomes.changed_files(tmp_path, users)
    assert target == "old" or not out.exists()
    last = run_cli_here(*_pack_args(source, out, "--overwrite"))
    verdict = outcomes.judge_cli(
        last, refuse=False, check=lambda r: _example_ids(out) == list(range(600))
        and sorted(os.listdir(tmp_path)) == sorted(["NOTES.md", "in.tfrecord", "out"] + (
            ["old.tfrecord"] if target == "old" else [])))
    assert verdict.outcome == outcomes.HELD, (verdict, os.listdir(tmp_path))


# --- the spill on a full disk -----------------------------------------------------------------

def test_a_spill_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    """Pass 1's spill file on a full disk (its name bound to /dev/full: every write is
    ENOSPC, while the staging folder itself is writable): one line saying the output needs a
    file system with room, exit 2, no output and no staging folder; /dev/full untouched."""
    from unittest import mock

    from tfpack.engines.spill import Spill

    (tmp_path / "in").mkdir()
    source = _write(tmp_path / "in" / "in.tfrecord", RECORDS)
    users = outcomes.snapshot(tmp_path / "in")
    init = Spill.__init__

    def on_a_full_disk(spill, folder):
        init(spill, folder)
        os.symlink("/dev/full", os.path.join(folder, "examples.values"))

    with mock.patch.object(Spill, "__init__", on_a_full_disk):
        result = run_cli_here(*_pack_args(source, tmp_path / "out"))
    verdict = outcomes.judge_cli(
        result, refuse=True, match="file system with room", user_files=(tmp_path / "in", users),
        check=lambda r: sorted(os.listdir(tmp_path)) == ["in"] and os.path.exists("/dev/full"))
    assert verdict.outcome == outcomes.HELD, verdict
