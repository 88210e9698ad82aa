"""Fast serialization of many `tf.train.Example` records with fixed-shape features.

Building `tf.train.Example` messages in Python costs about 50 µs per feature
of a few hundred values; writing millions of packs that way would dominate
``tfpack pack``. `encode_examples` writes the same protobuf wire format a
whole batch at a time with TensorFlow's `tf.io.encode_proto`, in C++, one
message level after the other: each feature's values as an ``Int64List``
(varints, negative values as 10-byte two's complement) or a ``FloatList``
(little-endian float32), wrapped in a ``Feature``, a ``Features`` map entry
(features in sorted name order), ``Features`` and ``Example``. The bytes are
those of ``SerializeToString`` and parse with `tf.io.parse_example` and
`tf.train.Example.FromString`.

Example:

>>> import numpy as np, tensorflow as tf
>>> (record,) = encode_examples({"ids": np.array([[1, 300, -100]])})
>>> list(tf.train.Example.FromString(record).features.feature["ids"].int64_list.value)
[1, 300, -100]
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

__all__ = ["encode_examples"]


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
    kinds = tuple((name, "float" if a.dtype.kind == "f" else "int64", a.dtype.name)
                  for name, a in zip(names, arrays))
    return _encoder(kinds)(*arrays).numpy().tolist()


@functools.lru_cache(maxsize=None)
def _encoder(kinds: tuple):
    """The serializer of one set of (name, kind, dtype) features, traced once."""
    signature = [tf.TensorSpec([None, None], tf.as_dtype(dtype)) for _, _, dtype in kinds]

    def encode(*columns):
        rows = tf.shape(columns[0])[:1]
        one = tf.ones(tf.concat([rows, [1]], 0), tf.int32)
        entries = []
        for (name, kind, _), column in zip(kinds, columns):
            # Values (uint64 wraps to int64 like a C cast: the same varint bits).
            if kind == "float":
                values = _encode(tf.cast(column, tf.float32), "tensorflow.FloatList")
            else:
                values = _encode(tf.cast(column, tf.int64), "tensorflow.Int64List")
            field = f"{kind}_list"
            feature = tf.io.encode_proto(one, [values[:, None]], [field], "tensorflow.Feature")
            entries.append(tf.io.encode_proto(
                tf.concat([one, one], 1), [tf.fill(tf.concat([rows, [1]], 0), name),
                                           feature[:, None]],
                ["key", "value"], "tensorflow.Features.FeatureEntry"))
        features = tf.io.encode_proto(one * len(entries), [tf.stack(entries, axis=1)],
                                      ["feature"], "tensorflow.Features")
        return tf.io.encode_proto(one, [features[:, None]], ["features"], "tensorflow.Example")

    return tf.function(encode, input_signature=signature, autograph=False)


def _encode(matrix: tf.Tensor, message: str) -> tf.Tensor:
    """One ``message`` (a packed repeated ``value`` field) per row of ``matrix``."""
    shape = tf.shape(matrix)
    sizes = tf.fill(tf.stack([shape[0], 1]), shape[1])
    return tf.io.encode_proto(sizes, [matrix], ["value"], message)
