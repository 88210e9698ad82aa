"""``tfpack ARGV`` inside the test process, judged like a separate one (`outcomes.judge_cli`).

Starting a process costs seconds (TensorFlow's import); most scenarios only
need the exit status and the two streams. An exception escaping `main` is
printed as the traceback a user would see, exit 1; a crash (a segfault) would
take the test run down, so scenarios that can crash use `outcomes.run_cli`.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import traceback


def run_cli_here(*argv) -> subprocess.CompletedProcess:
    """``tfpack ARGV...`` in this process; what `outcomes.run_cli` would return."""
    from tfpack.cli import main

    argv = [str(a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as error:  # argparse: usage errors and --help
            code = error.code if isinstance(error.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the user would see
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["tfpack", *argv], code, out.getvalue(), err.getvalue())
