"""``tfpack train`` refuses settings that contradict each other before it does anything.

Hypothesis found ``--hidden=3 --heads=2`` refused only once the model was built, after the
run's status lines: three stderr lines, not the one the command line owes.
"""

import json

import pytest

from tfpack.cli import main


@pytest.mark.parametrize("how", ["flags", "config"])
def test_hidden_not_a_multiple_of_heads_is_one_line_before_anything_runs(tmp_path, capsys, how):
    run = tmp_path / "run"
    argv = ["train", f"--input={tmp_path / 'missing-*.tfrecord'}", "--input-format=google",
            f"--output={run}"]
    if how == "flags":
        argv += ["--hidden=6", "--heads=4"]
    else:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"hidden": 6, "heads": 4}))
        argv += [f"--config={config}"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "--hidden" in lines[0] and "--heads" in lines[0] and "Received: --hidden=6" in lines[0]
    assert captured.out == ""
    assert not run.exists()
