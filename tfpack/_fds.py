"""File-descriptor redirection, for output that native libraries write past Python.

Native code (TensorFlow's C++ logging, HiGHS's banner) writes to fds 1 and 2
directly, so ``contextlib.redirect_stdout`` cannot hold it back. Used by the
planner (`tfpack.packing.algorithms._lp`) and the command line
(`tfpack.cli.streams`). Imports nothing heavy.

Example:

>>> import os
>>> with silenced(1):
...     _ = os.write(1, b"not shown")
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__ = ["redirect_fd", "silenced"]


@contextlib.contextmanager
def redirect_fd(fd: int, target_fd: int):
    """Point ``fd`` at ``target_fd`` inside the block, then restore it."""
    saved = os.dup(fd)
    try:
        os.dup2(target_fd, fd)
        yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


@contextlib.contextmanager
def silenced(fd: int):
    """Discard what anything writes to ``fd`` inside the block."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    with open(os.devnull, "w") as devnull, redirect_fd(fd, devnull.fileno()):
        yield
