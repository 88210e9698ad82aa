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
    payloads, headers = [], []  # per feature; header varints: entry, Feature, list, values
    for name, array in zip(names, arrays):
        if array.dtype.kind == "f":
            values = np.ascontiguousarray(array, "<f4").view(np.uint8)
            payload, keep, length = values, None, np.full(rows, values.shape[1], np.int64)
        else:
            payload, keep, length = _varints(array)
        key = len(name.encode())
        listed = np.where(length > 0, 1 + _size(length) + length, 0)
        feature = 1 + _size(listed) + listed
        entry = 1 + _size(np.array([key]))[0] + key + 1 + _size(feature) + feature
        payloads.append((payload, keep))
        headers += [entry, feature, listed, length]
    entries = np.stack(headers[0::4], axis=1)
    sizes = (1 + _size(entries) + entries).sum(axis=1)  # bytes of Features
    # Every header varint of every record in one call; a slot of `width` bytes each.
    header, header_keep, _ = _varints(np.stack([sizes] + headers, axis=1))
    width = header.shape[1] // (1 + len(headers))
    slots: list = [b"\x0a", 0]  # constant bytes, or the index of a header varint
    for f, (name, array) in enumerate(zip(names, arrays)):
        key = name.encode()
        slots += [b"\x0a", 1 + 4 * f, b"\x0a" + bytes(_varint_bytes(len(key))) + key + b"\x12",
                  2 + 4 * f, b"\x12" if array.dtype.kind == "f" else b"\x1a", 3 + 4 * f]
        if array.shape[1]:  # the packed `value` field; absent when there are no values
            slots += [b"\x0a", 4 + 4 * f, payloads[f]]
    columns = sum(len(x) if isinstance(x, bytes) else width if isinstance(x, int)
                  else x[0].shape[1] for x in slots)
    data = np.empty((rows, columns), np.uint8)
    keep = np.empty((rows, columns), bool)
    at = 0
    for x in slots:
        if isinstance(x, bytes):
            data[:, at:at + len(x)] = np.frombuffer(x, np.uint8)
            keep[:, at:at + len(x)] = True
            at += len(x)
            continue
        if isinstance(x, int):
            x = (header[:, x * width:(x + 1) * width], header_keep[:, x * width:(x + 1) * width])
        n = x[0].shape[1]
        data[:, at:at + n] = x[0]
        keep[:, at:at + n] = True if x[1] is None else x[1]
        at += n
    flat = data[keep].tobytes()
    ends = np.cumsum(1 + _size(sizes) + sizes).tolist()
    return [flat[start:end] for start, end in zip([0] + ends[:-1], ends)]


def _varint_bytes(value: int) -> list[int]:
    """The varint of one non-negative int."""
    out = []
    while value >= 0x80:
        out.append(value & 0x7f | 0x80)
        value >>= 7
    return out + [value]


def _size(values: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each non-negative int64 value."""
    size = np.ones(values.shape, np.int64)
    for k in range(1, _MAX_VARINT):
        more = values >= (1 << (7 * k))
        if not more.any():
            break
        size += more
    return size


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
