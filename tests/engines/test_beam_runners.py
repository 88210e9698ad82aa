"""Any Beam runner: Beam's Dask runner on a real cluster, bad options, failures, duplicates."""

import filecmp
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfpack.engines.beam import steps
from tfpack.errors import TfpackError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from cli_helpers import tfpack  # noqa: E402
from google_records import google_examples, write_google  # noqa: E402

IN_PROCESS = "--direct_running_mode=in_memory"
DASK = "--runner=apache_beam.runners.dask.dask_runner.DaskRunner"
# Run by each Dask worker process as it starts (a `preload` script): the imports its tasks
# need (TensorFlow, Beam, tfpack's steps), with the garbage collector paused, then frozen,
# by the suite's site (tests/paused_imports.py).
WORKER_IMPORTS = "import apache_beam, tensorflow, tfpack.engines.beam.steps"


def _inputs(tmp_path, files=2, per_file=30):
    examples = google_examples(files * per_file, seed=4)
    for i in range(files):
        write_google(tmp_path / f"wiki-{i}.tfrecord", examples[i * per_file:(i + 1) * per_file])
    return str(tmp_path / "wiki-*.tfrecord")


def _pack(tmp_path, output, *extra):
    return tfpack("pack", "--input", _inputs(tmp_path), "--output", tmp_path / output,
                  "--max-length", "64", "--max-sequences-per-pack", "3", "--algorithm", "lpfhp",
                  "--packs-per-shard", "8", "--json", *extra)


def _one_line_refusal(tmp_path, capsys, *extra) -> str:
    status = _pack(tmp_path, "out", "--engine", "beam", *extra)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2 and captured.out == "" and len(lines) == 1, captured.err
    assert "Traceback" not in lines[0]
    assert not (tmp_path / "out").exists()  # nothing written, nothing left beside it
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tfpack")]
    return lines[0]


@pytest.mark.slow  # a Dask cluster of 2 worker processes, each importing TensorFlow: ~40-60 s
def test_dask_runner_on_a_two_worker_cluster_writes_the_local_bytes(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    assert _pack(tmp_path, "local") == 0
    local = json.loads(capsys.readouterr().out)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", preload=[WORKER_IMPORTS]) as cluster:
        status = _pack(tmp_path, "dask", "--engine", "beam",
                       f"--beam-options={DASK} --dask_client_address={cluster.scheduler_address}")
    out, err = capsys.readouterr()
    assert status == 0, err
    dask = json.loads(out)
    assert dask["engine"] == "beam" and local["engine"] == "local"
    names = local["output_files"]
    assert len(names) >= 3 and dask["output_files"] == names
    for name in names:  # same packs, same examples, same order: the same bytes
        assert filecmp.cmp(tmp_path / "local" / name, tmp_path / "dask" / name, shallow=False)
    assert sorted(os.listdir(tmp_path / "dask")) == sorted(names + ["manifest.json", "plan.json",
                                                                    "stats.json"])


def test_an_unknown_beam_option_is_refused_by_name(tmp_path, capsys):
    line = _one_line_refusal(tmp_path, capsys, "--beam-options=--direct_num_worker=8")
    assert line.endswith("Received: unknown option --direct_num_worker "
                         "(did you mean --direct_num_workers?)")


def test_a_runner_flag_typo_is_matched_against_flag_names(tmp_path, capsys):
    # The Dask runner stores --dask_client_address as `address`: the hint names the flag.
    line = _one_line_refusal(tmp_path, capsys, f"--beam-options={DASK} --dask_client_adress=x:1")
    assert line.endswith("Received: unknown option --dask_client_adress "
                         "(did you mean --dask_client_address?)")


def test_an_unknown_runner_is_one_line(tmp_path, capsys):
    line = _one_line_refusal(tmp_path, capsys, "--beam-options=--runner=NoSuchRunner")
    assert "`--runner` must name an installed Beam runner. Received: --runner=NoSuchRunner" in line


@pytest.mark.slow  # a fresh process importing TensorFlow and Beam: ~10 s
def test_a_refusal_in_a_fresh_process_is_one_stderr_line(tmp_path):
    """In a fresh process Beam's import logs "apitools not found" unless tfpack filters it."""
    result = subprocess.run(
        [sys.executable, "-m", "tfpack.cli", "pack", "--input", _inputs(tmp_path),
         "--output", str(tmp_path / "out"), "--max-length", "64",
         "--max-sequences-per-pack", "3", "--engine", "beam",
         "--beam-options=--direct_num_worker=8"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "tfpack pack: error: `beam_options` must be options of Beam or of its runner. "
        "Received: unknown option --direct_num_worker (did you mean --direct_num_workers?)"]


def test_a_failure_inside_the_runner_names_the_step(tmp_path, capsys, monkeypatch):
    def route_file(placed, limit, packs_per_shard):
        raise OSError("No space left on device")

    monkeypatch.setattr(steps, "route_file", route_file)
    line = _one_line_refusal(tmp_path, capsys, f"--beam-options={IN_PROCESS}")
    assert line == ("tfpack pack: error: The Beam pipeline failed in step 'route': "
                    "OSError: No space left on device")


def test_merges_keep_one_result_per_source_and_refuse_a_missing_one():
    # A runner may deliver an element twice (Beam's Dask runner replays a step's
    # outputs when it recomputes a side input): the merge must not count it twice.
    assert steps.unique_by([{"i": 1}, {"i": 0}, {"i": 1}], lambda s: s["i"], 2, "input files") \
        == [{"i": 0}, {"i": 1}]
    with pytest.raises(TfpackError, match=r"Received: 2 of 3 output shards, missing \[1\]"):
        steps.unique_by([{"i": 0}, {"i": 2}, {"i": 0}], lambda s: s["i"], 3, "output shards")
    part_a = (0, np.array([4, 5]), np.array([2, 1]), np.array([3, 0]))  # file, packs, sizes, preds
    part_b = (1, np.array([5, 6]), np.array([1, 1]), np.array([5, 9]))
    once = steps.shard_totals((0, [part_a, part_b]))
    assert once == (0, 2, 9, 6)  # shard, deepest pack, most predictions, its pack
    assert steps.shard_totals((0, [part_a, part_b, part_a, part_b, part_a])) == once
    # file, packs, slots, lengths, records, global example ids
    route_a = (0, np.array([1, 0]), np.array([0, 0]), np.array([3, 5]), [b"a0", b"a1"],
               np.array([0, 1]))
    route_b = (1, np.array([1]), np.array([1]), np.array([2]), [b"b0"], np.array([7]))
    records, splits, ids = steps.shard_layout([route_a, route_b])
    assert records == [b"a1", b"a0", b"b0"] and splits.tolist() == [0, 1, 3]
    assert ids.tolist() == [1, 0, 7]
    again = steps.shard_layout([route_b, route_a, route_a])
    assert again[0] == records and again[1].tolist() == splits.tolist()
    assert again[2].tolist() == ids.tolist()
