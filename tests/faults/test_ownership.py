"""Campaign: tfpack writes, replaces and deletes only what it can prove it wrote.

Every writer (``tfpack pack`` on both engines, `write_packed`, ``tfpack
export``, ``tfpack train``'s run and checkpoint directories), refused or not,
leaves every entry of the user's exactly as it was (`outcomes.snapshot` before,
checked after by the judge). Inputs rewritten between the packer's passes are
refused by content, whatever their record count. Property-based scenarios run
a few examples in CI (`tests.faults.campaign`; the longer setting: docs/faults.md).
"""

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import tfpack
import tfpack.beam
from tests.faults import outcomes
from tests.faults.campaign import campaign
from tests.faults.inprocess import run_cli_here
from tfpack.errors import TfpackError

L = 32


def _google(path, count, seed, longer=0):
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(count):
            n = int(rng.integers(5, L - 4)) + longer
            ids = rng.integers(1000, 2000, size=n).tolist()
            writer.write(tfpack.formats.google_example(
                ids, [0] * n, [1], [ids[1]], 0, max_seq_length=L, max_predictions_per_seq=4))


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("source")
    _google(folder / "in.tfrecord", 40, seed=0)
    return folder / "in.tfrecord"


def _pack(source, out, *extra):
    return run_cli_here("pack", "--input", source, "--output", out, "--max-length", L,
                        "--max-sequences-per-pack", 3, "--algorithm", "ffd", *extra)


def _packs(out):
    return len(list(tfpack.formats.read_packed(str(out)).as_numpy_iterator()))


def _dead_pid():
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)


def _siblings_clean(folder, *keep):
    """Nothing of tfpack's left beside the output (hidden staging or aside folders)."""
    return sorted(n for n in os.listdir(folder) if n.startswith(".tfpack")) == sorted(keep)


# --- pack ------------------------------------------------------------------------------------

@pytest.mark.parametrize("overwrite", [False, True])
def test_a_refused_pack_keeps_the_users_tfpack_named_files(source, tmp_path, overwrite):
    out = tmp_path / "out"
    (out / ".tfpack-buckets-mine").mkdir(parents=True)
    (out / ".tfpack-buckets-mine" / "data").write_text("mine")
    (out / ".tfpack-notes").write_text("mine")
    # Beside it, a name of tfpack's pattern of a dead process, but no owner record in it.
    unproven = tmp_path / f".tfpack-new-out-{_dead_pid()}-{'e' * 16}"
    unproven.mkdir()
    (unproven / "mine.txt").write_text("mine")
    users = [(out, outcomes.snapshot(out)), (unproven, outcomes.snapshot(unproven))]
    result = _pack(source, out, *(["--overwrite"] if overwrite else []))
    verdict = outcomes.judge_cli(result, refuse=True, user_files=users)
    assert verdict.outcome == outcomes.HELD, verdict


def test_write_packed_refuses_a_directory_holding_the_users_shard(tmp_path):
    (tmp_path / "part-00000-of-00001.tfrecord").write_bytes(b"the user's own records")
    (tmp_path / "NOTES.md").write_text("mine")
    packs = {"input_ids": np.array([[5, 6, 7, 0]]), "sequence_ids": np.array([[1, 1, 2, 0]]),
             "position_ids": np.array([[0, 1, 0, 0]]),
             "sequence_mask": np.array([[1.0, 1.0]], np.float32)}
    before = outcomes.snapshot(tmp_path)
    for path in (tmp_path, tmp_path / "part-00000-of-00001.tfrecord"):
        verdict = outcomes.judge_call(lambda: tfpack.formats.write_packed([packs], str(path)),
                                      refuse=True, user_files=(tmp_path, before))
        assert verdict.outcome == outcomes.HELD, verdict
    assert sorted(os.listdir(tmp_path)) == ["NOTES.md", "part-00000-of-00001.tfrecord"]
    # Into a fresh folder it writes; again into its own output it replaces it whole.
    fresh = tmp_path / "fresh"
    assert tfpack.formats.write_packed([packs], str(fresh / "p.tfrecord")) == 1
    assert tfpack.formats.write_packed([packs, packs], str(fresh / "p.tfrecord")) == 2
    assert _packs(fresh) == 2 and _siblings_clean(tmp_path)


