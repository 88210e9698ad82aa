"""Output directories: built beside, swapped in whole; tfpack touches only what it wrote.

`replacing_output` is how every packed output is written (`tfpack pack` on
either engine, `tfpack.formats.write_packed`), so that a crash at any point leaves
the old output or the new one readable under ``OUT``, never a mix, and nothing
of the user's is ever changed:

0. ``OUT`` is resolved through symbolic links: a link to a directory keeps
   pointing there, and the target's content is what gets replaced.
1. Leftovers of killed runs into ``OUT`` are removed, and only those tfpack
   can prove it wrote (`remove_leftovers`): sibling folders
   ``.tfpack-new-<name>-<pid>-<token>`` / ``.tfpack-old-<name>-<pid>-<token>``
   of a process no longer running that hold either the owner record
   ``.tfpack-owner.json`` carrying the same random token, or a complete tfpack
   output. (If ``OUT`` is missing while such a complete ``.tfpack-old-...``
   exists, a swap was cut between its two renames: the old output is put
   back.) Nothing inside ``OUT`` is ever removed as a leftover.
2. ``OUT`` must then be missing or empty; with ``overwrite=True`` it may
   instead hold a previous tfpack output: a valid ``manifest.json`` whose
   listed files are all there at their recorded sizes, and no other entry.
   Anything else (a user's file, a foreign ``manifest.json``): `TfpackError`,
   untouched.
3. The new output is written complete into ``.tfpack-new-<name>-...`` beside
   ``OUT`` (owner record first, shards under temporary names,
   ``manifest.json`` last, owner record removed).
4. Commit (`swap_in`, also how `tfpack export` installs a SavedModel): one
   ``rename`` onto a missing or empty ``OUT``; over a previous output, an
   atomic exchange of the two directories (Linux
   ``renameat2(RENAME_EXCHANGE)``), then the old one is deleted. Where the
   exchange is not supported: ``OUT`` -> ``.tfpack-old-...``, new -> ``OUT``,
   delete the old (step 1 repairs a crash between the renames). The new
   directory takes the permission bits of the one it replaces.

Folders that step 0 had to create for ``OUT`` are removed again when the
write fails, so a refused or failed write leaves nothing behind.

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
import errno
import json
import os
import re
import secrets
import shutil
import stat
from typing import Callable, Iterator

from tfpack.formats import manifest
from tfpack.errors import TfpackError

__all__ = ["replacing_output", "remove_leftovers", "swap_in", "discard", "sibling",
           "make_owned", "release", "is_output", "OWNER"]

# Inside a directory tfpack is building: {"pid": ..., "token": ...}, the token of its name.
OWNER = ".tfpack-owner.json"
_SIBLING = re.compile(r"\.tfpack-(?P<kind>new|old|export-partial|export-old)-(?P<name>.+)"
                      r"-(?P<pid>\d+)-(?P<token>[0-9a-f]{16})")
# Files a tfpack output may hold besides its shards (all vouched for by the manifest).
_OWN_FILES = {manifest.MANIFEST, "plan.json", "stats.json"}


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def sibling(target: str, kind: str) -> str:
    """A fresh hidden name beside ``target``: ``.tfpack-<kind>-<name>-<pid>-<random token>``.

    ``<name>`` is `_sibling_key` of the target's name: the name itself, or for a
    long one (which the file system takes, but not with the rest around it) its
    start and a hash of the whole.
    """
    parent, name = os.path.split(target)
    return os.path.join(parent, f".tfpack-{kind}-{_sibling_key(name)}-{os.getpid()}-"
                                f"{secrets.token_hex(8)}")


# The longest sibling name around its key: ".tfpack-export-partial-" + "-<10-digit pid>-<16 hex>".
_SIBLING_ROOM = 255 - len(".tfpack-export-partial-") - len("-0123456789-") - 16


def _sibling_key(name: str) -> str:
    """``name``, or where a sibling name would pass 255 bytes, its start, "~" and 12 hex
    digits of its SHA-256 (the same for the same name: `remove_leftovers` finds it)."""
    if len(os.fsencode(name)) <= _SIBLING_ROOM:
        return name
    import hashlib

    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:12]
    start = name
    while len(os.fsencode(start)) > _SIBLING_ROOM - 13:
        start = start[:-1]
    return f"{start}~{digest}"


def make_owned(path: str) -> str:
    """Create the directory ``path`` (a `sibling` name) with its owner record inside."""
    token = _SIBLING.fullmatch(os.path.basename(path))["token"]
    # Private while it is built (whatever the umask): run state kept there (a Beam run's
    # plan and scans) cannot be planted by another user. `release` opens it as usual.
    os.mkdir(path, 0o700)
    os.chmod(path, 0o700)
    with open(os.path.join(path, OWNER), "w") as f:
        json.dump({"pid": os.getpid(), "token": token}, f)
    return path


def release(path: str) -> None:
    """Remove the owner record of ``path`` (just before it is committed) and give it the
    mode a new folder gets under the umask."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(path, OWNER))
    mask = os.umask(0o022)
    os.umask(mask)
    with contextlib.suppress(OSError):
        os.chmod(path, 0o777 & ~mask)


