"""`tfpack pack`: Google TFRecord shards -> packed shards + plan.json + stats.json."""

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import tfpack
from tfpack.cli import main
from tfpack.cli import pack as pack_command
from tfpack.errors import TfpackError

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "data"))
from packed_checks import assert_same_examples  # noqa: E402
from test_records import google_examples, write_google  # noqa: E402


def run(argv):
    # Parser built from this module alone: the dispatcher imports every command.
    parser = argparse.ArgumentParser(prog="tfpack")
    pack_command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["pack", *argv])
    return args.run(args)


@pytest.fixture
def shards(tmp_path):
    examples = google_examples(90, seed=2)
    for i in range(3):
        write_google(tmp_path / f"wiki-{i}.tfrecord", examples[i * 30:(i + 1) * 30])
    return examples, str(tmp_path / "wiki-*.tfrecord")


def test_pack_writes_shards_plan_and_stats_and_loses_nothing(shards, tmp_path, capsys):
    examples, pattern = shards
    out = tmp_path / "packed"
    assert run(["--input", pattern, "--output", str(out), "--max-length", "64",
                "--max-sequences-per-pack", "3", "--algorithm", "lpfhp", "--packs-per-shard", "10",
                "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats == json.loads((out / "stats.json").read_text())
    assert stats["sequences"] == 90 and stats["input_files"] == 3
    assert len(stats["output_files"]) == -(-stats["packs"] // 10) > 1
    assert sorted(os.listdir(out)) == sorted(
        stats["output_files"] + ["manifest.json", "plan.json", "stats.json"])
    lengths = np.array([len(e["input_ids"]) for e in examples])
    assert stats["tokens"] == lengths.sum()
    assert stats["efficiency"] == pytest.approx(lengths.sum() / (64 * stats["packs"]))
    plan = tfpack.packing.PackingPlan.load(out / "plan.json")
    assert plan.metrics["packs"] == stats["packs"]
    packs = list(tfpack.data.read_packed(str(out)).as_numpy_iterator())
    assert len(packs) == stats["packs"]
    assert packs[0]["masked_lm_positions"].shape == (stats["max_predictions_per_pack"],)
    assert_same_examples(examples, packs)


def test_pack_with_a_plan_file(shards, tmp_path, capsys):
    examples, pattern = shards
    lengths = [len(e["input_ids"]) for e in examples]
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, 64), 64, 2, algorithm="ffd")
    plan.save(tmp_path / "plan.json")
    assert run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "64",
                "--max-sequences-per-pack", "2", "--plan", str(tmp_path / "plan.json")]) == 0
    assert "efficiency" in capsys.readouterr().out
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["algorithm"] == "ffd" and stats["packs"] == plan.metrics["packs"]


def test_too_long_input_fails_naming_the_example(shards, tmp_path):
    _, pattern = shards
    with pytest.raises(TfpackError, match=r"max_length=16 .* Received: example \d+ with length="):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "16",
             "--max-sequences-per-pack", "3"])


def test_unreadable_shard_fails_naming_it(shards, tmp_path):
    _, pattern = shards
    (tmp_path / "wiki-9.tfrecord").write_bytes(b"\x00garbage")
    with pytest.raises(TfpackError, match=r"wiki-9\.tfrecord"):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "64",
             "--max-sequences-per-pack", "3"])


def test_bad_max_per_pack_is_a_usage_error():
    with pytest.raises(SystemExit):
        run(["--input", "x", "--output", "y", "--max-length", "8", "--max-sequences-per-pack", "0"])


def test_missing_plan_file_fails_naming_it(shards, tmp_path):
    _, pattern = shards
    with pytest.raises(TfpackError, match=r"nope\.json"):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "64",
             "--max-sequences-per-pack", "3", "--plan", str(tmp_path / "nope.json")])


def cli(capsys, *argv):
    """`tfpack pack` through the real entry point: (exit status, stderr lines)."""
    capsys.readouterr()
    status = main(["pack", *map(str, argv)])
    return status, capsys.readouterr().err.strip().splitlines()


@pytest.fixture
def small(tmp_path):
    examples = google_examples(12, seed=5)
    write_google(tmp_path / "small-0.tfrecord", examples)
    return examples, str(tmp_path / "small-0.tfrecord")