def test_overwrite_through_a_symlink_replaces_the_target_and_keeps_the_link(source, tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "link")
    for extra in ((), ("--overwrite",)):
        verdict = outcomes.judge_cli(_pack(source, tmp_path / "link", *extra), refuse=False)
        assert verdict.outcome == outcomes.HELD, verdict
    assert os.readlink(tmp_path / "link") == "real"
    assert sorted(os.listdir(tmp_path)) == ["link", "real"]
    assert _packs(tmp_path / "real") > 0


FOREIGN_MANIFESTS = [
    {}, [], "text", {"format": "other-tool", "files": ["a"]},
    {"format": "tfpack-packed", "version": 1},
    {"format": "tfpack-packed", "version": 1, "shards": "x", "packs": 1, "sequences": 1,
     "max_length": 1, "max_sequences_per_pack": 1, "max_predictions_per_pack": None,
     "features": {}},
]


@pytest.mark.parametrize("content", FOREIGN_MANIFESTS, ids=range(len(FOREIGN_MANIFESTS)))
def test_overwrite_refuses_a_foreign_manifest(source, tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(content))
    before = outcomes.snapshot(out)
    verdict = outcomes.judge_cli(_pack(source, out, "--overwrite"), refuse=True,
                                 match="--overwrite replaces only", user_files=(out, before))
    assert verdict.outcome == outcomes.HELD, verdict


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


@campaign(6)
@given(key=st.sampled_from(["format", "version", "shards", "files", "packs", "features",
                            "max_length", "seed", "tokens", "created_by"]),
       value=st.one_of(st.just("<drop>"), JSON))
def test_overwrite_over_a_mutated_manifest_replaces_it_or_refuses_untouched(
        source, tmp_path_factory, key, value):
    out = tmp_path_factory.mktemp("mutated") / "out"
    assert _pack(source, out).returncode == 0
    found = json.loads((out / "manifest.json").read_text())
    if value == "<drop>":
        found.pop(key, None)
    else:
        found[key] = value
    (out / "manifest.json").write_text(json.dumps(found))
    before = outcomes.snapshot(out)
    result = _pack(source, out, "--overwrite", "--seed", 5)
    if result.returncode == 0:  # still a valid manifest of these files: replaced whole
        verdict = outcomes.judge_cli(result, refuse=False, check=lambda r: _packs(out) > 0)
    else:
        verdict = outcomes.judge_cli(result, refuse=True, user_files=(out, before))
    assert verdict.outcome == outcomes.HELD, (key, value, verdict)
    assert _siblings_clean(out.parent)


def test_overwrite_refuses_an_output_whose_shard_the_user_replaced(source, tmp_path):
    out = tmp_path / "out"
    assert _pack(source, out).returncode == 0
    shard = sorted(out.glob("part-*"))[0]
    shard.write_bytes(b"the user's records now")
    before = outcomes.snapshot(out)
    verdict = outcomes.judge_cli(_pack(source, out, "--overwrite"), refuse=True,
                                 user_files=(out, before))
    assert verdict.outcome == outcomes.HELD, verdict


# Random states of the output path before a write: what is there, and whether it may be
# replaced. Each must end refused in one line with everything as it was, or written.
STATES = ["missing", "empty", "file", "users", "tfpack", "tfpack+users", "link", "dangling",
          "readonly", "foreign-manifest", "file-parent"]


