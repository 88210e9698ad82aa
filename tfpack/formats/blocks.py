"""Block digests: each shard checked in the same pass that reads it.

A shard is a sequence of *blocks* of ``block_records`` consecutive records
(the last block may be shorter), about `BLOCK_BYTES` each. The writer
(`ShardWriter`) records one 64-bit digest per block in the manifest; the
reader (`tfpack.formats.packed.read_packed`) batches each shard's records
into the same blocks, computes the same digest in the tf.data graph and
releases a block's records only when its digest and record count match the
manifest's. A damaged, truncated, extended or replaced shard therefore
fails at its first bad block, before any record of that block reaches a
model, and no byte is read twice.

The digest of a block is FarmHash64 (`tf.fingerprint`) of the concatenated
FarmHash64 fingerprints of its serialized records: order-sensitive, record
boundaries included, computed by the same function on both sides (it runs
eagerly in the writer and in the graph in the reader). It detects damage and
replacement, not an adversary who also rewrites the manifest (that is what
the manifest's whole-shard ``sha256`` is for). In the manifest each shard's
digests are one hex string, 16 characters a block.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "part-0.tfrecord")
>>> with ShardWriter(path, block_bytes=100) as writer:
...     for record in [b"a" * 30, b"b" * 30, b"c" * 30]:
...         writer.write(record)
>>> writer.records, writer.block_records, len(writer.blocks) // 16
(3, 2, 2)
>>> writer.blocks[:16] == digest_hex([b"a" * 30, b"b" * 30])
True
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.formats.shard_info import ShardInfo, describe_file
from tfpack.formats.protos import frame

__all__ = ["BLOCK_BYTES", "ShardWriter", "describe_shard", "digest", "digest_hex",
           "digests_from_hex"]

# About this many bytes of records per block: small enough that holding a block
# back until it is checked costs nothing, large enough that the manifest stays
# small (16 hex characters per MiB of data).
BLOCK_BYTES = 1 << 20
_FRAMING = 16  # TFRecord framing around each record: length, two CRCs


def digest(records: tf.Tensor) -> tf.Tensor:
    """The int64 digest of a block: ``records`` a 1-D string tensor (eager or graph)."""
    each = tf.fingerprint(records)  # [n, 8] uint8, FarmHash64 of each record
    return tf.bitcast(tf.fingerprint(tf.reshape(each, [1, -1]))[0], tf.int64)


def digest_hex(records: list[bytes]) -> str:
    """`digest` of a list of records as the manifest stores it (16 hex characters)."""
    value = digest(tf.constant(records, tf.string)).numpy()
    return np.array([value], "<i8").tobytes().hex()


def digests_from_hex(text: str) -> np.ndarray:
    """The int64 digests of a manifest's ``blocks`` string."""
    return np.frombuffer(bytes.fromhex(text), "<i8").astype(np.int64)


class ShardWriter:
    """A TFRecord file writer that also records the shard's block digests.

    It writes the bytes `tf.io.TFRecordWriter` writes (the framing of
    `tfpack.formats.protos.frame`). The first record fixes ``block_records``
    (about ``block_bytes`` per block; packs have fixed shapes, so records
    have similar sizes) unless it is given. After
    `close` (or the ``with`` block): ``records``, ``block_records`` and
    ``blocks`` (the manifest's hex string).
    """

    def __init__(self, path: str, *, block_bytes: int | None = None,
                 block_records: int | None = None):
        self._file = open(path, "wb")
        self._sha256 = hashlib.sha256()  # of the bytes written: no second read for the manifest
        self._size = 0
        self._block_bytes = int(block_bytes or BLOCK_BYTES)
        self._pending: list[np.ndarray] = []  # record fingerprints of the open block
        self._pending_count = 0
        self._digests: list[str] = []
        self.records = 0
        self.block_records: int | None = block_records
        self.blocks = ""

    def write(self, record: bytes) -> None:
        self.write_many([record])

    def write_many(self, records: list[bytes]) -> None:
        """Write ``records`` in order; their fingerprints are taken in one call."""
        if records:
            self._add(records, frame(records))

    def write_framed(self, data: bytes, sizes: np.ndarray) -> None:
        """Write records already framed back to back in ``data`` (`tfpack.formats.protos.encode`
        with ``framed=True``), ``sizes`` their unframed sizes."""
        if not len(sizes):
            return
        starts = np.cumsum(np.asarray(sizes, np.int64) + _FRAMING) - sizes - 4
        self._add([data[start:start + size] for start, size in zip(starts.tolist(),
                                                                   sizes.tolist())], data)

    def _add(self, records: list[bytes], framed: bytes) -> None:
        if self.block_records is None:
            self.block_records = max(1, self._block_bytes // (len(records[0]) + _FRAMING))
        each = tf.fingerprint(tf.constant(records, tf.string)).numpy()  # [n, 8] uint8
        self._file.write(framed)
        self._sha256.update(framed)
        self._size += len(framed)
        self.records += len(records)
        start = 0
        while start < len(records):
            take = min(len(records) - start, self.block_records - self._pending_count)
            self._pending.append(each[start:start + take])
            self._pending_count += take
            start += take
            if self._pending_count == self.block_records:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            each = np.concatenate(self._pending)
            value = tf.bitcast(tf.fingerprint(each.reshape(1, -1))[0], tf.int64).numpy()
            self._digests.append(np.array([value], "<i8").tobytes().hex())
            self._pending, self._pending_count = [], 0

    def close(self) -> None:
        self._flush()
        self._file.close()
        self.blocks = "".join(self._digests)
        if self.block_records is None:  # an empty shard: no blocks
            self.block_records = 1

    def shard_info(self, path: str) -> ShardInfo:
        """The manifest entry of the closed shard, now complete at ``path``.

        Its size and sha256 are those of the bytes written; a file at ``path``
        of another size (not this writer's) raises `TfpackError`.
        """
        if os.path.getsize(path) != self._size:
            raise TfpackError(f"A shard must be the file its writer wrote. Received: {path!r} "
                              f"has {os.path.getsize(path)} bytes, the writer wrote {self._size}")
        return ShardInfo(os.path.basename(path), self.records, self._size,
                         self._sha256.hexdigest(), self.block_records, self.blocks)

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self._file.close()


def describe_shard(path: str, records: int, *, block_bytes: int | None = None) -> ShardInfo:
    """The manifest entry of a complete shard written without `ShardWriter` (reads it once).

    Raises:
        TfpackError: the shard does not hold ``records`` records.
    """
    writer = ShardWriter(os.devnull, block_bytes=block_bytes)
    for batch in tf.data.TFRecordDataset(path).batch(1024):
        writer.write_many(batch.numpy().tolist())
    writer.close()
    if writer.records != records:
        raise TfpackError(f"A shard must hold the records its writer counted. Received: "
                          f"{path!r} holds {writer.records}, the writer said {records}")
    size, sha256 = describe_file(path)
    return ShardInfo(os.path.basename(path), records, size, sha256, writer.block_records,
                     writer.blocks)
