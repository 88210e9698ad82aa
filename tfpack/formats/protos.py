"""Fast serialization of many `tf.train.Example` records with fixed-shape features.

Building `tf.train.Example` messages in Python costs about 50 µs per feature
of a few hundred values; writing millions of packs that way would dominate
``tfpack pack``. `encode_examples` writes the same protobuf wire format a
whole batch at a time with numpy: every byte of every record lands in one
``[P, C]`` byte matrix whose columns are fixed slots (each header varint at
its widest, each value at its widest varint), a boolean matrix keeps the
bytes each record really has, and ``bytes[keep]`` (row-major) is the records
back to back. The layout, per record::

    Example  = 0x0a len(Features) Features
    Features = for each feature, in sorted name order:
               0x0a len(entry) [0x0a len(key) key 0x12 len(Feature) Feature]
    Feature  = 0x1a (int64_list) or 0x12 (float_list) len(list) list
    list     = 0x0a len(values) values   (packed; nothing for no values)

Int values are varints (negative ones as 10-byte two's complement, uint64
wrapping to int64 like a C cast), float values little-endian float32. The
bytes are those of ``SerializeToString(deterministic=True)`` and parse with
`tf.io.parse_example` and `tf.train.Example.FromString`.

Example:

>>> import numpy as np, tensorflow as tf
>>> (record,) = encode_examples({"ids": np.array([[1, 300, -100]])})
>>> list(tf.train.Example.FromString(record).features.feature["ids"].int64_list.value)
[1, 300, -100]
"""

from __future__ import annotations

import numpy as np

__all__ = ["encode_examples"]

_MAX_VARINT = 10  # bytes of the largest (or a negative) int64


def encode_examples(features: dict[str, np.ndarray]) -> list[bytes]:
    """Serialize rows of fixed-shape features as `tf.train.Example` records.

    Args:
        features: name -> array ``[P, n]`` (or ``[P, ...]``, flattened per
            row; int and bool -> int64_list, float -> float_list); every
            array has the same ``P``.

    Returns:
        ``P`` serialized records, features in sorted name order.
    """
    names = sorted(features)
    arrays = [np.asarray(features[n]) for n in names]
    arrays = [a.reshape(len(a), int(np.prod(a.shape[1:]))) for a in arrays]
    if not arrays or len(arrays[0]) == 0:
        return []
    rows = len(arrays[0])
    slots: list[tuple[np.ndarray, np.ndarray | None]] = []  # (bytes, keep) [P, w] each
    sizes = np.zeros(rows, np.int64)  # bytes of Features so far, per record
    for name, array in zip(names, arrays):
        if array.dtype.kind == "f":
            values = np.ascontiguousarray(array, "<f4").view(np.uint8)
            payload, keep, length = values, None, np.full(rows, values.shape[1], np.int64)
        else:
            payload, keep, length = _varints(array)
        key = name.encode()
        tag = 0x12 if array.dtype.kind == "f" else 0x1a
        listed = np.where(length > 0, 1 + _size(length) + length, 0)
        feature = 1 + _size(listed) + listed
        entry = 1 + _size(np.full(rows, len(key))) + len(key) + 1 + _size(feature) + feature
        sizes += 1 + _size(entry) + entry
        slots += [_constant(rows, [0x0a]), _varint_slot(entry), _constant(rows, [0x0a]),
                  _varint_slot(np.full(rows, len(key), np.int64)), _constant(rows, key),
                  _constant(rows, [0x12]), _varint_slot(feature), _constant(rows, [tag]),
                  _varint_slot(listed)]
        if array.shape[1]:  # the packed `value` field; absent when there are no values
            slots += [_constant(rows, [0x0a]), _varint_slot(length), (payload, keep)]
    slots = [_constant(rows, [0x0a]), _varint_slot(sizes)] + slots
    data = np.concatenate([b for b, _ in slots], axis=1)
    keep = np.concatenate([np.ones(b.shape, bool) if k is None else k for b, k in slots], axis=1)
    flat = data[keep].tobytes()
    ends = np.cumsum(1 + _size(sizes) + sizes).tolist()
    return [flat[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _size(values: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each non-negative int64 value."""
    size = np.ones(values.shape, np.int64)
    for k in range(1, _MAX_VARINT):
        more = values >= (1 << (7 * k))
        if not more.any():
            break
        size += more
    return size


def _constant(rows: int, values) -> tuple[np.ndarray, None]:
    return np.broadcast_to(np.frombuffer(bytes(values), np.uint8), (rows, len(values))), None


def _varint_slot(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varint of each row's one non-negative value, in a slot of the widest."""
    data, keep, _ = _varints(values[:, None])
    return data, keep


def _varints(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints of an int matrix ``[P, n]``: bytes and keep ``[P, n * w]``, bytes per row ``[P]``.

    Each value takes a slot of ``w`` bytes (the widest varint of the matrix),
    of which it keeps its own varint's bytes.
    """
    values = matrix.astype(np.int64, copy=False).view(np.uint64)
    top = int(values.max()) if values.size else 0
    width = 1
    while width < _MAX_VARINT and top >= (1 << (7 * width)):
        width += 1
    rows, count = values.shape
    if width == 1:  # every value below 128: one byte each, all kept
        return values.astype(np.uint8), np.ones(values.shape, bool), np.full(
            rows, count, np.int64)
    if top < (1 << 32):  # half the memory traffic
        values = values.astype(np.uint32)
    data = np.empty((rows, count, width), np.uint8)
    keep = np.empty((rows, count, width), bool)
    keep[:, :, 0] = True
    sizes = np.full(rows, count, np.int64)
    for k in range(width):
        rest = values >> (7 * k) if k else values
        data[:, :, k] = rest & 0x7f
        if k + 1 < width:
            more = rest >= 0x80
            data[:, :, k] |= more.view(np.uint8) << 7
            keep[:, :, k + 1] = more
            sizes += more.view(np.uint8).sum(axis=1, dtype=np.int64)
    return data.reshape(rows, -1), keep.reshape(rows, -1), sizes