def _make_state(state, root, source):
    out = root / "out"
    if state == "empty":
        out.mkdir()
    elif state == "file":
        out.write_text("a file of the user's")
    elif state in ("users", "readonly"):
        out.mkdir()
        (out / "NOTES.md").write_text("mine")
    elif state in ("tfpack", "tfpack+users"):
        assert _pack(source, out).returncode == 0
        if state == "tfpack+users":
            (out / "NOTES.md").write_text("mine")
    elif state == "link":
        (root / "target").mkdir()
        os.symlink("target", out)
    elif state == "dangling":
        os.symlink("nowhere", out)
    elif state == "foreign-manifest":
        out.mkdir()
        (out / "manifest.json").write_text('{"format": "tfpack-packed"}')
    elif state == "file-parent":
        (root / "parent").write_text("a file")
        out = root / "parent" / "out"
    if state == "readonly":
        os.chmod(root, stat.S_IRUSR | stat.S_IXUSR)
    return out


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("state", STATES)
def test_every_directory_state_before_a_pack(source, tmp_path_factory, state, overwrite):
    root = tmp_path_factory.mktemp("state")
    out = _make_state(state, root, source)
    users = outcomes.snapshot(root, skip=lambda rel: state in ("tfpack",) and rel.startswith(
        "out"))
    result = _pack(source, out, *(["--overwrite"] if overwrite else []))
    os.chmod(root, stat.S_IRWXU)
    may_write = state in ("missing", "empty", "link", "dangling") or (
        state == "tfpack" and overwrite)
    if os.geteuid() == 0 and state == "readonly":
        may_write = False  # root writes anyway: only the refusal of a non-empty folder holds
    verdict = outcomes.judge_cli(
        result, refuse=not may_write, user_files=None if may_write and state != "link" else (
            root, {k: v for k, v in users.items() if not k.startswith("target")}),
        check=(lambda r: _packs(out) > 0) if may_write else None)
    assert verdict.outcome == outcomes.HELD, (state, overwrite, verdict)
    leftovers = [n for n in os.listdir(root) if n.startswith(".tfpack")]
    assert not leftovers, (state, leftovers)


# --- inputs that change between the packer's passes -------------------------------------------

def _rewrite_after_scan(monkeypatch, path, rewrite):
    from tfpack.formats import records

    scan = records.scan_google_records

    def scan_then_rewrite(files, **kwargs):
        found = scan(files, **kwargs)
        rewrite(path)
        return found

    monkeypatch.setattr(records, "scan_google_records", scan_then_rewrite)


def _same_count_other_records(path):
    _google(path, 40, seed=99)


def _longer_records(path):
    _google(path, 40, seed=0, longer=4)


@pytest.mark.parametrize("rewrite", [_same_count_other_records, _longer_records])
def test_inputs_rewritten_between_passes_are_refused(tmp_path, monkeypatch, rewrite):
    _google(tmp_path / "in.tfrecord", 40, seed=0)
    _rewrite_after_scan(monkeypatch, tmp_path / "in.tfrecord", rewrite)
    result = _pack(tmp_path / "in.tfrecord", tmp_path / "out")
    verdict = outcomes.judge_cli(result, refuse=True, match="must not change while they are packed",
                                 check=lambda r: not (tmp_path / "out").exists())
    assert verdict.outcome == outcomes.HELD, verdict
    assert sorted(os.listdir(tmp_path)) == ["in.tfrecord"]


def test_a_rewrite_that_keeps_size_and_time_is_caught_by_the_scans_lengths(tmp_path):
    from tfpack.engines.shards import ShardBuilder

    _google(tmp_path / "in.tfrecord", 6, seed=0)
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "in.tfrecord"))]
    scanned, _ = tfpack.formats.records.scan_google_records([str(tmp_path / "in.tfrecord")])
    builder = ShardBuilder(L, 3, 4)
    order, splits = np.arange(6), np.arange(7)  # one record a pack
    assert len(list(builder.packs(records, order, splits, lengths=scanned))) == 1
    stale = scanned.copy()
    stale[3] += 1  # as if record 3 had been rewritten with one token less since the scan
    verdict = outcomes.judge_call(lambda: list(builder.packs(records, order, splits,
                                                             lengths=stale)),
                                  refuse=True, match="must not change while they are packed")
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.slow
@pytest.mark.parametrize("rewrite", [_same_count_other_records, _longer_records])
def test_beam_refuses_inputs_rewritten_between_passes(tmp_path, monkeypatch, rewrite):
    from tfpack.engines.beam import steps

    _google(tmp_path / "in.tfrecord", 40, seed=0)
    scan = steps.scan_file

    def scan_then_rewrite(item, cache_dir=None):
        found = scan(item, cache_dir=cache_dir)
        rewrite(tmp_path / "in.tfrecord")
        return found

    monkeypatch.setattr(steps, "scan_file", scan_then_rewrite)
    verdict = outcomes.judge_call(
        lambda: tfpack.beam.pack_tfrecords(
            str(tmp_path / "in.tfrecord"), str(tmp_path / "out"), max_length=L,
            max_sequences_per_pack=3, algorithm="ffd",
            beam_options="--direct_running_mode=in_memory --direct_num_workers=1"),
        refuse=True, match="must not change while they are packed")
    assert verdict.outcome == outcomes.HELD, verdict
    assert sorted(os.listdir(tmp_path)) == ["in.tfrecord"]


