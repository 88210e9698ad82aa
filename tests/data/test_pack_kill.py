"""`kill -9` during `tfpack pack`: the old output or the new one, complete and exact, never a mix."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import tfpack
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


@pytest.mark.slow
def test_kill_9_at_random_points_leaves_an_old_or_new_output(tmp_path):
    sets = {}
    for name, seed in (("old", 11), ("new", 12)):
        examples = google_examples(60, seed=seed)
        write_google(tmp_path / f"{name}.tfrecord", examples)
        sets[name] = sorted(canonical(e) for e in examples)
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    started = time.perf_counter()
    subprocess.run(pack_command(tmp_path / "old.tfrecord", out), check=True,
                   capture_output=True)
    full = time.perf_counter() - started
    assert contents(out) == sets["old"]

    # Kill points spread over the run: imports, checking, planning, shards, the swap.
    delays = np.random.default_rng(0).uniform(0.3, 1.0, size=3) * full
    for i, delay in enumerate(delays):
        target, extra = (fresh, ()) if i == 0 else (out, ("--overwrite",))
        child = subprocess.Popen(pack_command(tmp_path / "new.tfrecord", target, *extra),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        child.kill()
        child.wait()
        if target == fresh:
            got = contents(fresh)
            assert got == sets["new"] or (isinstance(got, TfpackError) and not fresh.exists())
        else:
            assert contents(out) in (sets["old"], sets["new"]), delay

    # The next runs into the same directories clean up and complete.
    for target in (fresh, out):
        subprocess.run(pack_command(tmp_path / "new.tfrecord", target, "--overwrite"),
                       check=True, capture_output=True)
        assert contents(target) == sets["new"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    assert not [n for d in (out, fresh) for n in os.listdir(d) if n.startswith(".")]
