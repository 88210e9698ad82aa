"""Files that are complete or absent: a hidden temporary name, then a rename.

Every file tfpack writes goes through here (shards, manifests, plan files), so
a reader never sees half of one and a killed writer leaves only a hidden
temporary file (its name starts with `TEMP_PREFIX`) that readers skip and the
next write into the directory removes. This module imports no TensorFlow.

Example:

>>> import os, tempfile
>>> from tfpack import atomic
>>> path = os.path.join(tempfile.mkdtemp(), "note.json")
>>> atomic.write_atomic(path, '{"ok": true}')
>>> open(path).read()
'{"ok": true}'
>>> [name for name in os.listdir(os.path.dirname(path)) if name.startswith(atomic.TEMP_PREFIX)]
[]
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Iterator

__all__ = ["TEMP_PREFIX", "atomic_path", "write_atomic", "fsync_directory"]

# Every temporary file or folder tfpack creates starts with this; readers skip
# such entries and the next write into the directory removes them.
TEMP_PREFIX = ".tfpack-"


def fsync_directory(directory: str) -> None:
    """Flush a directory's entries (a rename into it) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yield a hidden temporary path; on success fsync it and rename it to ``path``.

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    directory, name = os.path.split(os.path.abspath(path))
    stem = f"{TEMP_PREFIX}tmp-{os.getpid()}-{secrets.token_hex(4)}-"
    # The name's end (its extension: np.save, Keras check it) as much as the file system
    # takes after the stem: a name near NAME_MAX is the user's right, not one too long.
    room = _name_max(directory) - len(os.fsencode(stem))
    while name and len(os.fsencode(name)) > room:
        name = name[1:]
    tmp = os.path.join(directory, stem + name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    fsync_directory(directory)


def _name_max(directory: str) -> int:
    """The most bytes a file name may have in ``directory`` (255 where it cannot be asked)."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def write_atomic(path: str, data: str | bytes) -> None:
    """Write a whole small file (JSON) atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
