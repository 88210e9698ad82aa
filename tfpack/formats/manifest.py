"""The on-disk format of packed outputs: atomic shards and a manifest written last.

A packed output is a directory::

    part-00000-of-00002.tfrecord   packs (tf.train.Example records)
    part-00001-of-00002.tfrecord
    plan.json, stats.json          optional files the manifest vouches for
    manifest.json                  written last: the output is complete iff it is valid

Every file is written under a temporary name starting with ``.tfpack-``,
flushed to disk (fsync) and renamed into place when complete
(`atomic_path`), so a crash leaves whole files or hidden temporaries, never a
truncated file under its final name. ``manifest.json`` (format
``"tfpack-packed"``, version 1)::

    {"format": "tfpack-packed", "version": 1, "tfpack_version": "0.1.0",
     "created_by": "tfpack pack",
     "shards": [{"name": "part-00000-of-00002.tfrecord", "records": 10,
                 "bytes": 40960, "sha256": "..."}, ...],
     "files": {"plan.json": {"bytes": 812, "sha256": "..."}, ...},
     "packs": 20, "sequences": 51, "tokens": 1203,
     "max_length": 64, "max_sequences_per_pack": 3, "max_predictions_per_pack": 12,
     "features": {"input_ids": {"dtype": "int64", "shape": [64]}, ...},
     "plan_sha256": "...", "seed": 0}

`verify` checks an output before anything reads it: a missing or incomplete
manifest, a missing shard, a shard of another size or checksum, or an extra
shard (a ``*.tfrecord`` or ``part-*`` file the manifest does not list) raises
`TfpackError` naming it. Writers outside ``tfpack pack`` (e.g. a Beam
pipeline) produce the same format with `atomic_path` for each shard and
`write_manifest` once every shard is complete.

Example:

>>> import os, tempfile, tensorflow as tf
>>> from tfpack.formats import manifest
>>> folder = tempfile.mkdtemp()
>>> with manifest.atomic_path(os.path.join(folder, "part-00000-of-00001.tfrecord")) as tmp:
...     with tf.io.TFRecordWriter(tmp) as writer:
...         writer.write(b"...")
>>> _ = manifest.write_manifest(folder, [("part-00000-of-00001.tfrecord", 1)],
...     features={"input_ids": ("int64", [8])}, max_length=8,
...     max_sequences_per_pack=2, max_predictions_per_pack=None, sequences=1, tokens=3)
>>> [os.path.basename(p) for p in manifest.verify(folder)]
['part-00000-of-00001.tfrecord']
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import secrets
from typing import Iterable, Iterator

from tfpack.errors import TfpackError
from tfpack.version import __version__

__all__ = [
    "FORMAT", "VERSION", "MANIFEST", "TEMP_PREFIX", "ShardInfo",
    "atomic_path", "write_atomic", "describe_file", "write_manifest", "read_manifest",
    "verify", "is_shard_name", "fsync_directory",
]

FORMAT = "tfpack-packed"
VERSION = 1
MANIFEST = "manifest.json"
# Every temporary file or folder tfpack creates starts with this; readers skip
# such entries and the next write into the directory removes them.
TEMP_PREFIX = ".tfpack-"
_REQUIRED = ("format", "version", "shards", "packs", "sequences", "max_length",
             "max_sequences_per_pack", "max_predictions_per_pack", "features")
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One shard as the manifest lists it: name, record count, size, sha256."""

    name: str
    records: int
    bytes: int
    sha256: str


def fsync_directory(directory: str) -> None:
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
    tmp = os.path.join(directory, f"{TEMP_PREFIX}tmp-{os.getpid()}-{secrets.token_hex(4)}-{name}")
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


def write_atomic(path: str, data: str | bytes) -> None:
    """Write a whole small file (JSON) atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def describe_file(path: str) -> tuple[int, str]:
    """``(size in bytes, sha256 hex)`` of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def is_shard_name(name: str) -> bool:
    """Names a reader would take for a shard: ``*.tfrecord*`` or ``part-*``."""
    return not name.startswith(".") and (".tfrecord" in name or name.startswith("part-"))


