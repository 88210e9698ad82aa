"""`tfpack train`: Google TFRecords packed on the fly or unpacked, config files, resume, errors."""

import argparse
import contextlib
import io
import json
import re
import os
import shutil

import numpy as np
import pytest

from tfpack.cli import build_parser, main

TINY = ["--vocab-size", "40", "--layers", "1", "--hidden", "16", "--heads", "2",
        "--intermediate", "32", "--max-length", "32", "--max-sequences-per-pack", "3",
        "--max-predictions", "6", "--batch-size", "4", "--accumulation-steps", "2",
        "--log-every", "2", "--checkpoint-every", "2", "--dropout", "0", "--no-jit"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    from tfpack.formats import google_example
    import tensorflow as tf

    path = tmp_path_factory.mktemp("google") / "train.tfrecord"
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(96):
            n = int(rng.integers(5, 16))
            ids = [2] + list(rng.integers(5, 40, size=n - 2)) + [3]
            positions = sorted(rng.choice(np.arange(1, n - 1), size=2, replace=False).tolist())
            writer.write(google_example(ids, [0] * n, positions, [ids[p] for p in positions],
                                        int(rng.integers(0, 2)), max_seq_length=32,
                                        max_predictions_per_seq=6))
    return str(path)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """Packed TFRecords as `tfpack pack` writes them, with stats.json (packing factor 2)."""
    import sys

    from tfpack.formats import write_packed

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "training"))
    from tinymodels import packed_examples

    directory = tmp_path_factory.mktemp("packed")
    packs = packed_examples(48, L=32, K=3, M=6, vocab=40)
    write_packed([packs], str(directory / "part-00000.tfrecord"))
    (directory / "stats.json").write_text(json.dumps({"packing_factor": 2.0}))
    return str(directory / "part-*.tfrecord")


def _summary(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def two_steps(packed, tmp_path_factory):
    """A run of 2 steps on the packed records (learning rate 0.001) and its summary:
    the tests that resume or refuse to resume start from a copy (`_copy`)."""
    out = tmp_path_factory.mktemp("two_steps") / "run"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["train", "--input", packed, "--output", str(out), *TINY, "--steps", "2",
                     "--learning-rate", "0.001"]) == 0
    return out, json.loads(stdout.getvalue().strip().splitlines()[-1])


def _copy(run, tmp_path):
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


@pytest.fixture(scope="module")
def resumed(packed, two_steps, tmp_path_factory):
    """`two_steps` (a copy) resumed to step 4 at a new learning rate (0.0005), and its
    summary: one resumed run for the resume, log and export test and the learning-rate
    test (each resume is a training: a model, its trace and a checkpoint)."""
    out = _copy(two_steps[0], tmp_path_factory.mktemp("resumed"))
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["train", "--input", packed, "--output", str(out), *TINY, "--steps", "4",
                     "--learning-rate", "0.0005"]) == 0
    return out, json.loads(stdout.getvalue().strip().splitlines()[-1])


def test_trains_packed_records_then_resumes_and_exports(two_steps, resumed, tmp_path, capsys):
    first = two_steps[1]
    out, second = resumed
    assert first["step"] == 2 and first["packing_factor"] == 2.0
    # Accumulation is cut by the packing factor: 2 unpacked micro-steps -> 1 packed.
    assert first["accumulation_steps"] == 1 and first["micro_batch_size"] == 4
    assert second["resumed_from"] == 2 and second["step"] == 4
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [2, 4] and np.isfinite(log[-1]["mlm_loss"])
    assert sorted(os.listdir(out / "checkpoints")) == ["ckpt-2", "ckpt-4"]

    saved = tmp_path / "served"
    assert main(["export", "--run", str(out), "--output", str(saved), "--json"]) == 0
    exported = _summary(capsys)
    assert exported == {"saved_model": str(saved), "step": 4}
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved))
    assert {"serving_default", "serve_sequences"} <= set(loaded.signatures)
    nsp = loaded.signatures["serve_sequences"](input_ids=tf.constant([[2, 7, 9, 3], [2, 5, 3, 0]]),
                                               lengths=tf.constant([4, 3]))
    assert nsp["nsp_logits"].shape == (2, 2)


def test_google_records_packed_on_the_fly(records, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--input", records, "--input-format", "google", "--pack", "ffd",
                 "--output", str(out), "--steps", "2", "--packing-adjustment", "beta",
                 *TINY]) == 0
    summary = _summary(capsys)
    assert summary["step"] == 2 and summary["packing_factor"] > 1.5
    assert summary["accumulation_steps"] == 2  # "beta": LAMB's betas adjust instead


