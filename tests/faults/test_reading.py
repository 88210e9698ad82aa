"""Fault injection, reading side: hostile manifests, damaged shards, re-packs mid-read, M = 0.

Every scenario of issue 22 "reads wrong data" about the manifest is here by
name (`NAMED`), plus random compositions of mutations (hypothesis). A scenario
holds when ``read_packed`` refuses with one `TfpackError` line, at open or
while reading, and every pack it released before refusing is a pack the
output really holds, in its place (`consume`). Random manifests: 25 examples
in CI, more in the longer setting (`tests.faults.campaign`, docs/faults.md).
"""

import copy
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, strategies as st

import tfpack
from tests.faults import outcomes
from tests.faults.campaign import campaign
from tests.faults.inprocess import run_cli_here
from tfpack.data.boundary import tfpack_message
from tfpack.errors import TfpackError
from tfpack.formats.records import serialize_packs

from packed_outputs import K, L, make_packs, write_output

SIZES = (5, 4)
TRUE = list(range(sum(SIZES)))  # pack i holds input_ids[0] == i + 1


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A two-shard output (blocks of 2 records) with a plan.json; and a secret outside it."""
    root = tmp_path_factory.mktemp("template")
    out = root / "out"
    out.mkdir()
    (out / "plan.json").write_text("{}")
    first = write_output(out, SIZES, block_records=2, files=("plan.json",))
    # A file outside the output that a `../` name would read: a valid shard.
    with tf.io.TFRecordWriter(str(root / "outside.tfrecord")) as writer:
        for record in serialize_packs(make_packs(3, first=500)):
            writer.write(record)
    return root


def copy_output(template, tmp_path):
    shutil.copytree(template, tmp_path / "t")
    return tmp_path / "t" / "out"


def consume(source, released, **options):
    """Read everything; record each released pack's index. `TfpackError` on refusal."""
    for pack in tfpack.formats.read_packed(str(source), **options).as_numpy_iterator():
        released.append(int(pack["input_ids"][0]) - 1)
    return released


def judge_read(out, released=None, **options):
    released = [] if released is None else released
    verdict = outcomes.judge_call(lambda: consume(out, released, **options), refuse=True)
    if verdict.outcome == outcomes.HELD and released != TRUE[:len(released)]:
        return outcomes.Verdict(outcomes.SILENT_WRONG,
                                f"released {released} before refusing: {verdict.evidence}")
    return verdict


def edit_manifest(out, change):
    path = out / "manifest.json"
    found = json.loads(path.read_text())
    found = change(found)
    path.write_text(json.dumps(found))


def _set(key, value):
    def change(m):
        m[key] = value
        return m
    return change


def _shard(i, key, value):
    def change(m):
        m["shards"][i][key] = value
        return m
    return change


def _feature(name, value):
    def change(m):
        if value is None:
            del m["features"][name]
        else:
            m["features"][name] = value
        return m
    return change


def _dup(m):
    m["shards"].append(copy.deepcopy(m["shards"][0]))
    m["packs"] += m["shards"][0]["records"]
    return m


def _counts(m):  # edited record counts that still add up
    m["shards"][0]["records"] += 1
    m["shards"][1]["records"] -= 1
    return m


def _digest(m):
    blocks_ = m["shards"][1]["blocks"]
    m["shards"][1]["blocks"] = blocks_[:-1] + ("0" if blocks_[-1] != "0" else "1")
    return m


def _outside(name):
    def change(m):
        m["shards"][0]["name"] = name
        return m
    return change


