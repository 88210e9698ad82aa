"""`tfpack pack`: Google TFRecord shards -> packed shards + plan.json + stats.json."""

import argparse
import json
import os
import sys

import numpy as np
import pytest

import tfpack
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
                "--max-per-pack", "3", "--algorithm", "lpfhp", "--packs-per-shard", "10",
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
                "--max-per-pack", "2", "--plan", str(tmp_path / "plan.json")]) == 0
    assert "efficiency" in capsys.readouterr().out
    stats = json.loads((tmp_path / "o" / "stats.json").read_text())
    assert stats["algorithm"] == "ffd" and stats["packs"] == plan.metrics["packs"]


def test_too_long_input_fails_naming_the_example(shards, tmp_path):
    _, pattern = shards
    with pytest.raises(TfpackError, match=r"max_length=16 .* Received: example \d+ with length="):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "16",
             "--max-per-pack", "3"])


def test_unreadable_shard_fails_naming_it(shards, tmp_path):
    _, pattern = shards
    (tmp_path / "wiki-9.tfrecord").write_bytes(b"\x00garbage")
    with pytest.raises(TfpackError, match=r"wiki-9\.tfrecord"):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "64",
             "--max-per-pack", "3"])


def test_bad_max_per_pack_is_a_usage_error():
    with pytest.raises(SystemExit):
        run(["--input", "x", "--output", "y", "--max-length", "8", "--max-per-pack", "0"])


def test_missing_plan_file_fails_naming_it(shards, tmp_path):
    _, pattern = shards
    with pytest.raises(TfpackError, match=r"nope\.json"):
        run(["--input", pattern, "--output", str(tmp_path / "o"), "--max-length", "64",
             "--max-per-pack", "3", "--plan", str(tmp_path / "nope.json")])
