"""Expensive set-up run once per test session, shared by every pytest-xdist worker.

The suite's subprocess scenarios that serve several test files (the
MultiWorkerMirroredStrategy worker pair, the two-replica process) run in the
first worker process that asks; the others wait on a file lock and read the
folder it left. A failure is recorded, and every test that asks fails with it.
"""

import os
import shutil

import pytest
from filelock import FileLock


def session_folder(tmp_path_factory, name, make):
    """The folder ``make(folder)`` filled, run once per test session.

    ``make`` receives a new, empty folder; it is run again in a later session
    only (a ``done`` marker, written after it returns, says it completed). Where
    it raised, here or in another worker, the asking test fails (`pytest.fail`,
    never an AssertionError an xfail would take for its own) with its error.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the session's worker processes
    folder, failed = root / name, root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if not failed.exists() and not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                make(folder)
            except BaseException as error:  # pytest.fail's too: every file sees it
                failed.write_text(f"{type(error).__name__}: {error}")
                raise
            (folder / "done").touch()
    if failed.exists():
        pytest.fail(f"{name} failed: {failed.read_text()[-3000:]}")
    return folder