# Issue 22, "It reads or serves wrong data without a word", the manifest cases; and the
# foreign manifest.json shapes of "Errors that are not one line".
NAMED = {
    "a shard listed twice": _dup,
    "a ../ shard name": _outside("../outside.tfrecord"),
    "an absolute shard name": None,  # set in the test: needs the path
    "a shard name with a separator": _outside("sub/part-0.tfrecord"),
    "a hidden shard name": _outside(".tfpack-tmp-part"),
    "the manifest as a shard": _outside("manifest.json"),
    "edited record counts adding up": _counts,
    "an edited record count": _shard(1, "records", 3),
    "a negative record count": _shard(1, "records", -4),
    "a string record count": _shard(0, "records", "5"),
    "a boolean record count": _shard(0, "records", True),
    "an edited size": _shard(0, "bytes", 1),
    "an edited sha256": _shard(0, "sha256", "xyz"),
    "an edited block digest": _digest,
    "blocks of another size": _shard(0, "block_records", 3),
    "blocks without block_records": lambda m: (m["shards"][0].pop("block_records"), m)[1],
    "edited packs": _set("packs", 100),
    "a dropped feature": _feature("position_ids", None),
    "an added feature": _feature("labels", {"dtype": "int64", "shape": [K]}),
    "an edited shape": _feature("input_ids", {"dtype": "int64", "shape": [L + 2]}),
    "an edited dtype": _feature("sequence_mask", {"dtype": "int64", "shape": [K]}),
    "an unknown dtype": _feature("input_ids", {"dtype": "string", "shape": [L]}),
    "a negative shape": _feature("input_ids", {"dtype": "int64", "shape": [-1]}),
    "a feature as a list": _feature("input_ids", ["int64", [L]]),
    "features as a list": _set("features", ["input_ids"]),
    "an edited max_length": _set("max_length", L + 1),
    "an edited max_sequences_per_pack": _set("max_sequences_per_pack", 3),
    "a string max_length": _set("max_length", "6"),
    "another version": _set("version", 2),
    "another format": _set("format", "other"),
    "shards as an object": _set("shards", {"name": "part-00000-of-00002.tfrecord"}),
    "a shard as a string": lambda m: {**m, "shards": ["part-00000-of-00002.tfrecord"]},
    "missing keys": lambda m: {k: v for k, v in m.items() if k not in ("packs", "features")},
    "a shard without a name": lambda m: (m["shards"][0].pop("name"), m)[1],
    "files as a list": _set("files", ["plan.json"]),
    "a ../ file": _set("files", {"../outside.tfrecord": {"bytes": 1, "sha256": "0" * 64}}),
    "a JSON list": lambda m: [m],
    "a JSON string": lambda m: "tfpack-packed",
    "a JSON number": lambda m: 1,
    "JSON null": lambda m: None,
    "a generation with a newline": _set("generation", "abc\ndef"),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_hostile_manifest_is_refused_in_one_line(template, tmp_path, name):
    out = copy_output(template, tmp_path)
    change = NAMED[name] or _outside(str(tmp_path / "t" / "outside.tfrecord"))
    edit_manifest(out, change)
    verdict = judge_read(out)
    assert verdict.outcome == outcomes.HELD, verdict


def test_the_template_itself_reads(template, tmp_path):
    out = copy_output(template, tmp_path)
    assert consume(out, []) == TRUE


MUTATIONS = st.one_of(
    st.builds(lambda i, v: _shard(i, "records", v), st.integers(0, 1),
              st.one_of(st.integers(-3, 12).filter(lambda v: v not in SIZES),
                        st.floats(0, 9), st.text(max_size=3), st.none())),
    st.builds(lambda i, v: _shard(i, "bytes", v), st.integers(0, 1),
              st.one_of(st.integers(-5, 5), st.text(max_size=2), st.none())),
    st.builds(lambda i, k: (lambda m: (m["shards"][i].pop(k), m)[1]), st.integers(0, 1),
              st.sampled_from(["name", "records", "bytes", "sha256", "blocks",
                               "block_records"])),
    st.builds(lambda i, v: _shard(i, "name", v), st.integers(0, 1),
              st.sampled_from(["../x", "/etc/passwd", "a/b", "", ".", "..", "manifest.json",
                               "part-00001-of-00002.tfrecord", 7, None])),
    st.builds(lambda i, pos: _flip_digest(i, pos), st.integers(0, 1), st.integers(0, 47)),
    st.builds(lambda n, v: _feature(n, v), st.sampled_from(["input_ids", "sequence_ids",
                                                           "position_ids", "sequence_mask"]),
              st.one_of(st.none(), st.fixed_dictionaries({
                  "dtype": st.sampled_from(["int64", "float32", "int32", 3]),
                  "shape": st.lists(st.integers(-1, 9), max_size=2)}).filter(
                      lambda f: f != {"dtype": "int64", "shape": [L]}
                      and f != {"dtype": "float32", "shape": [K]}))),
    st.builds(lambda k, v: _set(k, v),
              st.sampled_from(["packs", "max_length", "max_sequences_per_pack", "version",
                               "format", "shards", "features"]),
              st.one_of(st.integers(-2, 20), st.text(max_size=3), st.none(),
                        st.lists(st.integers(), max_size=2))),
    st.just(_dup),
)


def _flip_digest(i, pos):
    def change(m):
        text = m["shards"][i]["blocks"]
        pos_ = pos % len(text)
        m["shards"][i]["blocks"] = text[:pos_] + ("f" if text[pos_] != "f" else "0") + \
            text[pos_ + 1:]
        return m
    return change


def _harmless(original, changed):
    """A mutation that left the manifest as it was (e.g. the same value set again)."""
    return original == changed


@campaign(25)
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=3))
def test_random_manifest_mutations_never_read_wrong_data(template, tmp_path_factory, mutations):
    out = copy_output(template, tmp_path_factory.mktemp("m"))
    original = json.loads((out / "manifest.json").read_text())
    found = copy.deepcopy(original)
    for mutate in mutations:
        try:
            found = mutate(found)
        except (KeyError, IndexError, TypeError, AttributeError, ZeroDivisionError):
            break  # an earlier mutation removed what this one edits: test what we have
    if _harmless(original, found):
        return
    (out / "manifest.json").write_text(json.dumps(found))
    released = []
    verdict = outcomes.judge_call(lambda: consume(out, released))
    if verdict.outcome == outcomes.HELD:  # accepted: it must be exactly the output
        assert released == TRUE, (found, released)
        return
    verdict = judge_read(out)
    assert verdict.outcome == outcomes.HELD, (verdict, found)


