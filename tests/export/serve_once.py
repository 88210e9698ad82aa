"""One serving process for every export test file of a session (`serve`).

The export tests serve their SavedModels in a process of TensorFlow's own, without
tfpack (``serve_fresh.py``). That process's start (importing TensorFlow, ~4 CPU s)
was paid once per file; now the first file of the session starts it and every
file, in whichever pytest-xdist worker, hands it its requests through a spool
folder. Each file still exports its own models in its own worker (in parallel), and
the serving process restores each file's SavedModels for that file's requests only.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from filelock import FileLock

from unused_imports import with_site

SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")


def _running(pid):
    """Whether process ``pid`` runs (a zombie, not reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def spool_folder(tmp_path_factory):
    """The session's spool folder, shared by its xdist workers."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the session's worker processes
    folder = root / "export-serving"
    folder.mkdir(exist_ok=True)
    return folder


def serve(tmp_path_factory, requests, timeout):
    """Serve ``requests`` (``serve_fresh.py``'s list) in the session's serving process.

    Starts that process where none runs (it ends with the pytest session); fails the
    test with the process's traceback when a request fails, or its log when it died.
    """
    folder = spool_folder(tmp_path_factory)
    stem = folder / f"{os.getpid()}-{uuid.uuid4().hex}"
    with FileLock(str(folder / "lock")):
        pid_file = folder / "server.pid"
        pid = int(pid_file.read_text()) if pid_file.exists() else None
        if pid is None or not _running(pid):
            owner = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
            with open(folder / "server.log", "ab") as log:
                process = subprocess.Popen(
                    [sys.executable, SERVE, "--spool", str(folder), "--owner", str(owner)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                         "PYTHONPATH": with_site("")})
            pid = process.pid
            pid_file.write_text(str(pid))
        (folder / f"{stem.name}.json.tmp").write_text(json.dumps(requests))
        os.replace(folder / f"{stem.name}.json.tmp", f"{stem}.requests.json")
    result, deadline = stem.with_suffix(".result"), time.monotonic() + timeout
    while not result.exists():
        if not _running(pid) and not result.exists():
            log = (folder / "server.log").read_text(errors="replace")[-3000:]
            pytest.fail(f"the serving process {pid} ended without answering: {log}")
        if time.monotonic() > deadline:
            pytest.fail(f"the serving process {pid} did not answer in {timeout} s")
        time.sleep(0.05)
    answer = result.read_text()
    if answer != "ok":
        pytest.fail(f"serving failed: {answer[-3000:]}")
