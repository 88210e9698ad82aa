"""Fault injection, ``kill -9`` at random points of ``tfpack export`` over an earlier export.

The export path (a symbolic link, as a deployment's ``current`` often is) holds a
SavedModel with files of the user's inside (``NOTES.md``, TensorFlow Serving's
``assets.extra/tf_serving_warmup_requests``) and beside it. Exports are killed
at random points (import, build, write, the swap); after each kill the path is
still the link, it holds a complete SavedModel (the old one or the new one,
never a half-written folder) that loads and serves, and every file of the
user's is exactly as it was. The next export succeeds and leaves nothing of
the killed ones behind. (``kill -9`` of ``tfpack pack``: tests/faults/test_cli.py.)
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tests.faults import outcomes
from tests.faults.campaign import KILL_SEED, kill_rounds
from tests.faults.inprocess import run_cli_here
from tfpack.export import paths

USERS = ("NOTES.md", "assets.extra", os.path.join("assets.extra", "tf_serving_warmup_requests"))


def _export(keras_file, out, length):
    return ("export", "--model", keras_file, "--output", out, "--max-length", length)


def _served_length(path):
    """The pack length the SavedModel at ``path`` serves (it loads, whole)."""
    loaded = tf.saved_model.load(str(path))
    return loaded.signatures["serving_default"].structured_input_signature[1][
        "input_ids"].shape[1]


def _wait_for(child, root, *, tracing):
    """Until ``child``'s staging folder (a killed one's may still be there) appears
    (``tracing``) or holds a file of the SavedModel (writing has begun)."""
    deadline = time.monotonic() + 180
    while child.poll() is None and time.monotonic() < deadline:
        for name in os.listdir(root):
            if f"-{child.pid}-" in name and (tracing or [
                    f for _, _, files in os.walk(root / name) for f in files
                    if not f.startswith(".tfpack")]):
                return
        time.sleep(0.005)


@pytest.mark.slow  # each round starts a process that imports TensorFlow (~5-10 s)
def test_kill_9_at_random_points_of_export_keeps_a_whole_saved_model_and_the_users_files(
        keras_file, tmp_path):
    rng = np.random.default_rng(KILL_SEED)
    (tmp_path / "real").mkdir()
    os.symlink("real", tmp_path / "served")
    out = tmp_path / "served"
    first = run_cli_here(*_export(keras_file, out, 8))
    assert first.returncode == 0, first.stderr
    (tmp_path / "NOTES-beside.md").write_text("mine, beside the export")
    (tmp_path / "real" / "NOTES.md").write_text("how to serve it")
    with tf.io.TFRecordWriter(str(tmp_path / "real" / USERS[2])) as writer:
        writer.write(b"a PredictionLog TensorFlow Serving replays")
    beside = outcomes.snapshot(tmp_path, skip=lambda rel: rel.startswith(("real", ".tfpack")))
    inside = outcomes.snapshot(tmp_path / "real", skip=lambda rel: rel not in USERS)
    users = [(tmp_path, beside), (tmp_path / "real", inside)]
    lengths = {8}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # One kill in CI, as the first file of the new SavedModel lands (each a process importing
    # TensorFlow and tracing, ~3 CPU s): the second round drew the write phase again,
    # 0.08 s later; tests/export/test_export_kill.py kills two exports at random moments of
    # the write and the swap. The long setting draws the other phases (`kill_rounds`).
    for round_ in range(kill_rounds(1)):
        length = 5 + round_ % 3
        lengths.add(length)
        child = subprocess.Popen([sys.executable, "-m", "tfpack.cli",
                                  *map(str, _export(keras_file, out, length))],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        # The first kill lands while the SavedModel is written or swapped in; the others
        # anywhere.
        phase = "write" if round_ == 0 else rng.choice(["import", "trace", "write"])
        if phase == "import":  # importing TensorFlow, loading the model
            delay = float(rng.uniform(0.5, 4.0))
        else:  # tracing into the staging folder, or writing, marking and swapping it
            _wait_for(child, tmp_path, tracing=phase == "trace")
            delay = 0.0 if round_ == 0 else float(rng.uniform(0.0, 3.0 if phase == "trace"
                                                              else 0.3))
        try:  # a child done sooner is not waited for
            child.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            pass
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        loss = outcomes.changed_files(tmp_path, beside) + outcomes.changed_files(
            tmp_path / "real", inside)
        assert not loss, (round_, loss)
        assert os.readlink(out) == "real", round_
        assert paths.is_tfpack_saved_model(str(out)), (round_, os.listdir(out))
        assert _served_length(out) in lengths, round_
    last = run_cli_here(*_export(keras_file, out, 8))
    verdict = outcomes.judge_cli(
        last, refuse=False, user_files=users,
        check=lambda r: _served_length(out) == 8 and os.readlink(out) == "real"
        and sorted(os.listdir(tmp_path)) == ["NOTES-beside.md", "real", "served"])
    assert verdict.outcome == outcomes.HELD, (verdict, os.listdir(tmp_path))


class _Killed(BaseException):
    """A ``kill -9`` between two file-system calls."""


@pytest.mark.parametrize("kind", ["old", "new"])
def test_a_kill_at_every_step_of_deleting_a_replaced_output_leaves_what_the_next_run_removes(
        tmp_path, monkeypatch, kind):
    """After the swap, the replaced output (under the hidden name the swap gave it) is
    deleted; a kill between any two of those deletions once left a folder no later run
    recognised as tfpack's (its files, and with them the proof, half gone). Every cut now
    leaves one `remove_leftovers` removes, and nothing else."""
    from tfpack.formats import outputs

    source = tmp_path / "in.tfrecord"
    with tf.io.TFRecordWriter(str(source)) as writer:
        for n in range(3, 15):
            writer.write(tfpack.formats.google_example(list(range(1, n + 1)), [0] * n, [1], [2], 0,
                                                    max_seq_length=16, max_predictions_per_seq=2))
    target = tmp_path / "out"  # an output of 12 shards, stats and plan: 15 files
    assert run_cli_here("pack", "--input", source, "--output", target, "--max-length", 16,
                        "--max-sequences-per-pack", 1, "--packs-per-shard", 1).returncode == 0
    os.remove(source)
    (tmp_path / "NOTES.md").write_text("mine")
    before = outcomes.snapshot(tmp_path)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    for step in range(100):
        replaced = tmp_path / f".tfpack-{kind}-out-{dead}-{step:016x}"
        shutil.copytree(target, replaced)  # what a swap put aside
        calls = []

        def cut(function):
            def call(*args, **kwargs):
                calls.append(function.__name__)
                if len(calls) > step:
                    raise _Killed
                return function(*args, **kwargs)
            return call

        with monkeypatch.context() as patch:
            for name in ("remove", "unlink", "rmdir", "replace"):
                patch.setattr(os, name, cut(getattr(os, name)))
            try:
                outputs.discard(str(replaced))
                finished = True
            except _Killed:
                finished = False
        outputs.remove_leftovers(str(target))  # what the next run does first
        assert outcomes.changed_files(tmp_path, before) == [], step
        assert sorted(os.listdir(tmp_path)) == ["NOTES.md", "out"], (step, calls)
        if finished:
            break
    assert finished and step > 3, step