@campaign(25)
@given(shard=st.integers(0, 1), position=st.floats(0, 1), bits=st.integers(1, 255))
def test_a_flipped_byte_never_reaches_a_model(template, tmp_path_factory, shard, position,
                                              bits):
    out = copy_output(template, tmp_path_factory.mktemp("f"))
    path = out / f"part-{shard:05d}-of-00002.tfrecord"
    data = bytearray(path.read_bytes())
    data[min(int(position * len(data)), len(data) - 1)] ^= bits
    path.write_bytes(bytes(data))
    verdict = judge_read(out)
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.5, 0.99])
def test_a_truncated_shard_is_refused(template, tmp_path, keep):
    out = copy_output(template, tmp_path)
    path = out / "part-00001-of-00002.tfrecord"
    data = path.read_bytes()
    path.write_bytes(data[:int(keep * len(data))])
    verdict = judge_read(out)
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.parametrize("when", ["open", "mid-read"])
def test_a_shard_replaced_mid_read_is_refused_before_its_packs(template, tmp_path, when):
    out = copy_output(template, tmp_path)
    target = out / "part-00001-of-00002.tfrecord"
    other = tmp_path / "other.tfrecord"
    with tf.io.TFRecordWriter(str(other)) as writer:  # same size, other packs
        for record in serialize_packs(make_packs(4, first=100)):
            writer.write(record)
    assert other.stat().st_size == target.stat().st_size
    released = []

    def read():
        iterator = tfpack.formats.read_packed(str(out)).as_numpy_iterator()
        for pack in iterator:
            released.append(int(pack["input_ids"][0]) - 1)
            if len(released) == 1 and when == "mid-read":
                os.replace(other, target)  # a re-pack of one shard, renamed into place
        return released

    if when == "open":
        os.replace(other, target)
    verdict = outcomes.judge_call(read, refuse=True, match="part-00001-of-00002.tfrecord")
    assert verdict.outcome == outcomes.HELD, verdict
    assert released == TRUE[:len(released)] and len(released) <= SIZES[0]


def repeat_until_refused(source, between, epochs=4):
    """Read ``source`` with ``.repeat()``; call ``between()`` after the first epoch."""
    released = []
    iterator = iter(tfpack.formats.read_packed(str(source)).repeat())
    first = None
    try:
        for i in range(epochs * 400):
            pack = next(iterator)
            released.append(int(pack["input_ids"][0]))
            if first is None and i + 1 == between.epoch:
                between()
                first = len(released)
    except tf.errors.OpError as error:  # after `.repeat()`: TensorFlow's error, our line
        message = tfpack_message(error)
        if message is None:
            raise
        raise TfpackError(message) from None
    return released


