"""Fast serialization of many `tf.train.Example` records with fixed-shape features.

Building `tf.train.Example` messages in Python costs about 50 µs per feature
of a few hundred values; writing millions of packs that way would dominate
``tfpack pack``. The compiled `tfpack.formats._wire` writes the same protobuf
wire format for a whole batch of records in one call (and, for shards, their
TFRecord framing with its CRC-32C). The layout, per record::

    Example  = 0x0a len(Features) Features
    Features = for each feature, in sorted name order:
               0x0a len(entry) [0x0a len(key) key 0x12 len(Feature) Feature]
    Feature  = 0x1a (int64_list) or 0x12 (float_list) len(list) list
    list     = 0x0a len(values) values   (packed; nothing for no values)

Int values are varints (negative ones as 10-byte two's complement, uint64
wrapping to int64 like a C cast), float values little-endian float32. The
bytes are those of ``SerializeToString(deterministic=True)`` and parse with
`tf.io.parse_example` and `tf.train.Example.FromString`.

Two ways in: `encode_examples` takes dense ``[P, ...]`` arrays, one row per
record. `encode` takes `Column` s, which build each record's row from
*members* (runs of values taken from flat arrays, shifted, counted, padded):
the local packer serializes packs straight from the examples it spilled,
without building the dense pack arrays first (`tfpack.engines.columns`).

Example:

>>> import numpy as np, tensorflow as tf
>>> (record,) = encode_examples({"ids": np.array([[1, 300, -100]])})
>>> list(tf.train.Example.FromString(record).features.feature["ids"].int64_list.value)
[1, 300, -100]
>>> # One record from two members: [5, 6] then [7], padded with -1 to 4 values.
>>> data, sizes = encode(np.array([0, 2]), [Column(
...     "ids", 4, padding=-1, values=np.array([5, 6, 7], np.int32),
...     starts=np.array([0, 2]), runs=np.array([2, 1]))])
>>> list(tf.train.Example.FromString(data).features.feature["ids"].int64_list.value)
[5, 6, 7, -1]
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.formats.compiled import wire as _wire

__all__ = ["Column", "encode", "encode_examples", "frame", "record_batches", "RecordError"]

_READ = 1 << 23  # bytes read at a time by `record_batches`


class RecordError(ValueError):
    """A TFRecord file that cannot be read: a corrupted or truncated record.

    Attributes:
        records: the records read before the bad one.
    """

    def __init__(self, message: str, records: int):
        super().__init__(message)
        self.records = records


@dataclasses.dataclass(frozen=True)
class Column:
    """How one feature's row of every record is made (`encode`).

    Record ``p`` has the members ``m`` in ``[splits[p], splits[p + 1])``.
    Member ``m`` adds ``runs[m]`` values (one without ``runs``); its value
    ``i`` is ``values[starts[m] + i] + base[m] + (i if ramp else 0)`` for
    ints (a missing array counts 0), ``values[starts[m] + i]`` or
    ``constant`` for floats. The row is then padded with ``padding`` to
    ``width`` values; more than ``width`` raises ``ValueError``.

    Attributes:
        name: the feature's key.
        width: values per row.
        is_float: a float_list (float32) feature, else an int64_list one.
        padding: the value after the members' values.
        values: flat int32, int64 or float32 values, or ``None``.
        starts, runs, base: int64 ``[members]`` or ``None``.
        ramp: add each value's index in its run (ints).
        constant: every value of a float column without ``values``.
    """

    name: str
    width: int
    is_float: bool = False
    padding: float = 0
    values: np.ndarray | None = None
    starts: np.ndarray | None = None
    runs: np.ndarray | None = None
    base: np.ndarray | None = None
    ramp: bool = False
    constant: float = 0.0

    def _args(self) -> tuple:
        values, kind = None, "f" if self.is_float else "q"
        if self.values is not None:
            values = _flat(self.values, self.is_float)
            kind = "f" if self.is_float else "i" if values.itemsize == 4 else "q"
        return (self.name.encode(), self.is_float, int(self.width), float(self.padding),
                values, kind, _int64(self.starts), _int64(self.runs), _int64(self.base),
                bool(self.ramp), float(self.constant))


def encode(splits: np.ndarray, columns: list[Column], *, framed: bool = False
           ) -> tuple[bytes, np.ndarray]:
    """Serialize ``len(splits) - 1`` records of ``columns`` back to back (`Column`).

    Args:
        splits: int ``[P + 1]``, non-decreasing from 0: record ``p`` has the
            members ``[splits[p], splits[p + 1])``.
        columns: one per feature (any order: written in sorted name order).
        framed: wrap each record in TFRecord framing (length, masked
            CRC-32C of the length, data, masked CRC-32C of the data): the
            bytes `tf.io.TFRecordWriter` writes for those records.

    Returns:
        ``(data, sizes)``: the bytes, and int64 ``[P]`` each record's size
        (without framing).
    """
    columns = sorted(columns, key=lambda c: c.name.encode())
    data, sizes = _wire.encode(_int64(splits), [c._args() for c in columns], framed)
    return data, np.frombuffer(sizes, np.int64)


def encode_examples(features: dict[str, np.ndarray]) -> list[bytes]:
    """Serialize rows of fixed-shape features as `tf.train.Example` records.

    Args:
        features: name -> array ``[P, n]`` (or ``[P, ...]``, flattened per
            row; int and bool -> int64_list, float -> float_list); every
            array has the same ``P``.

    Returns:
        ``P`` serialized records, features in sorted name order.
    """
    arrays = {n: np.asarray(v) for n, v in features.items()}
    if not arrays or len(next(iter(arrays.values()))) == 0:
        return []
    data, sizes = encode(*dense_columns(arrays))
    ends = np.cumsum(sizes).tolist()
    return [data[start:end] for start, end in zip([0] + ends[:-1], ends)]


def dense_columns(features: dict[str, np.ndarray]) -> tuple[np.ndarray, list[Column]]:
    """``(splits, columns)`` of `encode` for dense ``[P, ...]`` arrays: one member a row."""
    rows = len(next(iter(features.values())))
    columns = []
    for name, array in features.items():
        array = array.reshape(rows, -1)
        width = array.shape[1]
        columns.append(Column(name, width, is_float=array.dtype.kind == "f", values=array,
                              starts=np.arange(rows, dtype=np.int64) * width,
                              runs=np.full(rows, width, np.int64)))
    return np.arange(rows + 1, dtype=np.int64), columns


def frame(records: list[bytes]) -> bytes:
    """The TFRecord framing of serialized ``records``, back to back (as `tf.io.TFRecordWriter`)."""
    return _wire.frame(list(records))


def record_batches(path: str, batch_size: int):
    """The records of a TFRecord file, in lists of ``batch_size`` (the last may be shorter).

    Read with `tf.io.gfile` (local or cloud paths), each record's length and
    data checked against their CRC-32C as `tf.data.TFRecordDataset` does,
    compiled.

    Raises:
        RecordError: a corrupted or truncated record, named by the byte of
            the file where it starts (after the records before it were yielded).
    """
    import tensorflow as tf

    batch: list[bytes] = []
    count = 0
    with tf.io.gfile.GFile(path, "rb") as file:
        pending, base = b"", 0  # base: where ``data`` starts in the file
        while True:
            chunk = file.read(_READ)
            data = pending + chunk if pending else chunk
            records, used, problem = _wire.split_records(data, not chunk)
            pending = data[used:]
            batch += records
            while len(batch) >= batch_size:
                yield batch[:batch_size]
                count += batch_size
                batch = batch[batch_size:]
            if problem is not None:
                if batch:
                    yield batch
                # The compiled reader counts bytes from the start of ``data``
                # (the bad record's, ``used``); the file's are ``base`` more.
                raise RecordError(f"{problem.rsplit(' at byte ', 1)[0]} at byte {base + used}",
                                  count + len(batch))
            base += used
            if not chunk:
                break
    if batch:
        yield batch


def _flat(values: np.ndarray, is_float: bool) -> np.ndarray:
    """``values`` flat and C-contiguous as float32, int32 or int64 (uint64 wraps like a C cast)."""
    values = np.asarray(values).reshape(-1)
    if is_float:
        return np.ascontiguousarray(values, np.float32)
    if values.dtype == np.uint64:
        return np.ascontiguousarray(values).view(np.int64)
    if values.dtype in (np.int32, np.int64):
        return np.ascontiguousarray(values)
    if values.dtype.itemsize < 4:  # bool, int8/16, uint8/16
        return np.ascontiguousarray(values, np.int32)
    return np.ascontiguousarray(values, np.int64)


def _int64(values) -> np.ndarray | None:
    return None if values is None else np.ascontiguousarray(values, np.int64).reshape(-1)
