"""The fault-injection campaign's one judge: every scenario ends in exactly one outcome.

A scenario does something a careless or hostile user would (bad arguments, a
damaged manifest, a second run into the same directory, a kill mid-write) and
says what must hold afterwards. `judge_cli` and `judge_call` run it and
classify what happened:

- ``held``: refused with one clear line (CLI: exit 2, one stderr line; API: a
  `TfpackError` with a one-line message), or succeeded with a right result;
- ``traceback``: a Python traceback, a non-`TfpackError` exception, or more
  than one line of noise where one line was owed;
- ``silent-wrong``: success (or exit 0) where a refusal was owed, or a result
  that fails the scenario's check;
- ``data-loss``: a file the scenario marked as the user's was changed,
  replaced or deleted (whatever else happened);
- ``crash``: the process died by a signal (a segfault, an abort).

Tests assert ``outcome == HELD``; the message then says what went wrong, so a
reintroduced bug fails with its class and its evidence.

Example:

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> (d / "NOTES.md").write_text("mine")
4
>>> before = snapshot(d)
>>> judge_call(lambda: 1 + 1, check=lambda r: r == 2, user_files=(d, before)).outcome
'held'
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from typing import Callable

HELD, TRACEBACK, SILENT_WRONG, DATA_LOSS, CRASH = (
    "held", "traceback", "silent-wrong", "data-loss", "crash")

__all__ = ["HELD", "TRACEBACK", "SILENT_WRONG", "DATA_LOSS", "CRASH", "Verdict", "snapshot",
           "changed_files", "judge_cli", "judge_call", "run_cli"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One scenario's outcome and the evidence behind it."""

    outcome: str
    evidence: str = ""

    def __bool__(self) -> bool:
        return self.outcome == HELD


def snapshot(directory, *, skip: Callable[[str], bool] = lambda rel: False) -> dict:
    """Every entry under ``directory``: relative path -> what it is and holds.

    Symbolic links are recorded as links (their target), not followed, so a
    link replaced by a directory shows as a change. ``skip(rel)`` leaves out
    paths the scenario expects tfpack to write (its own shards, manifest).
    """
    found = {}
    directory = os.fspath(directory)
    if os.path.islink(directory):
        found["."] = ("link", os.readlink(directory))
    if not os.path.isdir(directory):
        return found
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            if skip(rel):
                continue
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[rel] = ("dir",)
            else:
                with open(path, "rb") as f:
                    found[rel] = ("file", hashlib.sha256(f.read()).hexdigest())
    return found


def changed_files(directory, before: dict, *, skip: Callable[[str], bool] = lambda rel: False
                  ) -> list[str]:
    """The entries of ``before`` that are gone or differ now."""
    after = snapshot(directory, skip=skip)
    return sorted(rel for rel, what in before.items() if after.get(rel) != what)


def run_cli(*argv, env=None, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    """``tfpack ARGV...`` in a fresh process (so a segfault or exit is observed, not suffered)."""
    environment = dict(os.environ if env is None else env)
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return subprocess.run([sys.executable, "-m", "tfpack.cli", *map(str, argv)], env=environment,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _loss(user_files) -> Verdict | None:
    if user_files is None:
        return None
    groups = [user_files] if isinstance(user_files, tuple) else list(user_files)
    for directory, before in groups:
        changed = changed_files(directory, before)
        if changed:
            return Verdict(DATA_LOSS, f"changed or removed under {directory}: {changed}")
    return None


def judge_cli(result: subprocess.CompletedProcess, *, refuse: bool,
              check: Callable[[subprocess.CompletedProcess], bool] | None = None,
              match: str | None = None, user_files=None) -> Verdict:
    """Classify a finished ``tfpack`` process.

    Args:
        result: from `run_cli`.
        refuse: the scenario owes a refusal (exit 2, one stderr line).
        check: for a success, whether the result (files, stdout) is right;
            for a refusal, an extra condition (e.g. nothing left behind).
        match: a substring the refusal's line must contain (what was wrong).
        user_files: ``(directory, snapshot)`` or a list of them: the user's
            entries that must be exactly as they were.
    """
    loss = _loss(user_files)
    if loss is not None:
        return loss
    if result.returncode < 0:
        return Verdict(CRASH, f"killed by signal {-result.returncode}: {result.stderr[-2000:]}")
    stderr = _lines(result.stderr)
    if "Traceback (most recent call last)" in result.stderr:
        return Verdict(TRACEBACK, result.stderr[-3000:])
    if refuse:
        if result.returncode == 0:
            return Verdict(SILENT_WRONG, f"exit 0 where a refusal was owed: {result.stdout[-1000:]}")
        if result.returncode != 2 or len(stderr) != 1:
            return Verdict(TRACEBACK, f"exit {result.returncode}, {len(stderr)} stderr lines: "
                                      f"{result.stderr[-3000:]}")
        if match is not None and match.lower() not in stderr[0].lower():
            return Verdict(SILENT_WRONG, f"refused, but not for {match!r}: {stderr[0]}")
        if check is not None and not check(result):
            return Verdict(SILENT_WRONG, f"refused, but the check failed: {stderr[0]}")
        return Verdict(HELD, stderr[0])
    if result.returncode != 0:
        return Verdict(TRACEBACK, f"exit {result.returncode} where success was owed: "
                                  f"{result.stderr[-3000:]}")
    if check is not None and not check(result):
        return Verdict(SILENT_WRONG, f"exit 0 but the result is wrong: {result.stdout[-1000:]}")
    return Verdict(HELD, "")


def judge_call(call: Callable[[], object], *, refuse: bool = False,
               check: Callable[[object], bool] | None = None, match: str | None = None,
               user_files=None) -> Verdict:
    """Classify an API call: a one-line `TfpackError` where ``refuse``, else a checked result."""
    from tfpack.errors import TfpackError

    try:
        value = call()
    except TfpackError as error:
        loss = _loss(user_files)
        if loss is not None:
            return loss
        message = str(error)
        if not refuse:
            return Verdict(TRACEBACK, f"refused where success was owed: {message}")
        if "\n" in message.strip():
            return Verdict(TRACEBACK, f"a refusal of several lines: {message}")
        if match is not None and match.lower() not in message.lower():
            return Verdict(SILENT_WRONG, f"refused, but not for {match!r}: {message}")
        return Verdict(HELD, message)
    except Exception as error:  # noqa: BLE001 - every other exception is the finding
        loss = _loss(user_files)
        return loss if loss is not None else Verdict(
            TRACEBACK, f"{type(error).__name__}: {error}")
    loss = _loss(user_files)
    if loss is not None:
        return loss
    if refuse:
        return Verdict(SILENT_WRONG, f"returned where a refusal was owed: {value!r:.500}")
    if check is not None and not check(value):
        return Verdict(SILENT_WRONG, f"returned a wrong result: {value!r:.500}")
    return Verdict(HELD, "")