def test_repack_between_epochs_of_repeat_never_mixes_generations(tmp_path):
    # issue 22: 100 old and 202 new packs in one stream.
    tfpack.formats.write_packed([make_packs(6)], str(tmp_path))
    old = set(range(1, 7))

    def repack():
        tfpack.formats.write_packed([make_packs(6, first=200)], str(tmp_path))
    repack.epoch = 6

    released = []

    def run():
        released.extend(repeat_until_refused(tmp_path, repack))
        return released

    verdict = outcomes.judge_call(run, refuse=True, match="Every block of a shard")
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.slow
def test_tfpack_pack_overwrite_while_a_reader_repeats(tmp_path):
    """The issue's scenario through the CLI: `tfpack pack --overwrite` between epochs."""
    inputs = tmp_path / "in.tfrecord"
    write_google(inputs, count=60, seed=0)
    out = tmp_path / "packed"
    args = ["pack", "--input", inputs, "--output", out, "--max-length", 16,
            "--max-sequences-per-pack", 3, "--packs-per-shard", 4]
    assert run_cli_here(*args).returncode == 0  # the CLI in this process: no TF import again
    first = sorted(json.loads((out / "manifest.json").read_text())["shards"],
                   key=lambda s: s["name"])
    write_google(inputs, count=90, seed=1)

    def repack():
        result = run_cli_here(*args, "--overwrite")
        assert result.returncode == 0, result.stderr
    repack.epoch = 1

    def run():
        return repeat_until_refused(out, repack)

    verdict = outcomes.judge_call(run, refuse=True)
    assert verdict.outcome == outcomes.HELD, verdict
    assert first != json.loads((out / "manifest.json").read_text())["shards"]


def write_google(path, count, seed):
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            n = int(rng.integers(3, 12))
            writer.write(tfpack.formats.records.google_example(
                [101] + rng.integers(5, 900, n - 2).tolist() + [102], [0] * n,
                [1], [int(rng.integers(5, 900))], int(rng.integers(0, 2)),
                max_seq_length=16, max_predictions_per_seq=2))


@pytest.mark.slow
def test_max_predictions_zero_packs_and_reads_end_to_end(tmp_path):
    """issue 22 "It crashes": records without predictions, `--max-predictions 0`."""
    inputs = tmp_path / "in.tfrecord"
    with tf.io.TFRecordWriter(str(inputs)) as writer:
        for i in range(20):
            n = 3 + i % 5
            writer.write(tfpack.formats.records.google_example(
                [101] + [7] * (n - 2) + [102], [0] * n, [], [], i % 2,
                max_seq_length=16, max_predictions_per_seq=0))
    out = tmp_path / "packed"
    argv = ["pack", "--input", str(inputs), "--output", str(out), "--max-length", "16",
            "--max-sequences-per-pack", "3", "--max-predictions", "0"]
    # One fresh process packs (the CLI, its streams captured as `run_cli_here` does) and
    # then reads: a segfault of either is observed, not suffered.
    code = ("import json; from tests.faults.inprocess import run_cli_here; "
            f"packed = run_cli_here(*{argv!r}); "
            "print(json.dumps([packed.returncode, packed.stdout, packed.stderr]), flush=True); "
            "assert packed.returncode == 0; import tfpack; "
            f"packs = list(tfpack.formats.read_packed({str(out)!r}).as_numpy_iterator()); "
            "print(len(packs), packs[0]['masked_lm_ids'].shape, "
            "sum(int((p['sequence_ids'] > 0).sum()) for p in packs))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    read = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2",
                                            "PYTHONPATH": os.pathsep.join(
                                                [root, os.environ.get("PYTHONPATH", "")])})
    assert read.returncode >= 0, (read.returncode, read.stderr[-2000:])  # no crash
    status, stdout, stderr = json.loads(read.stdout.split("\n")[0])
    packed = subprocess.CompletedProcess(["tfpack", *argv], status, stdout, stderr)
    assert outcomes.judge_cli(packed, refuse=False).outcome == outcomes.HELD, packed.stderr
    stats = json.loads((out / "stats.json").read_text())
    want = f"{stats['packs']} (0,) {stats['tokens']}"
    verdict = outcomes.judge_cli(read, refuse=False, check=lambda r: r.stdout.split("\n")[-2]
                                 == want)
    assert verdict.outcome == outcomes.HELD, (verdict, read.stdout)
