"""Output directories: built beside, swapped in whole, leftovers cleaned by the next run.

`replacing_output` is how `tfpack pack` (`tfpack.data.pack_records`) writes
``OUT``, so that a crash at any point leaves the old output or the new one
readable under ``OUT``, never a mix:

1. Leftovers of killed runs into ``OUT`` are removed: sibling folders
   ``.tfpack-new-<name>-<pid>-<hex>`` and ``.tfpack-old-<name>-<pid>-<hex>``
   of processes no longer running, and hidden ``.tfpack-*`` entries inside
   ``OUT``. (If ``OUT`` is missing while a complete ``.tfpack-old-...`` exists,
   a swap was cut between its two renames: the old output is put back.)
2. ``OUT`` must then be missing or empty; with ``overwrite=True`` it may
   instead hold a previous tfpack output: a valid ``manifest.json`` and no
   file other than those it lists. Anything else: `TfpackError`, untouched.
3. The new output is written complete into ``.tfpack-new-<name>-...`` beside
   ``OUT`` (shards under temporary names, ``manifest.json`` last).
4. Commit (`swap_in`, also how `tfpack export` installs a SavedModel): one
   ``rename`` onto a missing or empty ``OUT``; over a previous output, an
   atomic exchange of the two directories (Linux
   ``renameat2(RENAME_EXCHANGE)``), then the old one is deleted. Where the
   exchange is not supported: ``OUT`` -> ``.tfpack-old-...``, new -> ``OUT``,
   delete the old (step 1 repairs a crash between the renames).

Example:

>>> import os, tempfile
>>> out = os.path.join(tempfile.mkdtemp(), "packed")
>>> with replacing_output(out) as staging:
...     with open(os.path.join(staging, "manifest.json"), "w") as f:
...         _ = f.write("{}")
>>> os.listdir(out)
['manifest.json']
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
from typing import Iterator

from tfpack.formats import manifest
from tfpack.errors import TfpackError

__all__ = ["replacing_output", "remove_leftovers", "swap_in"]

_SIBLING = re.compile(r"\.tfpack-(new|old)-(?P<name>.+)-(?P<pid>\d+)-[0-9a-f]{8}")
# Files a tfpack output may hold besides its shards (all vouched for by the manifest).
_OWN_FILES = {manifest.MANIFEST, "plan.json", "stats.json"}


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(output_dir: str) -> None:
    """Step 1: remove what killed runs into ``output_dir`` left behind."""
    output_dir = os.path.abspath(output_dir)
    parent, name = os.path.split(output_dir)
    if not os.path.isdir(parent):
        return
    dead = []
    for entry in sorted(os.listdir(parent)):
        match = _SIBLING.fullmatch(entry)
        if match and match["name"] == name and not _alive(int(match["pid"])):
            dead.append((match.group(1), os.path.join(parent, entry)))
    for kind, path in dead:
        if kind == "old" and not os.path.exists(output_dir) and _is_output(path):
            os.rename(path, output_dir)  # a swap cut between its renames: restore
        else:
            shutil.rmtree(path, ignore_errors=True)
    if os.path.isdir(output_dir):
        for entry in os.listdir(output_dir):
            if entry.startswith(manifest.TEMP_PREFIX):
                path = os.path.join(output_dir, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)


def _is_output(path: str) -> bool:
    try:
        manifest.read_manifest(path)
    except TfpackError:
        return False
    return True


def _check_replaceable(output_dir: str, overwrite: bool) -> bool:
    """Step 2; returns whether ``output_dir`` holds an output to replace."""
    if not os.path.exists(output_dir):
        return False
    if not os.path.isdir(output_dir):
        raise TfpackError(f"`output` must be a directory. Received: output={output_dir!r} "
                          "is a file")
    entries = sorted(os.listdir(output_dir))
    if not entries:
        return False
    if not overwrite:
        raise TfpackError(
            "`output` must be empty or missing (pass --overwrite to replace a previous "
            f"tfpack output). Received: output={output_dir!r} holding {_few(entries)}")
    try:
        found = manifest.read_manifest(output_dir)
    except TfpackError:
        raise TfpackError(
            "--overwrite replaces only a previous tfpack output (a directory with its "
            f"manifest.json). Received: output={output_dir!r} holding {_few(entries)}, "
            "no valid manifest.json") from None
    own = _OWN_FILES | {s["name"] for s in found["shards"]} | set(found.get("files", {}))
    foreign = [e for e in entries if e not in own]
    if foreign:
        raise TfpackError(
            "--overwrite replaces only a previous tfpack output. Received: "
            f"output={output_dir!r} also holding {_few(foreign)}, not written by tfpack")
    return True


def _few(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two entries of one directory (Linux renameat2); False where unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    rename_exchange = 2
    parent = os.open(os.path.dirname(a), os.O_RDONLY)
    try:
        return renameat2(parent, os.fsencode(os.path.basename(a)), parent,
                         os.fsencode(os.path.basename(b)), rename_exchange) == 0
    finally:
        os.close(parent)


def swap_in(new: str, path: str, *, aside: str) -> None:
    """Put the complete directory ``new`` at ``path``: readers see the old one or the new one.

    A rename onto a missing or empty ``path``; else an atomic exchange of the
    two directories and the old one deleted; where the exchange is not
    supported, ``path`` renamed to ``aside`` (a sibling name the caller's
    leftover cleanup recognises, to repair a crash between the two renames),
    ``new`` to ``path``, and ``aside`` deleted. The parent is synced last.

    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> for name in ("old", "new"):
    ...     os.makedirs(os.path.join(root, name))
    ...     open(os.path.join(root, name, name + ".txt"), "w").close()
    >>> swap_in(os.path.join(root, "new"), os.path.join(root, "old"),
    ...         aside=os.path.join(root, ".old-aside"))
    >>> os.listdir(os.path.join(root, "old")), sorted(os.listdir(root))
    (['new.txt'], ['old'])
    """
    if not os.path.exists(path) or (os.path.isdir(path) and not os.listdir(path)):
        os.rename(new, path)  # atomic; POSIX renames a directory over an empty one
    elif _exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # now the old one
    else:
        os.rename(path, aside)
        os.rename(new, path)
        shutil.rmtree(aside, ignore_errors=True)
    manifest.fsync_directory(os.path.dirname(os.path.abspath(path)))


@contextlib.contextmanager
def replacing_output(output_dir: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield an empty staging directory that becomes ``output_dir`` on success.

    Checks ``output_dir`` first (see the module docstring), so a refused
    output fails before any work. On an exception the staging directory is
    removed and ``output_dir`` is untouched.
    """
    output_dir = os.path.abspath(output_dir)
    parent, name = os.path.split(output_dir)
    staging = os.path.join(parent, f".tfpack-new-{name}-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.makedirs(parent, exist_ok=True)
        remove_leftovers(output_dir)
        _check_replaceable(output_dir, overwrite)
        os.mkdir(staging)
    except OSError as error:
        raise TfpackError(f"The folder of `output` must be writable (tfpack builds the output "
                          f"beside it). Received: output={output_dir!r} ({error.strerror}: "
                          f"{error.filename})") from None
    try:
        yield staging
        _check_replaceable(output_dir, overwrite)  # again: another run may have won
        old = os.path.join(parent, f".tfpack-old-{name}-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            swap_in(staging, output_dir, aside=old)
        except OSError as error:
            raise TfpackError(f"`output` must stay empty while tfpack writes it. Received: "
                              f"output={output_dir!r} ({error.strerror})") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