def test_config_file_and_unpacked_input(records, tmp_path, capsys):
    config = tmp_path / "train.json"
    config.write_text(json.dumps({"input": records, "input-format": "google", "pack": "none",
                                  "steps": 99, "learning_rate": 1e-3}))
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output", str(out), "--steps", "2",
                 "--no-check-exact", *TINY]) == 0
    captured = capsys.readouterr()
    assert "exactness check" not in captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["step"] == 2 and summary["packing_factor"] == 1.0
    assert summary["accumulation_steps"] == 2  # unpacked: nothing cut
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["K"] == 1 and saved["learning_rate"] == 1e-3 and saved["steps"] == 2
    assert saved["check_exact"] is False


def test_resuming_with_another_model_is_refused(packed, two_steps, tmp_path, capsys):
    out = _copy(two_steps[0], tmp_path)
    base = ["train", "--input", packed, "--output", str(out), "--steps", "2", *TINY]
    assert main([*base[:-len(TINY)], *TINY[:2], "--layers", "2", *TINY[4:]]) == 2
    assert "changed settings ['layers']" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["train", "--output", "x"],
     r"`--input` must be .*\(flag or config\)\. Received: --input=None"),
    (["train", "--input", "x", "--output", "y", "--steps", "0"],
     r"`--steps` must be a positive integer. Received: --steps=0"),
    (["train", "--config", "/nonexistent.json"],
     r"`--config` must be a path to an existing regular file"),
])
def test_bad_input_exits_2(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as error:  # refused by the flag's declared type (argparse)
        code = error.code
    assert code == 2
    import re

    assert re.search(message, capsys.readouterr().err)


def test_resume_applies_the_learning_rate_and_refuses_fixed_settings(packed, two_steps, resumed,
                                                                    tmp_path, capsys):
    out = _copy(two_steps[0], tmp_path)  # 2 steps at --learning-rate 0.001
    args = ["train", "--input", packed, "--output", str(out), *TINY]
    assert main([*args, "--steps", "4", "--batch-size", "8"]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"tfpack train: error: A resumed run must keep the settings its "
                        r"checkpoints depend on \(only .*learning_rate.* may change\)\. "
                        r"Received: changed settings \['batch_size', 'micro_batch_size'\] "
                        r"for --output=.*\n", err), err
    # Refused before it changed anything: the run's settings and checkpoints as they were.
    assert json.loads((out / "train_config.json").read_text()) == json.loads(
        (two_steps[0] / "train_config.json").read_text())
    assert sorted(os.listdir(out / "checkpoints")) == ["ckpt-2"]
    # The same run resumed at --learning-rate 0.0005 (`resumed`): the new rate applies.
    out, summary = resumed
    assert summary["resumed_from"] == 2
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [2, 4]
    assert log[0]["learning_rate"] == pytest.approx(1e-3)
    assert log[1]["learning_rate"] == pytest.approx(5e-4)
    config = json.loads((out / "train_config.json").read_text())
    assert config["learning_rate"] == 0.0005 and config["batch_size"] == 4


def test_the_batch_rule_is_logged_with_its_note(packed, tmp_path, capsys):
    # One pack per update at packing factor 2: 2 sequences for a recipe of 1, said.
    out = tmp_path / "run"
    assert main(["train", "--input", packed, "--output", str(out), *TINY, "--steps", "1",
                 "--batch-size", "1", "--accumulation-steps", "1"]) == 0
    err = capsys.readouterr().err
    assert "tfpack train: note: 1 pack per update holds 2 sequences on average, not the 1 " \
           "of the recipe (+100%)" in err
    assert "tfpack train: 1 pack x 1 step x 1 replica = 1 pack per update, 2 sequences on " \
           "average (recipe 1); balanced batches: 1-3" in err
    # The exactness check ran before the first update, at the packs' length.
    assert re.search(r"tfpack train: exactness check passed: probe of 5\+1\+3 tokens at "
                     r"L=\d+, float32, dense attention, against packs of one", err), err


def test_config_files_with_the_old_name_of_k_still_load(tmp_path):
    from tfpack.cli.train import resolve

    config = tmp_path / "old.json"
    config.write_text(json.dumps({"input": "x", "output": "y", "max-per-pack": 5}))
    assert resolve(argparse.Namespace(config=str(config)))["max_sequences_per_pack"] == 5
    flags = build_parser().parse_args(["train", "--config", str(config), "--max-per-pack", "4"])
    assert resolve(flags)["max_sequences_per_pack"] == 4