# --- export -----------------------------------------------------------------------------------

def test_export_into_an_earlier_export_keeps_the_users_files(keras_file, tmp_path):
    out = tmp_path / "served"
    export = ("export", "--model", keras_file, "--output", out, "--max-length", 8)
    assert run_cli_here(*export).returncode == 0
    (out / "NOTES.md").write_text("how to serve it")
    warmup = out / "assets.extra" / "tf_serving_warmup_requests"
    with tf.io.TFRecordWriter(str(warmup)) as writer:
        writer.write(b"a PredictionLog TensorFlow Serving replays")
    users = outcomes.snapshot(out, skip=lambda rel: rel not in (
        "NOTES.md", "assets.extra", os.path.join("assets.extra", "tf_serving_warmup_requests")))

    def served_with_warmup(result):
        loaded = tf.saved_model.load(str(out))  # a real load of the new SavedModel
        replay = [r.numpy() for r in tf.data.TFRecordDataset(str(warmup))]
        return "serving_default" in loaded.signatures and replay == [
            b"a PredictionLog TensorFlow Serving replays"]

    verdict = outcomes.judge_cli(run_cli_here(*export), refuse=False, check=served_with_warmup,
                                 user_files=(out, users))
    assert verdict.outcome == outcomes.HELD, verdict
    assert sorted(os.listdir(tmp_path)) == ["served"]


def test_export_refuses_a_directory_of_the_users(keras_file, tmp_path):
    out = tmp_path / "served"
    out.mkdir()
    (out / "saved_model.pb").write_bytes(b"the user's own model")
    before = outcomes.snapshot(tmp_path)
    verdict = outcomes.judge_cli(
        run_cli_here("export", "--model", keras_file, "--output", out, "--max-length", 8),
        refuse=True, match="export path must be", user_files=(tmp_path, before))
    assert verdict.outcome == outcomes.HELD, verdict


# --- train runs and checkpoints ---------------------------------------------------------------

@pytest.mark.parametrize("users", ["log.jsonl", "train_config.json"])
def test_a_train_run_refuses_a_directory_holding_the_users_log(source, tmp_path, users):
    assert _pack(source, tmp_path / "packed").returncode == 0
    run = tmp_path / "run"
    run.mkdir()
    (run / users).write_text('{"step": 1, "mine": true}\n')
    before = outcomes.snapshot(run)
    verdict = outcomes.judge_cli(
        run_cli_here("train", "--input", tmp_path / "packed", "--output", run, "--steps", 1,
                     "--hidden", 8, "--layers", 1, "--heads", 2, "--intermediate", 16,
                     "--vocab-size", 2048, "--batch-size", 2, "--no-jit"),
        refuse=True, match="not written by tfpack" if users == "log.jsonl" else "tfpack did not",
        user_files=(run, before))
    assert verdict.outcome == outcomes.HELD, verdict


def test_checkpoints_delete_only_their_own_files(tmp_path):
    import keras

    from tfpack.training.checkpoint import Checkpointer

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / ".tmp-ckpt-notes").write_text("mine")  # a user's file of a temporary-like name
    (root / f".tmp-ckpt-1-{'a' * 8}").mkdir()  # the exact name, but a user's folder
    (root / f".tmp-ckpt-1-{'a' * 8}" / "mine.txt").write_text("mine")
    checkpointer = Checkpointer(str(root), model=model, max_to_keep=1)
    checkpointer.save(1)
    (root / "ckpt-1" / "NOTES.md").write_text("about step 1")
    users = outcomes.snapshot(root, skip=lambda rel: rel.startswith("ckpt-") and not rel.endswith(
        "NOTES.md") and rel != "ckpt-1")

    def saved_twice():
        checkpointer.save(2)
        Checkpointer(str(root), model=model)  # opening again cleans up its own leftovers
        return checkpointer.steps()

    verdict = outcomes.judge_call(saved_twice, check=lambda steps: steps == [2],
                                  user_files=(root, users))
    assert verdict.outcome == outcomes.HELD, verdict
    assert sorted(os.listdir(root / "ckpt-1")) == ["NOTES.md"]  # no longer a checkpoint
    with pytest.raises(TfpackError, match="holding files tfpack did not write"):
        checkpointer.save(1)
    assert (root / "ckpt-1" / "NOTES.md").read_text() == "about step 1"
