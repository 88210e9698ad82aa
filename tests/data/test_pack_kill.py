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
from test_records import google_examples, write_google


def pack_command(source, out, *extra):
    return [sys.executable, "-m", "tfpack.cli", "pack", "--input", str(source), "--output",
            str(out), "--max-length", "64", "--max-per-pack", "3", "--algorithm", "ffd",
            "--packs-per-shard", "2", *extra]


def contents(out):
    """The examples in ``out`` as a sorted list, or the `TfpackError` refusing it."""
    try:
        packs = tfpack.data.read_packed(str(out)).as_numpy_iterator()
        return sorted(canonical(e) for e in unpack_all(packs))
    except TfpackError as error:
        return error


def staged(folder):
    """Complete shards (and manifest) in the hidden staging directories of ``folder``."""
    return [f for d in folder.glob(".tfpack-new-*") for f in d.glob("*")
            if f.name.startswith(("part-", "manifest"))]


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
    shards = len(json.loads((out / "manifest.json").read_text())["shards"])

    # Kill once the run has begun writing and a random number of shards is staged (0:
    # checking the input, routing; shards + 1: manifest written, the swap is next), then a
    # random moment later.
    rng = np.random.default_rng(0)
    for i in range(3):
        target, extra = (fresh, ()) if i == 0 else (out, ("--overwrite",))
        after = int(rng.integers(0, shards + 2))
        child = subprocess.Popen(pack_command(tmp_path / "new.tfrecord", target, *extra),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while child.poll() is None and not (list(tmp_path.glob(".tfpack-new-*"))
                                            and len(staged(tmp_path)) >= after):
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
