"""Fault injection, `tfpack train --input`: every spelling of a packed output reads its
stats.json, and no part of a comma-separated input is silently left out (issue 22).

The commands run in this process (`inprocess.run_cli_here`: the exit status and both
streams, judged as a separate process's; none of these can crash), not a fresh one that
imports TensorFlow again."""

import json
import os
import sys

import pytest

from tests.faults import outcomes
from tests.faults.inprocess import run_cli_here

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "training"))

TINY = ["--vocab-size", "40", "--layers", "1", "--hidden", "16", "--heads", "2",
        "--intermediate", "32", "--batch-size", "4", "--accumulation-steps", "8",
        "--log-every", "1", "--checkpoint-every", "1", "--dropout", "0", "--no-jit"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """A packed output whose stats.json says packing factor 4.0."""
    from tfpack.formats import write_packed
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
    result = run_cli_here("train", "--input", packed, "--output", tmp_path / "run",
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
    result = run_cli_here("train", "--input", pattern, "--output", tmp_path / "run",
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


@pytest.mark.parametrize("damage", ["not-an-output", "truncated-shard", "extra-shard"])
def test_trainer_on_a_damaged_or_foreign_directory_is_refused(packed, tmp_path, damage):
    """`Trainer.fit(directory)` opens the output's manifest first: a directory tfpack did not
    write, a shard of another size or an unlisted shard is one `TfpackError` line."""
    import shutil

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer

    directory = tmp_path / "out"
    shutil.copytree(packed, directory)
    shard = next(directory.glob("part-*"))
    if damage == "not-an-output":
        (directory / "manifest.json").unlink()
    elif damage == "truncated-shard":
        shard.write_bytes(shard.read_bytes()[:-7])
    else:
        shutil.copy(shard, directory / "part-00009-of-00010.tfrecord")
    before = outcomes.snapshot(directory)
    trainer = Trainer(TinyPretrainer(max_length=32, max_predictions_per_pack=6, vocab_size=40),
                      Lamb(1e-3), micro_batch_size=2, progress=False, jit_compile=False)
    verdict = outcomes.judge_call(lambda: trainer.fit(str(directory), 1), refuse=True,
                                  user_files=(directory, before))
    assert verdict.outcome == outcomes.HELD, verdict
