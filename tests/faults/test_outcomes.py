"""The campaign's judge classifies each kind of outcome (so a campaign test can fail)."""

import os
import signal
import subprocess
import sys

import pytest

from tests.faults import outcomes
from tfpack.errors import TfpackError


def _process(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_cli_outcomes():
    one_line = _process("import sys; print('tfpack plan: bad', file=sys.stderr); sys.exit(2)")
    assert outcomes.judge_cli(one_line, refuse=True, match="bad").outcome == outcomes.HELD
    assert outcomes.judge_cli(one_line, refuse=True, match="other").outcome == outcomes.SILENT_WRONG
    assert outcomes.judge_cli(one_line, refuse=False).outcome == outcomes.TRACEBACK
    noisy = _process("import sys; print('a\\nb', file=sys.stderr); sys.exit(2)")
    assert outcomes.judge_cli(noisy, refuse=True).outcome == outcomes.TRACEBACK
    traceback = _process("raise KeyError('x')")
    assert outcomes.judge_cli(traceback, refuse=True).outcome == outcomes.TRACEBACK
    quiet = _process("pass")
    assert outcomes.judge_cli(quiet, refuse=True).outcome == outcomes.SILENT_WRONG
    assert outcomes.judge_cli(quiet, refuse=False, check=lambda r: False).outcome == (
        outcomes.SILENT_WRONG)
    crash = _process(f"import os; os.kill(os.getpid(), {int(signal.SIGSEGV)})")
    assert outcomes.judge_cli(crash, refuse=True).outcome == outcomes.CRASH


def test_call_outcomes(tmp_path):
    (tmp_path / "NOTES.md").write_text("mine")
    os.symlink("NOTES.md", tmp_path / "link")
    before = outcomes.snapshot(tmp_path)

    def refuse():
        raise TfpackError("`x` must be positive. Received: x=-1")

    assert outcomes.judge_call(refuse, refuse=True, match="x=-1").outcome == outcomes.HELD
    assert outcomes.judge_call(lambda: 3, refuse=True).outcome == outcomes.SILENT_WRONG
    assert outcomes.judge_call(lambda: {}["k"]).outcome == outcomes.TRACEBACK

    def destroy():
        os.remove(tmp_path / "link")
        os.mkdir(tmp_path / "link")
        refuse()

    verdict = outcomes.judge_call(destroy, refuse=True, user_files=(tmp_path, before))
    assert verdict.outcome == outcomes.DATA_LOSS and "link" in verdict.evidence


@pytest.mark.slow
def test_run_cli_reaches_the_real_command(tmp_path):
    result = outcomes.run_cli("plan", tmp_path / "missing.txt", "--max-length", "8",
                              "--max-sequences-per-pack", "2", "--algorithm", "ffd",
                              "--output", tmp_path / "plan.json")
    assert outcomes.judge_cli(result, refuse=True, match="missing.txt").outcome == outcomes.HELD
