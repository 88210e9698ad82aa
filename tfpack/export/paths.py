"""Where an export goes: never over what tfpack did not write, swapped atomically.

Export policy, kept apart from the SavedModel mechanics:

- A tfpack SavedModel is recognised by its marker file ``assets.extra/tfpack.json``
  (``assets.extra`` is where TensorFlow Serving expects extra files).
- `prepare` refuses a file, a non-empty directory that is not a tfpack
  SavedModel (left untouched), and an existing tfpack SavedModel unless
  ``overwrite``. It first removes what an interrupted export left next to the
  path (hidden ``.<name>.tfpack-export-*`` siblings) and puts back a previous
  export that a crash left aside.
- The SavedModel is written to a temporary sibling and `install`-ed with the
  swap ``tfpack pack`` commits its output with
  (`tfpack.formats.outputs.swap_in`): a rename when the path is free, else an
  atomic exchange of the two directories (Linux ``renameat2(RENAME_EXCHANGE)``),
  so a reader or a crash sees the old SavedModel or the new one, never none.
  Where the exchange is not available, two renames with the old one kept
  aside until the new one is in place (a crash between them is repaired by
  the next export).

Example:

>>> import tempfile, os
>>> from tfpack.export import paths
>>> root = tempfile.mkdtemp()
>>> os.makedirs(os.path.join(root, "mine"))
>>> open(os.path.join(root, "mine", "notes.txt"), "w").close()
>>> paths.prepare(os.path.join(root, "mine"), overwrite=True)
Traceback (most recent call last):
...
tfpack.errors.TfpackError: The export path must be a new or empty directory or a tfpack SavedModel (nothing is deleted). Received: path=.../mine (a directory holding notes.txt)
"""

from __future__ import annotations

import os
import shutil
import uuid

from tfpack.errors import TfpackError

__all__ = ["MARKER", "is_tfpack_saved_model", "prepare", "temporary_sibling", "install"]

MARKER = os.path.join("assets.extra", "tfpack.json")
_PARTIAL, _OLD = "tfpack-export-partial", "tfpack-export-old"


def is_tfpack_saved_model(path: str) -> bool:
    """Whether ``path`` is a complete tfpack SavedModel (marker written last)."""
    return (os.path.isfile(os.path.join(path, "saved_model.pb"))
            and os.path.isfile(os.path.join(path, MARKER)))


def _siblings(path: str, kind: str) -> list[str]:
    parent, name = os.path.split(path)
    prefix = f".{name}.{kind}-"
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    return sorted(os.path.join(parent, e) for e in entries if e.startswith(prefix))


def _clean_leftovers(path: str) -> None:
    old = [p for p in _siblings(path, _OLD) if is_tfpack_saved_model(p)]
    if not os.path.exists(path) and old:
        os.rename(old[-1], path)  # A crash between the two fallback renames.
    for leftover in _siblings(path, _PARTIAL) + _siblings(path, _OLD):
        shutil.rmtree(leftover, ignore_errors=True)


def prepare(path, *, overwrite: bool) -> str:
    """Check that ``path`` may receive an export; returns it absolute.

    Raises:
        TfpackError: an unwritable parent, a file, a foreign non-empty
            directory, or an existing tfpack SavedModel with
            ``overwrite=False``. Nothing is deleted in any of these cases.
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        probe = os.path.join(parent, f".tfpack-write-test-{uuid.uuid4().hex[:8]}")
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as error:
        raise TfpackError(
            "The export path must be in a writable directory. "
            f"Received: path={path!r} ({error.strerror})") from None
    if os.path.exists(path) and not os.path.isdir(path):
        raise TfpackError("The export path must be a directory or not exist yet. "
                          f"Received: path={path!r} (a file)")
    _clean_leftovers(path)
    if os.path.isdir(path) and os.listdir(path):
        if not is_tfpack_saved_model(path):
            held = ", ".join(sorted(os.listdir(path))[:3])
            raise TfpackError(
                "The export path must be a new or empty directory or a tfpack SavedModel "
                f"(nothing is deleted). Received: path={path} (a directory holding {held})")
        if not overwrite:
            raise TfpackError("The export path must not hold a SavedModel when "
                              f"overwrite=False. Received: path={path!r}")
    return path


def temporary_sibling(path: str) -> str:
    """A fresh hidden name next to ``path`` for writing the new SavedModel."""
    parent, name = os.path.split(path)
    return os.path.join(parent, f".{name}.{_PARTIAL}-{uuid.uuid4().hex[:8]}")


def install(tmp: str, path: str) -> None:
    """Put the complete SavedModel ``tmp`` at ``path``: the old one or the new one, never none."""
    from tfpack.formats.outputs import swap_in

    parent, name = os.path.split(path)
    swap_in(tmp, path, aside=os.path.join(parent, f".{name}.{_OLD}-{uuid.uuid4().hex[:8]}"))
