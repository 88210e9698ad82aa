"""What the `tfpack` command line lets reach the terminal.

Native libraries write to the file descriptors directly, past ``sys.stdout``
and ``sys.stderr``: TensorFlow's start-up lines (absl logs before its
``InitializeLog``, which no environment variable silences) go to fd 2, the
HiGHS banner of the ``optimal`` planner to fd 1. So:

- `quiet_import_tensorflow` imports TensorFlow with fd 2 pointed at a
  temporary file (replayed if the import fails), so a one-line error is the
  only thing on stderr;
- `json_stdout` points fd 1 at ``/dev/null`` for the whole command, collects
  what Python prints, and writes it to the real stdout at the end: ``--json``
  prints exactly the JSON document;
- `close_broken_stdout` lets a closed pipe (``tfpack ... | head``) end the
  command quietly.

Example:

>>> import json
>>> from tfpack.cli.streams import json_stdout
>>> with json_stdout():  # doctest: +SKIP
...     print(json.dumps({"packs": 3}))
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

from tfpack._fds import redirect_fd

__all__ = ["quiet_import_tensorflow", "json_stdout", "close_broken_stdout"]


def quiet_import_tensorflow() -> None:
    """Import TensorFlow and probe its devices with their native lines on fd 2 discarded."""
    if "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        try:
            with redirect_fd(2, captured.fileno()):
                import tensorflow

                # Probing the devices logs "failed call to cuInit" (level E, past
                # TF_CPP_MIN_LOG_LEVEL=2) on machines with CUDA libraries and no GPU.
                tensorflow.config.list_physical_devices()
        except BaseException:
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise


@contextlib.contextmanager
def json_stdout():
    """Silence fd 1 (native writers) and pass on only what Python prints."""
    real = sys.stdout
    real.flush()
    buffer = io.StringIO()
    with open(os.devnull, "w") as devnull, redirect_fd(1, devnull.fileno()):
        sys.stdout = buffer
        try:
            yield
        finally:
            sys.stdout = real
    real.write(buffer.getvalue())
    real.flush()


def close_broken_stdout() -> None:
    """After a BrokenPipeError: point stdout at /dev/null so exit flushes nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    finally:
        os.close(devnull)
