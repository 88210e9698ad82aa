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
     "created_by": "tfpack pack", "generation": "9f2c...",
     "shards": [{"name": "part-00000-of-00002.tfrecord", "records": 10,
                 "bytes": 40960, "sha256": "...",
                 "block_records": 4, "blocks": "<16 hex characters a block>"}, ...],
     "files": {"plan.json": {"bytes": 812, "sha256": "..."}, ...},
     "packs": 20, "sequences": 51, "tokens": 1203,
     "max_length": 64, "max_sequences_per_pack": 3, "max_predictions_per_pack": 12,
     "features": {"input_ids": {"dtype": "int64", "shape": [64]}, ...},
     "plan_sha256": "...", "seed": 0}

`read_manifest` validates the manifest against its schema in one place
(`check`): the right format and version, distinct plain shard names inside
the directory, non-negative integer counts that add up to ``packs``,
features of known dtypes and valid shapes consistent with ``L``/``K``/``M``
and the feature contract; any other JSON gives one `TfpackError` naming the
file and what is wrong. `check_files` compares the directory with it in
metadata time (sizes, extra or missing shards). Each shard's ``blocks``
(`tfpack.formats.blocks`) let the reader check every block of records as it
reads it; ``generation`` is a random id of this write, so a reader can say
which output it opened. Outputs written before block digests (no
``blocks``) are checked whole by `verify` (sha256 of every shard) before
they are read. Writers outside ``tfpack pack`` (e.g. a Beam pipeline)
produce the same format with `atomic_path` for each shard and
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

import json
import math
import os
import re
import secrets
from typing import Iterable

from tfpack import features as contract
from tfpack.atomic import TEMP_PREFIX, atomic_path, fsync_directory, write_atomic
from tfpack.errors import TfpackError
from tfpack.formats.shard_info import ShardInfo, describe_file
from tfpack.version import __version__

__all__ = [
    "FORMAT", "VERSION", "MANIFEST", "TEMP_PREFIX", "ShardInfo",
    "atomic_path", "write_atomic", "describe_file", "write_manifest", "read_manifest",
    "check", "check_files", "verify", "is_shard_name", "fsync_directory",
]

FORMAT = "tfpack-packed"
VERSION = 1
MANIFEST = "manifest.json"
_REQUIRED = ("format", "version", "shards", "packs", "sequences", "max_length",
             "max_sequences_per_pack", "max_predictions_per_pack", "features")
