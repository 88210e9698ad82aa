"""`session_once.session_folder`: set-up run once, its failure seen by every asker."""

import pytest

from session_once import session_folder


class _Factory:
    def __init__(self, root):
        self.root = root

    def getbasetemp(self):
        return self.root


def test_runs_once_and_every_asker_gets_its_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    calls = []

    def make(folder):
        calls.append(folder)
        (folder / "out.txt").write_text("made")

    first = session_folder(_Factory(tmp_path), "scenario", make)
    again = session_folder(_Factory(tmp_path), "scenario", make)
    assert first == again == tmp_path / "scenario" and len(calls) == 1
    assert (first / "out.txt").read_text() == "made"


def test_a_failure_fails_every_asker_without_running_again(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    calls = []

    def make(folder):
        calls.append(folder)
        raise RuntimeError("worker 1 hung")

    with pytest.raises(RuntimeError, match="worker 1 hung"):
        session_folder(_Factory(tmp_path), "scenario", make)
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match="scenario failed: RuntimeError: worker 1 hung"):
            session_folder(_Factory(tmp_path), "scenario", make)
    assert len(calls) == 1


def test_xdist_workers_share_the_parent_of_their_base_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    (tmp_path / "gw1").mkdir()
    folder = session_folder(_Factory(tmp_path / "gw1"), "scenario", lambda folder: None)
    assert folder == tmp_path / "scenario" and (folder / "done").exists()
