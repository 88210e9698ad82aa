"""TFRecord files: Google BERT pre-training records in, packed records out.

Google's ``create_pretraining_data.py`` writes one `tf.train.Example` per
sequence, padded to ``max_seq_length`` and ``max_predictions_per_seq``::

    input_ids, input_mask, segment_ids           int64 [max_seq_length]
    masked_lm_positions, masked_lm_ids           int64 [max_predictions_per_seq]
    masked_lm_weights                            float [max_predictions_per_seq]
    next_sentence_labels                         int64 [1]

`read_google_records` strips that padding into unpacked examples (the
``bert`` roles of `tfpack.data.features`); `write_packed` and `read_packed`
store and load DESIGN.md packs. Files are checked when they are opened: a
pattern matching nothing, an unreadable shard or a missing feature raises
`TfpackError` naming the file.

Example:

>>> import tfpack
>>> ds = tfpack.data.read_google_records("wiki_*.tfrecord")  # doctest: +SKIP
>>> next(iter(ds))["input_ids"]  # doctest: +SKIP
<tf.Tensor: shape=(87,), dtype=int32, numpy=...>
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import tensorflow as tf

from tfpack.data.features import dense_rows
from tfpack.data.protos import encode_examples
from tfpack.errors import TfpackError

__all__ = [
    "GOOGLE_FEATURES",
    "list_files",
    "read_google_records",
    "parse_google_records",
    "parse_google_batch",
    "read_packed",
    "write_packed",
    "serialize_packs",
    "google_example",
]

GOOGLE_FEATURES = {
    "input_ids": tf.int64, "input_mask": tf.int64, "segment_ids": tf.int64,
    "masked_lm_positions": tf.int64, "masked_lm_ids": tf.int64,
    "masked_lm_weights": tf.float32, "next_sentence_labels": tf.int64,
}


def list_files(pattern: str | Iterable[str], *, required: Iterable[str] = ()) -> list[str]:
    """Sorted files matching ``pattern`` (a glob, comma-separated globs or a list).

    Opens every file and reads its first record: a pattern that matches
    nothing, a file that cannot be read, or a first record without one of
    the ``required`` features raises `TfpackError` naming it.
    """
    patterns = pattern.split(",") if isinstance(pattern, str) else list(pattern)
    files = sorted({f for p in patterns for f in tf.io.gfile.glob(p.strip())})
    if not files:
        raise TfpackError(
            f"`input` must match at least one TFRecord file. Received: input={pattern!r}")
    required = list(required)
    for path in files:
        try:
            first = [r.numpy() for r in tf.data.TFRecordDataset(path).take(1)]
        except (tf.errors.OpError, OSError) as error:
            raise TfpackError(
                "Every input file must be a readable TFRecord file. "
                f"Received: file={path!r} ({type(error).__name__}: "
                f"{str(error).splitlines()[0]})") from None
        if not first and tf.io.gfile.stat(path).length > 0:
            raise TfpackError(
                "Every input file must be a readable TFRecord file. "
                f"Received: file={path!r} (no complete record in "
                f"{tf.io.gfile.stat(path).length} bytes)")
        if first and required:
            try:
                keys = set(tf.train.Example.FromString(first[0]).features.feature)
            except Exception:  # noqa: BLE001 - any decoding failure is a bad file
                raise TfpackError(
                    "Every record must be a serialized tf.train.Example. "
                    f"Received: file={path!r}") from None
            missing = [n for n in required if n not in keys]
            if missing:
                raise TfpackError(
                    f"Every record must have the features {required}; missing "
                    f"{missing}. Received: file={path!r} with features {sorted(keys)}")
    return files


def parse_google_records(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Parse one serialized Google record and strip its padding.

    Returns the ``bert`` roles: ``input_ids``, ``token_type_ids`` (from
    ``segment_ids``), ``masked_lm_positions``, ``masked_lm_ids``,
    ``masked_lm_weights`` (real predictions only) and ``next_sentence_labels``.
    """
    spec = {n: tf.io.VarLenFeature(d) for n, d in GOOGLE_FEATURES.items()}
    parsed = tf.io.parse_single_example(serialized, spec)
    raw = {n: tf.sparse.to_dense(t) for n, t in parsed.items()}
    length = tf.reduce_sum(tf.cast(raw["input_mask"], tf.int32))
    predictions = tf.reduce_sum(tf.cast(raw["masked_lm_weights"] > 0, tf.int32))
    return {
        "input_ids": tf.cast(raw["input_ids"][:length], tf.int32),
        "token_type_ids": tf.cast(raw["segment_ids"][:length], tf.int32),
        "masked_lm_positions": tf.cast(raw["masked_lm_positions"][:predictions], tf.int32),
        "masked_lm_ids": tf.cast(raw["masked_lm_ids"][:predictions], tf.int32),
        "masked_lm_weights": raw["masked_lm_weights"][:predictions],
        "next_sentence_labels": tf.cast(raw["next_sentence_labels"][0], tf.int32),
    }