def write_manifest(
    directory: str,
    shards: Iterable[ShardInfo | tuple[str, int]],
    *,
    features: dict,
    max_length: int,
    max_sequences_per_pack: int,
    max_predictions_per_pack: int | None,
    sequences: int,
    tokens: int | None = None,
    files: Iterable[str] = (),
    seed: int | None = None,
    plan_sha256: str | None = None,
    created_by: str = "tfpack",
    extra: dict | None = None,
) -> dict:
    """Write ``directory/manifest.json`` (atomically) for complete shards; returns it.

    Call it last, once every shard (and every file in ``files``) is complete
    under its final name in ``directory``.

    Args:
        shards: `ShardInfo`, or ``(name, records)`` pairs whose size and
            sha256 are computed here; names relative to ``directory``.
        features: name -> ``(dtype, shape)`` or ``{"dtype":, "shape":}`` of
            each stored feature (dtype ``"int64"`` or ``"float32"``).
        max_length, max_sequences_per_pack, max_predictions_per_pack: ``L``,
            ``K``, ``M`` (``None`` without masked-LM features).
        sequences, tokens: real sequences and tokens in all packs.
        files: other files of ``directory`` to vouch for (``plan.json``, ...).
        seed, plan_sha256, created_by, extra: recorded as given.
    """
    listed = []
    for shard in shards:
        if not isinstance(shard, ShardInfo):
            name, records = shard
            size, sha = describe_file(os.path.join(directory, name))
            shard = ShardInfo(name, int(records), size, sha)
        listed.append(dataclasses.asdict(shard))
    names = [s["name"] for s in listed]
    if len(set(names)) != len(names) or any(os.sep in n or n == MANIFEST for n in names):
        raise TfpackError(f"Shard names must be distinct plain file names. Received: {names}")
    manifest = {
        "format": FORMAT, "version": VERSION, "tfpack_version": __version__,
        "created_by": created_by,
        "shards": listed,
        "files": {n: dict(zip(("bytes", "sha256"), describe_file(os.path.join(directory, n))))
                  for n in files},
        "packs": sum(s["records"] for s in listed),
        "sequences": int(sequences),
        "tokens": None if tokens is None else int(tokens),
        "max_length": int(max_length),
        "max_sequences_per_pack": int(max_sequences_per_pack),
        "max_predictions_per_pack": (None if max_predictions_per_pack is None
                                     else int(max_predictions_per_pack)),
        "features": {n: _feature(n, f) for n, f in sorted(features.items())},
        "seed": seed,
        "plan_sha256": plan_sha256,
        **(extra or {}),
    }
    write_atomic(os.path.join(directory, MANIFEST), json.dumps(manifest, indent=1) + "\n")
    return manifest


def _feature(name, spec) -> dict:
    dtype, shape = (spec["dtype"], spec["shape"]) if isinstance(spec, dict) else spec
    if dtype not in ("int64", "float32"):
        raise TfpackError(f"Feature dtypes must be 'int64' or 'float32'. Received: {name}={dtype}")
    return {"dtype": dtype, "shape": [int(d) for d in shape]}


def read_manifest(directory: str) -> dict:
    """The manifest of a packed output, checked for completeness (not the shards)."""
    path = os.path.join(directory, MANIFEST)
    what = "a complete tfpack output (its manifest.json is written last)"
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read())
    except FileNotFoundError:
        raise TfpackError(
            f"Packed data must be {what}. Received: {directory!r} has no {MANIFEST} "
            "(an interrupted run, or not written by tfpack)") from None
    except (OSError, ValueError) as error:
        raise TfpackError(f"Packed data must be {what}. Received: unreadable {path!r} "
                          f"({type(error).__name__}: {error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise TfpackError(f"{path!r} must be a tfpack manifest (format {FORMAT!r}). "
                          f"Received: format={getattr(manifest, 'get', dict)().get('format')!r}")
    if manifest.get("version") != VERSION:
        raise TfpackError(f"{path!r} must have version {VERSION} (this is tfpack "
                          f"{__version__}). Received: version={manifest.get('version')!r}")
    missing = [k for k in _REQUIRED if k not in manifest]
    shards = manifest.get("shards")
    if missing or not isinstance(shards, list) or not all(
            isinstance(s, dict) and {"name", "records", "bytes", "sha256"} <= set(s)
            for s in shards):
        raise TfpackError(f"{path!r} must be a complete manifest. Received: missing "
                          f"{missing or 'shard fields'}")
    return manifest


def verify(directory: str, files: Iterable[str] | None = None, *,
           checksums: bool = True) -> list[str]:
    """Check a packed output against its manifest; return its shard paths in order.

    Args:
        directory: the output directory.
        files: the shard paths a glob matched in ``directory``; they must be
            exactly the manifest's shards. ``None``: every shard-like file in
            the directory must be listed.
        checksums: also compare sha256 (reads every byte); sizes always.

    Raises:
        TfpackError: naming the missing, extra, truncated or corrupt file.
    """
    manifest = read_manifest(directory)
    listed = [s["name"] for s in manifest["shards"]]
    if files is None:
        present = {n for n in os.listdir(directory) if is_shard_name(n)}
    else:
        present = {os.path.basename(f) for f in files}
    extra = sorted(present - set(listed) - set(manifest.get("files", {})))
    if extra:
        raise TfpackError(
            f"Every shard must be listed in {os.path.join(directory, MANIFEST)!r}. Received: "
            f"extra file(s) {extra} (left by another run? pass the output directory)")
    if files is not None and set(listed) - present:
        raise TfpackError(
            f"The files must be all the shards of the output {directory!r}. Received: a "
            f"pattern without {sorted(set(listed) - present)} (pass the output directory)")
    entries = [(s["name"], s) for s in manifest["shards"]]
    entries += sorted(manifest.get("files", {}).items())
    for name, entry in entries:
        path = os.path.join(directory, name)
        try:
            size = os.path.getsize(path)
        except OSError:
            raise TfpackError(f"Every file listed in the manifest must exist. Received: "
                              f"{path!r} is missing") from None
        if size != entry["bytes"]:
            raise TfpackError(
                f"Every file must have the size its manifest records. Received: {path!r} "
                f"has {size} bytes, the manifest {entry['bytes']} (truncated or replaced)")
        if checksums and describe_file(path)[1] != entry["sha256"]:
            raise TfpackError(
                f"Every file must have the sha256 its manifest records. Received: {path!r} "
                "differs (corrupt or replaced)")
    return [os.path.join(directory, n) for n in listed]
