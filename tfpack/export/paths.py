"""Where an export goes: never over what tfpack did not write, swapped atomically.

Export policy, kept apart from the SavedModel mechanics:

- A tfpack SavedModel is recognised by its marker file ``assets.extra/tfpack.json``
  (``assets.extra`` is where TensorFlow Serving expects extra files), written
  last; it lists every file the export wrote (``"files"``: size and
  modification time of each, so a file the user rewrote since counts as theirs).
- `prepare` refuses a file, a non-empty directory that is not a tfpack
  SavedModel (left untouched), and an existing tfpack SavedModel unless
  ``overwrite``. A path that is a symbolic link is followed: the link stays
  and its target receives the export. It first removes what an interrupted
  export provably left next to the path (`tfpack.formats.outputs.remove_leftovers`:
  hidden ``.tfpack-export-partial-<name>-<pid>-<token>`` siblings of a process
  that is gone, holding their owner record or a complete SavedModel) and puts
  back a previous export that a crash left aside.
- The SavedModel is written to such a temporary sibling and `install`-ed with
  the swap ``tfpack pack`` commits its output with
  (`tfpack.formats.outputs.swap_in`): a rename when the path is free, else an
  atomic exchange of the two directories (Linux ``renameat2(RENAME_EXCHANGE)``),
  so a reader or a crash sees the old SavedModel or the new one, never none.
- Replacing an export keeps everything in it that tfpack did not write (the
  user's ``NOTES.md``, TensorFlow Serving's
  ``assets.extra/tf_serving_warmup_requests``): before the swap each such
  entry is hard-linked (copied where links are not supported) into the new
  SavedModel at the same place, so the same file is served before and after.
  A user's file where the new export writes one of its own is refused.
  Exports older than the ``"files"`` list count the standard SavedModel files
  (``saved_model.pb``, ``fingerprint.pb``, ``variables/``, ``assets/``) as
  tfpack's.

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

import json
import os
import shutil
import uuid

from tfpack.errors import TfpackError
from tfpack.formats import outputs

__all__ = ["MARKER", "is_tfpack_saved_model", "prepare", "temporary_sibling", "write_marker",
           "install"]

MARKER = os.path.join("assets.extra", "tfpack.json")
_PARTIAL, _OLD = "export-partial", "export-old"
# What tfpack wrote into an export whose marker predates its "files" list.
_LEGACY = ("saved_model.pb", "fingerprint.pb", "keras_metadata.pb")
_LEGACY_DIRS = ("variables", "assets")


def is_tfpack_saved_model(path: str) -> bool:
    """Whether ``path`` is a complete tfpack SavedModel (marker written last)."""
    return (os.path.isfile(os.path.join(path, "saved_model.pb"))
            and os.path.isfile(os.path.join(path, MARKER)))


def prepare(path, *, overwrite: bool) -> str:
    """Check that ``path`` may receive an export; returns it absolute.

    Raises:
        TfpackError: an unwritable parent, a file, a foreign non-empty
            directory, or an existing tfpack SavedModel with
            ``overwrite=False``. Nothing is deleted in any of these cases.
    """
    path = os.path.abspath(os.fspath(path))
    target = os.path.realpath(path)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        probe = os.path.join(parent, f".tfpack-write-test-{uuid.uuid4().hex}")
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as error:
        raise TfpackError(
            "The export path must be in a writable directory. "
            f"Received: path={path!r} ({error.strerror})") from None
    outputs.remove_leftovers(target, kinds=(_PARTIAL, _OLD), complete=is_tfpack_saved_model)
    if os.path.isdir(target) and os.listdir(target):
        if not is_tfpack_saved_model(target):
            held = ", ".join(sorted(os.listdir(target))[:3])
            raise TfpackError(
                "The export path must be a new or empty directory or a tfpack SavedModel "
                f"(nothing is deleted). Received: path={path} (a directory holding {held})")
        if not overwrite:
            raise TfpackError("The export path must not hold a SavedModel when "
                              f"overwrite=False. Received: path={path!r}")
    return path


def temporary_sibling(path: str) -> str:
    """A fresh hidden directory next to ``path`` (its target), with tfpack's owner record."""
    return outputs.make_owned(outputs.sibling(os.path.realpath(path), _PARTIAL))


def _files_under(root: str) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            found.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(found)


def write_marker(tmp: str, marker: dict) -> None:
    """Write the marker, last, listing every file of the SavedModel in ``tmp``."""
    files = {}
    for name in _files_under(tmp):
        if name not in (outputs.OWNER, MARKER):
            info = os.lstat(os.path.join(tmp, name))
            files[name] = {"bytes": info.st_size, "mtime_ns": info.st_mtime_ns}
    os.makedirs(os.path.join(tmp, "assets.extra"), exist_ok=True)
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({**marker, "files": files}, f, indent=1)


def _own_files(path: str) -> set[str]:
    """The files of the export at ``path`` that tfpack wrote and nobody changed since."""
    try:
        with open(os.path.join(path, MARKER)) as f:
            listed = json.load(f).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if isinstance(listed, dict):
        own = {MARKER}
        for name, written in listed.items():
            try:
                info = os.lstat(os.path.join(path, name))
            except (OSError, TypeError, ValueError):
                continue
            if isinstance(written, dict) and written == {"bytes": info.st_size,
                                                         "mtime_ns": info.st_mtime_ns}:
                own.add(os.path.normpath(name))
        return own
    return {f for f in _files_under(path)
            if f in _LEGACY or f.split(os.sep)[0] in _LEGACY_DIRS} | {MARKER}


def _keep_user_files(old: str, new: str, shown: str) -> None:
    """Link every entry of ``old`` that tfpack did not write into ``new``, at the same place."""
    own = _own_files(old)
    for folder, dirs, files in os.walk(old):
        rel_folder = os.path.relpath(folder, old)
        for name in dirs:
            source = os.path.join(folder, name)
            dest = os.path.normpath(os.path.join(new, rel_folder, name))
            if not os.path.islink(source) and not os.path.lexists(dest):
                os.makedirs(dest)  # the user's folder (or one holding the user's files)
                shutil.copystat(source, dest)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if rel in own:
                continue
            source, dest = os.path.join(old, rel), os.path.join(new, rel)
            if os.path.lexists(dest):
                raise TfpackError(
                    "An export must not replace a file it did not write. Received: "
                    f"path={shown!r} holding {rel!r}, a name the new SavedModel writes "
                    "(move it, then export again)")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if os.path.islink(source):
                os.symlink(os.readlink(source), dest)
            else:
                try:
                    os.link(source, dest)  # the same file, not a copy
                except OSError:
                    shutil.copy2(source, dest)


def install(tmp: str, path: str) -> None:
    """Put the complete SavedModel ``tmp`` at ``path``: the old one or the new one, never none.

    Entries of a previous export that tfpack did not write are carried over
    (module docstring); a link at ``path`` is kept and its target replaced.
    """
    target = os.path.realpath(path)
    outputs.release(tmp)
    if is_tfpack_saved_model(target):
        _keep_user_files(target, tmp, path)
    outputs.swap_in(tmp, target, aside=outputs.sibling(target, _OLD))
