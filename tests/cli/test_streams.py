"""What reaches the terminal: `--json` is exactly one JSON document whatever native libraries
print (the HiGHS banner of `optimal`), TensorFlow's start-up lines never precede a one-line
error, a closed pipe ends quietly, and bad input is one stderr line with exit status 2."""

import json
import re
import os
import subprocess
import sys

import pytest

from cli_helpers import tfpack
from unused_imports import with_site

ENTRY = [sys.executable, "-m", "tfpack.cli"]


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_CPP")}
    return {**env, "PYTHONPATH": with_site(os.pathsep.join(sys.path))}


@pytest.mark.parametrize("command", [
    ["plan", "wikipedia_512", "--max-length", "512", "--max-sequences-per-pack", "3",
     "--algorithm", "optimal", "--output", "{tmp}/plan.json"],
    ["analyze", "wikipedia_512", "--max-length", "512", "--max-sequences-per-pack", "3",
     "--algorithms", "ffd,optimal"],
])
def test_json_is_one_document_despite_the_highs_banner(command, tmp_path, capfd):
    assert tfpack(*[c.format(tmp=tmp_path) for c in command], "--json") == 0
    out = capfd.readouterr().out
    assert isinstance(json.loads(out), dict)  # The whole of stdout, nothing before it.


def test_one_line_error_without_tensorflow_start_up_noise(tmp_path):
    result = subprocess.run([*ENTRY, "export", "--model", str(tmp_path / "none.keras")],
                            capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfpack export: error: `--model` must be")


@pytest.mark.slow  # a fresh process that imports TensorFlow and runs ops: ~10 s
def test_a_packing_run_leaves_stderr_empty(tmp_path):
    """TensorFlow's device probe logs "failed call to cuInit" at level E (past
    TF_CPP_MIN_LOG_LEVEL=2) on machines with CUDA libraries and no GPU."""
    from google_records import google_examples, write_google

    write_google(tmp_path / "in.tfrecord", google_examples(20, seed=2))
    result = subprocess.run([*ENTRY, "pack", "--input", str(tmp_path / "in.tfrecord"),
                             "--output", str(tmp_path / "out"), "--max-length", "64",
                             "--max-sequences-per-pack", "3", "--json"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0 and json.loads(result.stdout)["sequences"] == 20
    assert result.stderr == ""


def test_closed_pipe_ends_quietly(tmp_path):
    process = subprocess.Popen([*ENTRY, "plan", "wikipedia_512", "--max-length", "512",
                                "--max-sequences-per-pack", "3", "--algorithm", "ffd",
                                "--output", str(tmp_path / "p.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    process.stdout.close()  # The reader is gone before anything is written (`| head`).
    _, err = process.communicate(timeout=60)
    assert err.decode() == "" and process.returncode == 0


@pytest.mark.parametrize("argv, message", [
    (["--dropout", "2.0"],
     r"`--dropout` must be a finite number in \[0, 1\)\. Received: --dropout=2.0"),
    (["--learning-rate", "0"], r"`--learning-rate` must be a finite number > 0"),
    (["--packing-factor", "0.5"], r"`--packing-factor` must be a finite number >= 1"),
    (["--seed", "-1"], r"`--seed` must be a non-negative integer"),
    (["--output", "{file}"], r"`--output` must be a new or replaceable directory path.* "
                             r"Received: --output=.*afile \(an existing entry of another kind\)"),
    (["--config", "{list_config}"], r"`--config` must hold a JSON object whose keys are flag "
                                    r"names. Received: --config=.* \(a list\)"),
    (["--config", "{steps_config}"], r"`--steps` must be a positive integer. "
                                     r"Received: --steps='ten'"),
])
def test_train_bad_settings_exit_2_with_one_line(argv, message, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "steps.json").write_text('{"steps": "ten"}')
    paths = {"file": tmp_path / "afile", "list_config": tmp_path / "list.json",
             "steps_config": tmp_path / "steps.json"}
    argv = [a.format(**paths) for a in argv]
    base = ["train", "--input", str(tmp_path / "*.tfrecord")]
    if "--output" not in argv:
        base += ["--output", str(tmp_path / "run")]
    assert tfpack(*base, *argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    import re
    assert re.match(r"tfpack train: error: " + message, err), err
    assert not os.path.exists(tmp_path / "run")


def test_plan_of_an_all_zero_histogram_exits_2(tmp_path, capsys):
    (tmp_path / "zeros.txt").write_text("0\n0\n0\n")
    assert tfpack("plan", tmp_path / "zeros.txt", "--max-length", 3, "--max-sequences-per-pack", 2,
                  "--algorithm", "optimal", "--output", tmp_path / "p.json") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must count at least one sequence" in err
    assert not os.path.exists(tmp_path / "p.json")


@pytest.mark.parametrize("argv, message", [
    (["plan", "wikipedia_512", "--max-length", "512", "--max-sequences-per-pack", "3"],
     r"^tfpack plan: error: the following arguments are required: --algorithm, --output"),
    (["pack", "--input", "x", "--output", "y", "--max-length", "8", "--max-sequences-per-pack", "0"],
     r"^tfpack pack: error: `--max-sequences-per-pack` must be a positive integer or 'none'\. "
     r"Received: --max-sequences-per-pack=0"),
    (["analyze", "wikipedia_512", "--max-length", "twelve"],
     r"^tfpack analyze: error: `--max-length` must be a positive integer\. "
     r"Received: --max-length=twelve"),
    (["frobnicate"], r"^tfpack: error: argument COMMAND: invalid choice"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    assert tfpack(*argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(message, err), err
    assert "--help" in err


@pytest.mark.parametrize("enabled", [True, False])
def test_tensorflow_imported_with_the_collector_paused_then_as_it_was(enabled, monkeypatch):
    import gc

    import tfpack.cli

    seen = []
    monkeypatch.setattr(tfpack.cli.streams, "quiet_import_tensorflow",
                        lambda: seen.append(gc.isenabled()))
    (gc.enable if enabled else gc.disable)()
    try:
        tfpack.cli._import_tensorflow()
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
    assert seen == [False]
    assert gc.get_freeze_count() > 0
