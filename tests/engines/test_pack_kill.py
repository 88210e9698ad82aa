"""`kill -9` during `tfpack pack`: the old output or the new one, complete and exact, never a mix."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tfpack
from tfpack.cli import main
from tfpack.errors import TfpackError

from packed_checks import canonical, unpack_all
from google_records import google_examples, write_google


def pack_command(source, out, *extra):
    return [sys.executable, "-m", "tfpack.cli", "pack", "--input", str(source), "--output",
            str(out), "--max-length", "64", "--max-sequences-per-pack", "3", "--algorithm", "ffd",
            "--packs-per-shard", "2", *extra]


def contents(out):
    """The examples in ``out`` as a sorted list, or the `TfpackError` refusing it."""
    try:
        packs = tfpack.formats.read_packed(str(out / "part-*.tfrecord")).as_numpy_iterator()
        return sorted(canonical(e) for e in unpack_all(packs))
    except TfpackError as error:
        return error


def written_since(folder, since):
    """Names of the entries a run started at ``since`` wrote under ``folder`` so far."""
    names = []
    try:
        for path in folder.rglob("*"):
            try:
                if path.stat().st_mtime >= since:
                    names.append(path.name)
            except FileNotFoundError:  # removed by the run meanwhile
                pass
    except FileNotFoundError:  # a directory renamed while listed: fewer names, poll again
        pass
    return names


def ready(folder, since, shards):
    """The run has begun writing and finished ``shards`` shards (+1: its manifest)."""
    names = written_since(folder, since)
    done = [n for n in names if n.startswith(("part-", "manifest"))]
    return bool(names) and len(done) >= shards


@pytest.mark.slow
def test_kill_9_at_random_points_leaves_an_old_or_new_output(tmp_path, capsys):
    sets = {}
    for name, seed in (("old", 11), ("new", 12)):
        examples = google_examples(60, seed=seed)
        write_google(tmp_path / f"{name}.tfrecord", examples)
        sets[name] = sorted(canonical(e) for e in examples)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    assert main(pack_command(tmp_path / "old.tfrecord", out)[3:]) == 0
    assert contents(out) == sets["old"]
    shards = len(json.loads((out / "stats.json").read_text())["output_files"])

    # Kill once the run has begun writing and finished a random number of shards (0:
    # checking the input, routing; shards + 1: manifest written, the swap is next), then a
    # random moment later: once into a new place, once over the old output (each kill a
    # process importing TensorFlow, ~2.3 CPU s; a third kill only drew another shard count
    # over the old output). tests/faults/test_cli.py and test_pack_compiled.py kill pack
    # at other points (any moment; pass 1's spill; pass 2's encoders).
    rng = np.random.default_rng(0)
    for i in range(2):
        target, extra = (fresh, ()) if i == 0 else (out, ("--overwrite",))
        after = int(rng.integers(1, shards) if target == fresh else rng.integers(0, shards + 2))
        since = time.time()
        child = subprocess.Popen(pack_command(tmp_path / "new.tfrecord", target, *extra),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while child.poll() is None and not ready(tmp_path, since, after):
            assert time.monotonic() < deadline
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        child.kill()
        child.wait()
        if target == fresh:
            got = contents(fresh)
            assert got == sets["new"] or (isinstance(got, TfpackError) and not fresh.exists())
        else:
            assert contents(out) in (sets["old"], sets["new"]), after

    # The next runs into the same directories clean up and complete.
    for target in (fresh, out):
        assert main(pack_command(tmp_path / "new.tfrecord", target, "--overwrite")[3:]) == 0
        assert contents(target) == sets["new"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert not [n for d in (out, fresh) for n in os.listdir(d) if n.startswith(".")]