def parse_google_batch(serialized: tf.Tensor) -> dict:
    """Parse a batch of serialized Google records; strip the padding.

    Vectorized version of `parse_google_records`: token and masked-LM
    features come back as `tf.RaggedTensor` ``[B, None]``,
    ``next_sentence_labels`` as ``[B]``.
    """
    spec = {n: tf.io.VarLenFeature(d) for n, d in GOOGLE_FEATURES.items()}
    raw = {n: tf.sparse.to_dense(t) for n, t in tf.io.parse_example(serialized, spec).items()}
    lengths = tf.reduce_sum(tf.cast(raw["input_mask"], tf.int64), axis=1)
    predictions = tf.reduce_sum(tf.cast(raw["masked_lm_weights"] > 0, tf.int64), axis=1)
    strip = lambda name, n, dtype=tf.int32: tf.cast(
        tf.RaggedTensor.from_tensor(raw[name], lengths=n), dtype)
    return {
        "input_ids": strip("input_ids", lengths),
        "token_type_ids": strip("segment_ids", lengths),
        "masked_lm_positions": strip("masked_lm_positions", predictions),
        "masked_lm_ids": strip("masked_lm_ids", predictions),
        "masked_lm_weights": strip("masked_lm_weights", predictions, tf.float32),
        "next_sentence_labels": tf.cast(raw["next_sentence_labels"][:, 0], tf.int32),
    }


def read_google_records(pattern: str | Iterable[str], *, deterministic: bool = True
                        ) -> tf.data.Dataset:
    """Unpacked BERT examples from Google ``create_pretraining_data`` TFRecords.

    Files are read in sorted order, one after the other, so the example
    order (and a pack plan built on it) is reproducible.

    Args:
        pattern: glob, comma-separated globs or list of globs.
        deterministic: keep the record order (set ``False`` for speed).
    """
    files = list_files(pattern, required=GOOGLE_FEATURES)
    parse = tf.autograph.experimental.do_not_convert(parse_google_batch)
    return dense_rows(tf.data.TFRecordDataset(files).batch(256)
                      .map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=deterministic)
                      .unbatch())


def google_example(input_ids, token_type_ids, masked_lm_positions, masked_lm_ids,
                   next_sentence_label, *, max_seq_length, max_predictions_per_seq) -> bytes:
    """Serialize one example the way Google's ``create_pretraining_data`` does.

    >>> record = google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
    ...                         max_seq_length=8, max_predictions_per_seq=2)
    >>> isinstance(record, bytes)
    True
    """
    n, m = len(input_ids), len(masked_lm_positions)
    pad = lambda values, size, fill=0: list(values) + [fill] * (size - len(values))
    ints = lambda values: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    feature = {
        "input_ids": ints(pad(input_ids, max_seq_length)),
        "input_mask": ints(pad([1] * n, max_seq_length)),
        "segment_ids": ints(pad(token_type_ids, max_seq_length)),
        "masked_lm_positions": ints(pad(masked_lm_positions, max_predictions_per_seq)),
        "masked_lm_ids": ints(pad(masked_lm_ids, max_predictions_per_seq)),
        "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(
            value=pad([1.0] * m, max_predictions_per_seq, 0.0))),
        "next_sentence_labels": ints([int(next_sentence_label)]),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def serialize_packs(packs: dict[str, np.ndarray]) -> list[bytes]:
    """One serialized `tf.train.Example` per pack of a batch of packs ``[P, ...]``."""
    return encode_examples({n: np.asarray(v) for n, v in packs.items()})


def write_packed(packs: Iterable[dict[str, np.ndarray]], path: str) -> int:
    """Write batches of packs (dicts of ``[P, ...]`` arrays) to one TFRecord file.

    Returns the number of packs written.
    """
    written = 0
    with tf.io.TFRecordWriter(path) as writer:
        for batch in packs:
            for record in serialize_packs(batch):
                writer.write(record)
                written += 1
    return written


def read_packed(pattern: str | Iterable[str], *, deterministic: bool = True
                ) -> tf.data.Dataset:
    """Packs written by `tfpack pack` / `write_packed`, with DESIGN.md features.

    Feature names and shapes (``L``, ``K``, ``M``) are read from the first
    record; int features come back int32, float features float32.

    Example:

    >>> ds = tfpack.data.read_packed("packed/part-*.tfrecord")  # doctest: +SKIP
    >>> ds.element_spec["input_ids"]  # doctest: +SKIP
    TensorSpec(shape=(512,), dtype=tf.int32, name=None)
    """
    files = list_files(pattern, required=("input_ids", "sequence_ids", "position_ids"))
    first = None
    for path in files:
        first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        if first is not None:
            break
    if first is None:
        raise TfpackError(
            f"The packed files must hold at least one pack. Received: input={pattern!r}")
    example = tf.train.Example.FromString(first.numpy())
    spec = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value
        dtype = tf.float32 if kind == "float_list" else tf.int64
        spec[name] = tf.io.FixedLenFeature([len(values)], dtype)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        return {n: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for n, t in parsed.items()}

    return (tf.data.TFRecordDataset(files).batch(256)
            .map(tf.autograph.experimental.do_not_convert(parse),
                 num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
            .unbatch())