def test_rerun_into_one_output_is_refused_and_overwrite_replaces_it_whole(small, tmp_path,
                                                                           capsys):
    examples, pattern = small
    out = tmp_path / "packed"
    flags = ["--input", pattern, "--output", out, "--max-length", "64", "--max-sequences-per-pack", "3",
             "--algorithm", "ffd"]
    assert cli(capsys, *flags, "--packs-per-shard", "2")[0] == 0
    first = sorted(os.listdir(out))
    assert len([n for n in first if n.startswith("part-")]) > 1
    status, lines = cli(capsys, *flags)
    assert status == 2 and len(lines) == 1
    assert re.search(r"`output` must be empty or missing \(pass --overwrite .*\)\. Received: "
                     r"output='.*packed' holding 'manifest.json'", lines[0])
    assert sorted(os.listdir(out)) == first
    assert cli(capsys, *flags, "--overwrite", "--packs-per-shard", "100")[0] == 0
    assert sorted(os.listdir(out)) == ["manifest.json", "part-00000-of-00001.tfrecord",
                                       "plan.json", "stats.json"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    for source in (out, out / "part-*.tfrecord"):
        assert_same_examples(examples, tfpack.data.read_packed(str(source)).as_numpy_iterator())


def test_overwrite_replaces_only_a_tfpack_output(small, tmp_path, capsys):
    _, pattern = small
    flags = ["--input", pattern, "--max-length", "64", "--max-sequences-per-pack", "3", "--overwrite"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    status, lines = cli(capsys, *flags, "--output", mine)
    assert status == 2 and len(lines) == 1
    assert re.search(r"--overwrite replaces only a previous tfpack output .*'notes.txt', "
                     r"no valid manifest.json", lines[0])
    out = tmp_path / "packed"
    assert cli(capsys, *flags, "--output", out)[0] == 0
    (out / "notes.txt").write_text("keep me too")
    status, lines = cli(capsys, *flags, "--output", out)
    assert status == 2 and re.search(r"also holding 'notes.txt', not written by tfpack", lines[0])
    assert (mine / "notes.txt").read_text() == "keep me"
    assert (out / "notes.txt").read_text() == "keep me too"
    tfpack.data.read_packed(str(out))  # still complete


def test_leftovers_of_killed_runs_are_removed_by_the_next_run(small, tmp_path, capsys):
    examples, pattern = small
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = int(child.stdout)  # a process that has exited
    out = tmp_path / "packed"
    staging = tmp_path / f".tfpack-new-packed-{dead}-0123abcd"
    (staging / ".tfpack-buckets-x").mkdir(parents=True)
    (staging / "part-00000-of-00002.tfrecord").write_bytes(b"half")
    other = tmp_path / f".tfpack-new-packed-2-{dead}-0123abcd"  # output 'packed-2': not ours
    other.mkdir()
    (out / ".tfpack-buckets-y").mkdir(parents=True)  # left by an older tfpack inside OUT
    (out / ".tfpack-tmp-1-ab-part-00000.tfrecord").write_bytes(b"half")
    assert cli(capsys, "--input", pattern, "--output", out, "--max-length", "64",
               "--max-sequences-per-pack", "3")[0] == 0
    assert not staging.exists() and other.exists()
    assert not [n for n in os.listdir(out) if n.startswith(".")]
    assert_same_examples(examples, tfpack.data.read_packed(str(out)).as_numpy_iterator())


def test_a_plan_deeper_than_max_per_pack_fails_before_anything_is_written(small, tmp_path,
                                                                            capsys):
    examples, pattern = small
    lengths = [len(e["input_ids"]) for e in examples]
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, 64), 64, 3, algorithm="ffd")
    assert plan.metrics["max_depth_used"] == 3
    plan.save(tmp_path / "plan.json")
    status, lines = cli(capsys, "--input", pattern, "--output", tmp_path / "o", "--max-length",
                        "64", "--max-sequences-per-pack", "2", "--plan", tmp_path / "plan.json")
    assert status == 2 and len(lines) == 1
    assert re.search(r"max_sequences_per_pack=2, plan depth=3$", lines[0])
    assert not (tmp_path / "o").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


@pytest.mark.parametrize("flag, value, match", [
    ("--max-length", "2000000000", r"`max_length` must be at most 1048576 tokens"),
    ("--max-predictions", "10000", r"`max_predictions_per_pack` must be at most max_length=64"),
])
def test_absurd_sizes_fail_fast(small, tmp_path, capsys, flag, value, match):
    _, pattern = small
    argv = {"--input": pattern, "--output": tmp_path / "o", "--max-length": "64",
            "--max-sequences-per-pack": "3", flag: value}
    started = time.perf_counter()
    status, lines = cli(capsys, *[x for kv in argv.items() for x in kv])
    assert status == 2 and len(lines) == 1 and re.search(match, lines[0])
    assert time.perf_counter() - started < 5 and not (tmp_path / "o").exists()