_DTYPES = ("int64", "float32")
_DIGEST = 16  # hex characters of one block digest
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"(?:[0-9a-f]{16})*")


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
    under its final name in ``directory``. The manifest is checked (`check`)
    before it is written.

    Args:
        shards: `ShardInfo` (from `tfpack.formats.blocks.ShardWriter`), or
            ``(name, records)`` pairs whose size, sha256 and block digests
            are computed here (one read of the shard); names relative to
            ``directory``.
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
            from tfpack.formats import blocks  # TensorFlow: only for shards to digest here

            name, records = shard
            shard = blocks.describe_shard(os.path.join(directory, name), int(records))
        listed.append(shard.to_json())
    manifest = {
        "format": FORMAT, "version": VERSION, "tfpack_version": __version__,
        "created_by": created_by,
        # A new id for every write: which output a reader opened, in its errors.
        "generation": secrets.token_hex(8),
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
    path = os.path.join(directory, MANIFEST)
    check(manifest, path)
    write_atomic(path, json.dumps(manifest, indent=1) + "\n")
    return manifest


def _feature(name, spec) -> dict:
    dtype, shape = (spec["dtype"], spec["shape"]) if isinstance(spec, dict) else spec
    if dtype not in _DTYPES:
        raise TfpackError(f"Feature dtypes must be 'int64' or 'float32'. Received: {name}={dtype}")
    return {"dtype": dtype, "shape": [int(d) for d in shape]}


def read_manifest(directory: str) -> dict:
    """The manifest of a packed output, validated (`check`); the shards are not read."""
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
        message = str(error).splitlines()[0] if str(error) else ""
        raise TfpackError(f"Packed data must be {what}. Received: unreadable {path!r} "
                          f"({type(error).__name__}: {message})") from None
    check(manifest, path)
    return manifest


def _is_int(value, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _plain(name) -> bool:
    """A file name inside the directory: no separators, no ``..``, not hidden."""
    return (isinstance(name, str) and name not in ("", ".", "..", MANIFEST)
            and not name.startswith(".") and "/" not in name and "\\" not in name
            and os.sep not in name and "\0" not in name and name == name.strip())


def check(manifest, path: str = MANIFEST) -> None:
    """Validate a parsed manifest against the schema; `TfpackError` names what is wrong.

    ``path`` names the file in the message. One line whatever the JSON holds.
    """
    def bad(what: str, received) -> None:
        text = received if isinstance(received, str) else repr(received)
        if len(text) > 200:
            text = text[:200] + "..."
        raise TfpackError(f"{path!r} must be a tfpack manifest with {what}. Received: {text}")

    if not isinstance(manifest, dict):
        bad("a JSON object at the top", f"a JSON {type(manifest).__name__}")
    if manifest.get("format") != FORMAT:
        bad(f"format {FORMAT!r}", f"format={manifest.get('format')!r}")
    if manifest.get("version") != VERSION or isinstance(manifest.get("version"), bool):
        bad(f"version {VERSION} (this is tfpack {__version__})",
            f"version={manifest.get('version')!r}")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        bad("every field", f"missing {missing}")
    shards = manifest["shards"]
    if not isinstance(shards, list):
        bad("`shards` a list", f"shards={shards!r}")
    names = set()
    for i, shard in enumerate(shards):
        _check_shard(f"shards[{i}]", shard, names, bad)
    _check_file_entries(manifest.get("files", {}), names, bad)
    packs = manifest["packs"]
    if not _is_int(packs) or packs != sum(s["records"] for s in shards):
        bad("`packs` equal to the sum of the shards' `records`",
            f"packs={packs!r}, shards {sum(s['records'] for s in shards)}")
    for key in ("sequences", "tokens"):
        value = manifest.get(key)
        if not _is_int(value) and not (key == "tokens" and value is None):
            bad(f"a non-negative integer `{key}`", f"{key}={value!r}")
    # An output holds one-row packs: [L], [K] and [M] (pair packs' Le, Ld are not stored).
    L, K, M = (manifest[contract.DIMENSIONS[d]] for d in ("L", "K", "M"))
    if not _is_int(L, 1):
        bad("a positive integer `max_length`", f"max_length={L!r}")
    if not _is_int(K):
        bad("a non-negative integer `max_sequences_per_pack`", f"max_sequences_per_pack={K!r}")
    if M is not None and not _is_int(M):
        bad("`max_predictions_per_pack` null or a non-negative integer",
            f"max_predictions_per_pack={M!r}")
    if manifest.get("batch_size") is not None and not _is_int(manifest["batch_size"], 1):
        bad("`batch_size` null or a positive integer", f"batch_size={manifest['batch_size']!r}")
    generation = manifest.get("generation")
    if generation is not None and (not isinstance(generation, str) or not generation.isalnum()):
        bad("`generation` a string of letters and digits", f"generation={generation!r}")
    _check_features(manifest["features"], {"L": L, "K": K, "M": M}, bad)


def _check_shard(where: str, shard, names: set, bad) -> None:
    """One entry of ``shards``; its name joins ``names`` (which must not hold it yet)."""
    if not isinstance(shard, dict):
        bad("shards as objects", f"{where}={shard!r}")
    lacking = [k for k in ("name", "records", "bytes", "sha256") if k not in shard]
    if lacking:
        bad("`name`, `records`, `bytes` and `sha256` for every shard",
            f"{where} without {lacking}")
    name = shard["name"]
    if not _plain(name):
        bad("shard names that are plain file names inside the output directory",
            f"{where}.name={name!r}")
    if name in names:
        bad("distinct shard names", f"{name!r} listed twice")
    names.add(name)
    for key in ("records", "bytes"):
        if not _is_int(shard[key]):
            bad(f"a non-negative integer `{key}` for every shard",
                f"{where}.{key}={shard[key]!r}")
    if not isinstance(shard["sha256"], str) or not _SHA256.fullmatch(shard["sha256"]):
        bad("a sha256 (64 hex digits) for every shard", f"{where}.sha256={shard['sha256']!r}")
    if ("blocks" in shard) != ("block_records" in shard):
        bad("both `block_records` and `blocks` or neither", f"{where} keys {sorted(shard)}")
    if "blocks" in shard:
        if not _is_int(shard["block_records"], 1):
            bad("a positive integer `block_records`",
                f"{where}.block_records={shard['block_records']!r}")
        blocks = shard["blocks"]
        want = math.ceil(shard["records"] / shard["block_records"])
        if not isinstance(blocks, str) or not _HEX.fullmatch(blocks) \
                or len(blocks) != want * _DIGEST:
            bad(f"one 16-hex-digit digest per block of `block_records` records ({want} "
                f"for {where})", f"{where}.blocks={blocks!r}")


def _check_file_entries(files, names: set, bad) -> None:
    """``files``: plain names apart from the shards, each with its bytes and sha256."""
    if not isinstance(files, dict):
        bad("`files` an object", f"files={files!r}")
    for name, entry in files.items():
        if not _plain(name) or name in names:
            bad("`files` names that are plain file names, distinct from the shards",
                f"files name {name!r}")
        if not isinstance(entry, dict) or not _is_int(entry.get("bytes")) \
                or not isinstance(entry.get("sha256"), str) \
                or not _SHA256.fullmatch(entry["sha256"]):
            bad("`bytes` and `sha256` for every file", f"files[{name!r}]={entry!r}")


def _check_features(features, sizes: dict, bad) -> None:
    if not isinstance(features, dict) or not features:
        bad("`features` a non-empty object", f"features={features!r}")
    for name, spec in features.items():
        if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES \
                or not isinstance(spec.get("shape"), list) \
                or not all(_is_int(d) for d in spec["shape"]):
            bad("every feature as {\"dtype\": \"int64\" or \"float32\", \"shape\": [sizes]}",
                f"features[{name!r}]={spec!r}")
        if name not in contract.names():
            continue  # a user's own feature (write_packed): dtype and shape only
        dtype = "float32" if contract.dtype_of(name).startswith("float") else "int64"
        if spec["dtype"] != dtype:
            bad(f"the contract's stored dtype for {name!r} ({dtype})",
                f"features[{name!r}].dtype={spec['dtype']!r}")
        dimension = contract.dimension_of(name)
        if dimension is None:
            continue
        size = sizes.get(dimension)
        if size is None or spec["shape"] != [size]:
            bad(f"{name!r} of shape [{dimension}] = [{contract.DIMENSIONS[dimension]}]",
                f"features[{name!r}].shape={spec['shape']!r}, "
                f"{contract.DIMENSIONS[dimension]}={size!r}")


def check_files(directory: str, manifest: dict, files: Iterable[str] | None = None) -> list[str]:
    """Compare a directory with its manifest in metadata time; return the shard paths.

    Every listed file must exist with its recorded size (one ``stat`` each);
    no unlisted shard-like file may sit beside them. The small ``files``
    (``plan.json``, ``stats.json``) are also compared by sha256.

    Args:
        directory: the output directory.
        manifest: its validated manifest (`read_manifest`).
        files: the shard paths a glob matched in ``directory``; they must be
            exactly the manifest's shards. ``None``: every shard-like file in
            the directory must be listed.

    Raises:
        TfpackError: naming the missing, extra or truncated file.
    """
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
    entries = [(s["name"], s, False) for s in manifest["shards"]]
    entries += [(n, e, True) for n, e in sorted(manifest.get("files", {}).items())]
    for name, entry, small in entries:
        path = os.path.join(directory, name)
        try:
            size = os.stat(path).st_size
        except OSError:
            raise TfpackError(f"Every file listed in the manifest must exist. Received: "
                              f"{path!r} is missing") from None
        if size != entry["bytes"]:
            raise TfpackError(
                f"Every file must have the size its manifest records. Received: {path!r} "
                f"has {size} bytes, the manifest {entry['bytes']} (truncated or replaced)")
        if small and describe_file(path)[1] != entry["sha256"]:
            _differs(path)
    return [os.path.join(directory, n) for n in listed]


def _differs(path: str) -> None:
    raise TfpackError(f"Every file must have the sha256 its manifest records. Received: "
                      f"{path!r} differs (corrupt or replaced)")


def verify(directory: str, files: Iterable[str] | None = None, *,
           checksums: bool = True) -> list[str]:
    """Check a packed output whole against its manifest; return its shard paths in order.

    `read_manifest` and `check_files`, then (``checksums``) the sha256 of
    every shard, which reads every byte: the check of outputs written before
    block digests, and of anyone who wants the whole output checked now.

    Raises:
        TfpackError: naming the missing, extra, truncated or corrupt file.
    """
    manifest = read_manifest(directory)
    paths = check_files(directory, manifest, files)
    if checksums:
        for path, shard in zip(paths, manifest["shards"]):
            if describe_file(path)[1] != shard["sha256"]:
                _differs(path)
    return paths