def _owner_token(path: str) -> str | None:
    try:
        with open(os.path.join(path, OWNER)) as f:
            record = json.load(f)
        return record.get("token") if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def is_output(path: str) -> bool:
    """Whether ``path`` holds a complete tfpack packed output (a valid manifest)."""
    try:
        manifest.read_manifest(path)
    except Exception:  # noqa: BLE001 - any unreadable or foreign manifest: not ours
        return False
    return True


def remove_leftovers(target: str, *, kinds=("new", "old"),
                     complete: Callable[[str], bool] = is_output) -> None:
    """Step 1: remove what killed runs into ``target`` provably left behind.

    A sibling counts when its name is a `sibling` name of ``target`` of one of
    ``kinds``, its process is gone, and it is a real directory holding the
    owner record with its name's token or a complete output (``complete``),
    or nothing at all (a `discard` cut before its last step).
    An ``*old`` one is put back at ``target`` when ``target`` is missing.
    """
    parent, name = os.path.split(target)
    try:
        entries = sorted(os.listdir(parent))
    except OSError:
        return
    for entry in entries:
        match = _SIBLING.fullmatch(entry)
        if not match or match["name"] != _sibling_key(name) or match["kind"] not in kinds:
            continue
        path = os.path.join(parent, entry)
        if (_alive(int(match["pid"])) or os.path.islink(path) or not os.path.isdir(path)):
            continue
        whole = complete(path)
        if not whole and _owner_token(path) != match["token"] and os.listdir(path):
            continue  # not provably tfpack's (nor empty): left as it is
        if match["kind"].endswith("old") and whole and not os.path.lexists(target):
            os.rename(path, target)  # a swap cut between its renames: restore
        else:
            discard(path)


def discard(path: str) -> None:
    """Delete ``path``, a `sibling` folder holding what a swap replaced, so that a kill at
    any point leaves a folder `remove_leftovers` removes.

    The replaced output is complete (so provably tfpack's) until the first file goes;
    the owner record is put in first, atomically, so the rest goes while the record
    proves the folder tfpack's, and taken out last, just before the empty folder.
    """
    if os.path.islink(path) or not os.path.isdir(path):
        return
    match = _SIBLING.fullmatch(os.path.basename(path))
    if match is None:
        shutil.rmtree(path, ignore_errors=True)
        return
    record = os.path.join(path, OWNER)
    with open(record + ".tmp", "w") as f:
        json.dump({"pid": os.getpid(), "token": match["token"]}, f)
    os.replace(record + ".tmp", record)
    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if entry == OWNER:
            continue
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(full)
    with contextlib.suppress(OSError):
        os.remove(record)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _check_replaceable(output_dir: str, overwrite: bool, shown: str) -> bool:
    """Step 2; returns whether ``output_dir`` holds an output to replace."""
    if not os.path.lexists(output_dir):
        return False
    if not os.path.isdir(output_dir):
        raise TfpackError(f"`output` must be a directory. Received: output={shown!r} "
                          "is a file")
    entries = sorted(os.listdir(output_dir))
    if not entries:
        return False
    if not overwrite:
        raise TfpackError(
            "`output` must be empty or missing (pass --overwrite to replace a previous "
            f"tfpack output). Received: output={shown!r} holding {_few(entries)}")
    try:
        found = manifest.read_manifest(output_dir)
        own = _OWN_FILES | {s["name"] for s in found["shards"]} | set(found.get("files") or {})
    except Exception:  # noqa: BLE001 - a foreign or damaged manifest.json is not tfpack's
        raise TfpackError(
            "--overwrite replaces only a previous tfpack output (a directory with its "
            f"manifest.json). Received: output={shown!r} holding {_few(entries)}, "
            "no valid manifest.json of tfpack's") from None
    foreign = [e for e in entries if e not in own]
    if foreign:
        raise TfpackError(
            "--overwrite replaces only a previous tfpack output. Received: "
            f"output={shown!r} also holding {_few(foreign)}, not written by tfpack")
    try:
        manifest.verify(output_dir, checksums=False)
    except Exception as error:  # noqa: BLE001 - its files are not the ones tfpack wrote
        raise TfpackError(
            "--overwrite replaces only a previous tfpack output whose files are the ones "
            f"its manifest lists. Received: output={shown!r} "
            f"({' '.join(str(error).split())})") from None
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

    ``path`` must be a real directory path (resolve links first: a link is
    replaced, not followed). A rename onto a missing or empty ``path``; else
    an atomic exchange of the two directories and the old one deleted; where
    the exchange is not supported, ``path`` renamed to ``aside`` (a sibling
    name the caller's leftover cleanup recognises, to repair a crash between
    the two renames), ``new`` to ``path``, and ``aside`` deleted. ``new``
    takes the permission bits of the directory it replaces. The parent is
    synced last.

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
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(new, stat.S_IMODE(os.stat(path).st_mode))
    if not os.path.lexists(path) or (os.path.isdir(path) and not os.path.islink(path)
                                     and not os.listdir(path)):
        os.rename(new, path)  # atomic; POSIX renames a directory over an empty one
    elif _exchange(new, path):
        discard(new)  # now the old one
    else:
        os.rename(path, aside)
        os.rename(new, path)
        discard(aside)
    manifest.fsync_directory(os.path.dirname(os.path.abspath(path)))


