"""Fault injection, `tfpack train --input`: every spelling of a packed output reads its
stats.json, and no part of a comma-separated input is silently left out (issue 22)."""

import json
import os
import sys

import pytest

from tests.faults import outcomes

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "training"))

TINY = ["--vocab-size", "40", "--layers", "1", "--hidden", "16", "--heads", "2",
        "--intermediate", "32", "--batch-size", "4", "--accumulation-steps", "8",
        "--log-every", "1", "--checkpoint-every", "1", "--dropout", "0", "--no-jit"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """A packed output whose stats.json says packing factor 4.0."""
    from tfpack.data import write_packed
    from tinymodels import packed_examples

    directory = tmp_path_factory.mktemp("packed")
    write_packed([packed_examples(16, L=32, K=3, M=6, vocab=40)], str(directory))
    (directory / "stats.json").write_text(json.dumps({"packing_factor": 4.0}))
    return str(directory)


def _factor_is_four(result):
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    # 8 unpacked accumulation steps / packing factor 4 = 2.
    return summary["packing_factor"] == 4.0 and summary["accumulation_steps"] == 2


def test_directory_without_trailing_slash_reads_stats_json(packed, tmp_path):
    result = outcomes.run_cli("train", "--input", packed, "--output", tmp_path / "run",
                              "--steps", "1", *TINY)
    verdict = outcomes.judge_cli(result, refuse=False, check=_factor_is_four)
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.parametrize("spelling", ["{d}", "{d}/", "{d}/part-*", "{d}/*.tfrecord",
                                      " {d} "])
def test_every_spelling_reads_the_packing_factor(packed, spelling):
    from tfpack.cli.train import DEFAULTS, _dataset

    config = {**DEFAULTS, "input": spelling.format(d=packed)}
    verdict = outcomes.judge_call(lambda: _dataset(config)[1], check=lambda f: f == 4.0)
    assert verdict.outcome == outcomes.HELD, verdict


@pytest.mark.parametrize("extra", ["{d}/nothing-*.tfrecord", "/nonexistent/part-*", ""])
def test_a_comma_separated_part_matching_nothing_is_refused(packed, tmp_path, extra):
    pattern = f"{packed}/part-*,{extra.format(d=packed)}"
    result = outcomes.run_cli("train", "--input", pattern, "--output", tmp_path / "run",
                              "--steps", "1", *TINY)
    verdict = outcomes.judge_cli(result, refuse=True, match="matches nothing",
                                 check=lambda r: not (tmp_path / "run").exists())
    assert verdict.outcome == outcomes.HELD, verdict


def test_a_google_input_part_matching_nothing_is_refused(packed):
    from tfpack.cli.train import DEFAULTS, _dataset

    config = {**DEFAULTS, "input": f"{packed}/part-*,{packed}/missing-*",
              "input_format": "google"}
    verdict = outcomes.judge_call(lambda: _dataset(config), refuse=True,
                                  match="matches nothing")
    assert verdict.outcome == outcomes.HELD, verdict
