"""What the manifest records of one file: `ShardInfo` and `describe_file`.

Shared by the manifest (`tfpack.formats.manifest`, which lists them) and the
shard writer (`tfpack.formats.blocks`, which computes them as it writes);
standard library only, so neither imports the other for them.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "part-00000-of-00001.tfrecord")
>>> with open(path, "wb") as f:
...     _ = f.write(b"abc")
>>> describe_file(path)[0]
3
>>> ShardInfo("part-00000-of-00001.tfrecord", 1, 3, "0" * 64).to_json()["records"]
1
"""

from __future__ import annotations

import dataclasses
import hashlib

__all__ = ["ShardInfo", "describe_file"]

_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class ShardInfo:
    """One shard as the manifest lists it.

    Attributes:
        name: file name inside the output directory.
        records: packs in it.
        bytes, sha256: size and checksum of the whole file.
        block_records, blocks: records per block and the blocks' digests
            (`tfpack.formats.blocks`); ``None`` for shards written before
            block digests.
    """

    name: str
    records: int
    bytes: int
    sha256: str
    block_records: int | None = None
    blocks: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if v is not None or k not in ("block_records", "blocks")}


def describe_file(path: str) -> tuple[int, str]:
    """``(size in bytes, sha256 hex)`` of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
