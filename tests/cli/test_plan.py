import json
import re

import numpy as np
import pytest

from tfpack.packing import PackingPlan

from cli_helpers import tfpack


def test_plan_writes_a_plan_file_and_prints_a_summary(histogram_file, tmp_path, capsys):
    output = tmp_path / "plan.json"
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-sequences-per-pack", "none",
                  "--algorithm", "lpfhp", "--output", output) == 0
    out = capsys.readouterr().out
    assert "algorithm='lpfhp'" in out and "4 packs" in out and str(output) in out
    loaded = PackingPlan.load(output)
    assert loaded.max_sequences_per_pack is None and loaded.metrics["packs"] == 4
    assert loaded.histogram.tolist() == [0, 4, 0, 3, 0, 2, 0, 0]


def test_plan_json_prints_only_json(histogram_file, tmp_path, capsys):
    output = tmp_path / "plan.json"
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-sequences-per-pack", 2,
                  "--algorithm", "spfhp", "--output", output, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["output"] == str(output) and data["max_sequences_per_pack"] == 2
    assert data["metrics"]["packs"] == PackingPlan.load(output).metrics["packs"]


def test_plan_pads_a_shorter_histogram_and_reads_npy(tmp_path, capsys):
    source = tmp_path / "h.npy"
    np.save(source, np.array([0, 3, 1]))
    output = tmp_path / "plan.json"
    assert tfpack("plan", source, "--max-length", 5, "--max-sequences-per-pack", 3,
                  "--algorithm", "ffd", "--output", output, "--json") == 0
    assert PackingPlan.load(output).histogram.tolist() == [0, 3, 1, 0, 0]


def test_plan_of_bundled_histogram(tmp_path, capsys):
    output = tmp_path / "plan.json"
    assert tfpack("plan", "wikipedia_512", "--max-length", 512, "--max-sequences-per-pack", 3,
                  "--algorithm", "spfhp", "--output", output, "--json") == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert round(100 * metrics["efficiency"], 2) == 89.44


@pytest.mark.parametrize(
    "argv, pattern",
    [
        (["--max-length", 5], r"max_length=5, but 2 are longer. Received: sequences of length up to 6"),
        (["--max-length", 0], r"`--max-length` must be a positive integer. Received: --max-length=0"),
        (["--max-sequences-per-pack", 0], r"`--max-sequences-per-pack` must be a positive integer or 'none'. Received: --max-sequences-per-pack=0"),
        (["--max-sequences-per-pack", "lots"], r"Received: --max-sequences-per-pack=lots"),
        (["--algorithm", "magic"], r"`algorithm` must be one of .*Received: algorithm='magic'"),
    ],
)
def test_plan_bad_input_exits_2_with_a_message(histogram_file, tmp_path, capsys, argv, pattern):
    flags = {"--max-length": 8, "--max-sequences-per-pack": 3, "--algorithm": "spfhp", "--output": tmp_path / "p.json"}
    flags.update(dict(zip(argv[::2], argv[1::2])))
    assert tfpack("plan", histogram_file, *[x for item in flags.items() for x in item]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert re.search(pattern, captured.err), captured.err


@pytest.mark.parametrize(
    "content, pattern",
    [
        ("1\nx\n", r"line 2 .*'x'"),
        ("0\n0\n", r"dataset is empty"),
        ("1\n-1\n", r"non-negative"),
    ],
)
def test_plan_bad_histogram_file_exits_2(tmp_path, capsys, content, pattern):
    source = tmp_path / "bad.txt"
    source.write_text(content)
    assert tfpack("plan", source, "--max-length", 8, "--max-sequences-per-pack", 3, "--algorithm", "spfhp",
                  "--output", tmp_path / "p.json") == 2
    assert re.search(pattern, capsys.readouterr().err)


def test_plan_unknown_histogram_name(tmp_path, capsys):
    assert tfpack("plan", "wikipedia_999", "--max-length", 8, "--max-sequences-per-pack", 3, "--algorithm", "spfhp",
                  "--output", tmp_path / "p.json") == 2
    assert "bundled histograms ['wikipedia_512'" in capsys.readouterr().err


def test_plan_unwritable_output_exits_2(histogram_file, tmp_path, capsys):
    output = tmp_path / "missing" / "plan.json"
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-sequences-per-pack", 3, "--algorithm", "spfhp",
                  "--output", output) == 2
    assert re.search(r"--output must be a writable file. Received: --output=.*missing", capsys.readouterr().err)


def test_the_old_flag_name_is_an_alias(histogram_file, tmp_path):
    output = tmp_path / "plan.json"
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-per-pack", 2,
                  "--algorithm", "spfhp", "--output", output) == 0
    assert PackingPlan.load(output).max_sequences_per_pack == 2


@pytest.mark.parametrize("limit", ["none", "0.5", "0"])
def test_plan_time_limit_reaches_optimal(histogram_file, tmp_path, capsys, limit):
    output = tmp_path / "plan.json"
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-sequences-per-pack", 2,
                  "--algorithm", "optimal", "--output", output, "--json",
                  "--time-limit", limit) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["lower_bound_packs"] <= metrics["packs"]
    assert metrics["lower_bound_kind"] in ("tokens", "sequences", "long", "lp")


@pytest.mark.parametrize("limit", ["-1", "soon", "inf"])
def test_plan_refuses_a_bad_time_limit(histogram_file, tmp_path, capsys, limit):
    assert tfpack("plan", histogram_file, "--max-length", 8, "--max-sequences-per-pack", 2,
                  "--algorithm", "optimal", "--output", tmp_path / "p.json",
                  "--time-limit", limit) == 2
    assert f"--time-limit={limit}" in capsys.readouterr().err