# What a file system says when it has no room (or no quota, or no file that large) left.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _write_failure(error: BaseException, shown: str) -> TfpackError | None:
    """One line for a system failure while the output is built; None if it is not one.

    A full disk (ENOSPC, a quota, TensorFlow's ResourceExhaustedError) says so;
    any other (an input removed mid-run, memory, permissions, I/O) names its
    own cause and file, not a full disk.
    """
    import sys

    tf = sys.modules.get("tensorflow")
    if isinstance(error, OSError):
        why = f"{type(error).__name__}: {error.strerror or error}"
        no_room = error.errno in _NO_ROOM
        if error.filename and not no_room:
            why += f": {error.filename}"
    elif tf is not None and isinstance(error, tf.errors.OpError):
        why = f"{type(error).__name__}: {' '.join(str(error.message).split())[:300]}"
        no_room = isinstance(error, tf.errors.ResourceExhaustedError)
    else:
        return None
    # One line whatever the error holds: a file name may hold a newline, a library's text several.
    why = re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], why)
    if no_room:
        return TfpackError("`output` must be on a file system with room for the whole output. "
                           f"Received: output={shown!r} ({why})")
    return TfpackError(f"`output` was not written (nothing was left there): the job failed with {why}. "
                       f"Received: output={shown!r}")


def _missing_ancestors(path: str) -> list[str]:
    """The folders above ``path`` that do not exist yet, outermost first."""
    missing = []
    parent = os.path.dirname(path)
    while parent and not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    return missing[::-1]


def _remove_created(folders: list[str]) -> None:
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only while still empty


@contextlib.contextmanager
def replacing_output(output_dir: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield an empty staging directory that becomes ``output_dir`` on success.

    Checks ``output_dir`` first (see the module docstring), so a refused
    output fails before any work. On an exception the staging directory (and
    any folder created for ``output_dir``) is removed and ``output_dir`` is
    untouched.
    """
    shown = os.fspath(output_dir)
    target = os.path.realpath(shown)  # through links: the link stays, its target is replaced
    parent = os.path.dirname(target)
    staging = sibling(target, "new")
    created = _missing_ancestors(target)
    try:
        os.makedirs(parent, exist_ok=True)
        remove_leftovers(target)
        _check_replaceable(target, overwrite, shown)
        make_owned(staging)
    except OSError as error:
        _remove_created(created)
        raise TfpackError(f"The folder of `output` must be writable (tfpack builds the output "
                          f"beside it). Received: output={shown!r} ({error.strerror}: "
                          f"{error.filename})") from None
    except BaseException:
        _remove_created(created)
        raise
    try:
        try:
            yield staging
        except Exception as error:  # noqa: BLE001 - bad input is a TfpackError already
            failure = _write_failure(error, shown)
            if failure is None:
                raise
            raise failure from None
        release(staging)
        _check_replaceable(target, overwrite, shown)  # again: another run may have won
        try:
            swap_in(staging, target, aside=sibling(target, "old"))
        except OSError as error:
            raise TfpackError(f"`output` must stay empty while tfpack writes it. Received: "
                              f"output={shown!r} ({error.strerror})") from None
    except BaseException:
        discard(staging)
        _remove_created(created)
        raise
