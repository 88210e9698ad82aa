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

from packed_checks import assert_same_examples  # noqa: E402
from google_records import google_examples, write_google  # noqa: E402


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


def test_bad_max_sequences_per_pack_is_a_usage_error():
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
    token = "0123456789abcdef"
    staging = tmp_path / f".tfpack-new-packed-{dead}-{token}"  # a killed run's, owner record in
    (staging / ".tfpack-buckets-x").mkdir(parents=True)
    (staging / "part-00000-of-00002.tfrecord").write_bytes(b"half")
    (staging / ".tfpack-owner.json").write_text(json.dumps({"pid": dead, "token": token}))
    other = tmp_path / f".tfpack-new-packed-2-{dead}-{token}"  # output 'packed-2': not ours
    other.mkdir()
    # The right name but no owner record with its token: not provably tfpack's, kept.
    unproven = tmp_path / f".tfpack-new-packed-{dead}-{'f' * 16}"
    (unproven / "mine.txt").parent.mkdir()
    (unproven / "mine.txt").write_text("mine")
    assert cli(capsys, "--input", pattern, "--output", out, "--max-length", "64",
               "--max-sequences-per-pack", "3")[0] == 0
    assert not staging.exists() and other.exists()
    assert (unproven / "mine.txt").read_text() == "mine"
    assert not [n for n in os.listdir(out) if n.startswith(".")]
    assert_same_examples(examples, tfpack.data.read_packed(str(out)).as_numpy_iterator())


def test_hidden_tfpack_named_files_inside_the_output_are_the_users(small, tmp_path, capsys):
    _, pattern = small
    out = tmp_path / "packed"
    (out / ".tfpack-buckets-y").mkdir(parents=True)
    (out / ".tfpack-tmp-1-ab-part-00000.tfrecord").write_bytes(b"mine")
    status, lines = cli(capsys, "--input", pattern, "--output", out, "--max-length", "64",
                        "--max-sequences-per-pack", "3")
    assert status == 2 and "must be empty or missing" in lines[0]
    assert sorted(os.listdir(out)) == [".tfpack-buckets-y", ".tfpack-tmp-1-ab-part-00000.tfrecord"]
    assert (out / ".tfpack-tmp-1-ab-part-00000.tfrecord").read_bytes() == b"mine"


def test_a_plan_deeper_than_max_sequences_per_pack_fails_before_anything_is_written(small, tmp_path,
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
    ("--max-length", "2000000000", r"`max_length` must be at most 1,048,576 tokens"),
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


def test_balance_flags_order_packs_into_even_batches(shards, tmp_path, capsys):
    examples, pattern = shards
    out = tmp_path / "packed"
    flags = ["--input", pattern, "--output", out, "--max-length", "64",
             "--max-sequences-per-pack", "3", "--algorithm", "lpfhp"]
    status, lines = cli(capsys, *flags, "--batch-size", "4", "--packs-per-shard", "10")
    assert status == 2 and len(lines) == 1 and "needs it" in lines[0]  # --batch-size alone
    capsys.readouterr()
    assert main(["pack", *map(str, flags), "--batch-size", "4", "--balance",
                 "--packs-per-shard", "10"]) == 0
    summary = capsys.readouterr().out
    stats = json.loads((out / "stats.json").read_text())
    balance = stats["balance"]
    assert balance["by"] == "sequences" and balance["batch_size"] == 4
    assert f"balanced sequences: {balance['low']}-{balance['high']} per batch of 4" in summary
    assert json.loads((out / "manifest.json").read_text())["batch_size"] == 4
    batches = list(tfpack.data.read_packed(str(out), batched=True).as_numpy_iterator())
    sequences = [int(b["sequence_mask"].sum()) for b in batches][:balance["batches"]]
    assert max(sequences) - min(sequences) <= 1 and balance["within_tolerance"]
    assert_same_examples(examples, [{k: v[i] for k, v in b.items()} for b in batches
                                    for i in range(len(b["input_ids"]))])
    plain = tmp_path / "plain"
    assert main(["pack", "--input", pattern, "--output", str(plain), *map(str, flags[4:])]) == 0
    with pytest.raises(TfpackError, match=r"`batched=True` needs an output packed for one "
                                          r"batch size"):
        tfpack.data.read_packed(str(plain), batched=True)


def test_a_new_engine_is_one_class_and_a_registration(shards, tmp_path, capsys, monkeypatch):
    # The seam between engines: `--engine` choices and an engine's own flags come
    # from the registry; the setup checks and the plan/stats/manifest wrap-up are shared.
    from tfpack import engines
    from tfpack.engines import base
    from tfpack.engines.local import LocalEngine

    monkeypatch.setattr(base, "_ENGINES", dict(base._ENGINES))
    built = []

    @base.register("recording")
    class Recording(LocalEngine):
        def __init__(self, *, note=None):
            super().__init__()
            self.note = note

        def build(self, job, staging):
            built.append((job.max_length, self.note))
            return super().build(job, staging)

        @classmethod
        def add_arguments(cls, parser):
            parser.add_argument("--note")

        @classmethod
        def options_from(cls, args):
            return {"note": args.note}

        @classmethod
        def flags_given(cls, args):
            return ["--note"] if args.note is not None else []

    assert engines.names() == ["local", "beam", "recording"]
    _, pattern = shards
    common = ["--input", pattern, "--max-length", "64", "--max-sequences-per-pack", "3",
              "--algorithm", "lpfhp", "--json"]
    assert run([*common, "--output", str(tmp_path / "local")]) == 0
    assert run([*common, "--output", str(tmp_path / "rec"), "--engine", "recording",
                "--note", "hi"]) == 0
    assert built == [(64, "hi")]
    manifest = json.loads((tmp_path / "rec" / "manifest.json").read_text())
    assert manifest["engine"] == "recording"
    assert manifest["created_by"] == "tfpack pack --engine recording"
    for name in manifest["shards"]:
        assert (tmp_path / "rec" / name["name"]).read_bytes() == \
            (tmp_path / "local" / name["name"]).read_bytes()
    with pytest.raises(TfpackError, match=r"`--note` needs `--engine recording`\. "
                                          r"Received: --engine local"):
        run([*common, "--output", str(tmp_path / "x"), "--note", "hi"])
    with pytest.raises(TfpackError, match=r"`engine` must be one of \['local', 'beam', "
                                          r"'recording'\]\. Received: engine='nope'"):
        engines.get("nope")
    assert not (tmp_path / "x").exists()
