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
>>> ds = tfpack.formats.read_google_records("wiki_*.tfrecord")  # doctest: +SKIP
>>> next(iter(ds))["input_ids"]  # doctest: +SKIP
<tf.Tensor: shape=(87,), dtype=int32, numpy=...>
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import os
from typing import Iterable

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.formats import blocks, manifest, outputs, protos, validation
from tfpack.formats.packed import PackedOutput, packed_output, read_packed
from tfpack.formats.packed_values import check_packs
from tfpack.formats.protos import encode_examples
from tfpack.formats.rows import dense_rows
from tfpack.formats.validation import GOOGLE_FEATURES
from tfpack.formats.packed import PATTERN
from tfpack.params import (Anything, Boolean, Directory, ExistingFile, Integer, OutputPath,
                           TokenIds, validate_params)

__all__ = [
    "GOOGLE_FEATURES",
    "list_files",
    "read_google_records",
    "parse_google_records",
    "parse_google_batch",
    "read_packed",
    "packed_output",
    "PackedOutput",
    "write_packed",
    "serialize_packs",
    "packed_features",
    "google_example",
    "scan_google_records",
]

_BATCH = 1024


def list_files(pattern: str | Iterable[str], *, required: Iterable[str] = ()) -> list[str]:
    """Sorted files matching ``pattern`` (a glob, comma-separated globs or a list).

    Opens every file and reads its first record: a pattern that matches
    nothing, a file that cannot be read, or a first record without one of
    the ``required`` features raises `TfpackError` naming it.
    """
    patterns = pattern.split(",") if isinstance(pattern, str) else list(pattern)
    files = set()
    for part in patterns:
        matched = tf.io.gfile.glob(part.strip()) if part.strip() else []
        if not matched:  # One part matching nothing is refused, as `tfpack train` does.
            raise TfpackError(
                "Every comma-separated part of `input` must match at least one TFRecord file. "
                f"Received: input={pattern!r} (part {part.strip()!r} matches nothing)")
        files.update(matched)
    files = sorted(files)
    # A FIFO or a device would block (or never end) the first read: regular files only.
    special = [f for f in files if "://" not in f and not ExistingFile().holds(f)]
    if special:
        raise TfpackError("Every input file must be a regular TFRecord file (not a FIFO, a "
                          f"device or a directory). Received: file={special[0]!r}")
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
                    f"{missing}. Received: file={path!r}, record 0 with features "
                    f"{sorted(keys)}")
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


def parse_google_batch(serialized: tf.Tensor, widths: dict[str, int] | None = None) -> dict:
    """Parse a batch of serialized Google records; strip the padding.

    Vectorized version of `parse_google_records`: token and masked-LM
    features come back as `tf.RaggedTensor` ``[B, None]``,
    ``next_sentence_labels`` as ``[B]``. ``widths``: parse dense at these
    widths, several times faster (`tfpack.formats.validation.google_rows`:
    `tf.errors.InvalidArgumentError` if a record has others).
    """
    raw = {n: rows.values for n, rows in validation.google_rows(serialized, widths).items()}
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


@validate_params({"pattern": PATTERN, "deterministic": Boolean(), "validate": Boolean()})
def read_google_records(pattern: str | Iterable[str], *, deterministic: bool = True,
                        validate: bool = True) -> tf.data.Dataset:
    """Unpacked BERT examples from Google ``create_pretraining_data`` TFRecords.

    Files are read in sorted order, one after the other, so the example
    order (and a pack plan built on it) is reproducible. Every record is
    checked when this is called (`scan_google_records`): a bad one raises
    `TfpackError` naming its file and 0-based index.

    Args:
        pattern: glob, comma-separated globs or list of globs.
        deterministic: keep the record order (set ``False`` for speed).
        validate: check every record now (one extra read of the files).
    """
    files = list_files(pattern, required=GOOGLE_FEATURES)
    if validate:
        scan_google_records(files)
    parse = tf.autograph.experimental.do_not_convert(parse_google_batch)
    return dense_rows(tf.data.TFRecordDataset(files).batch(256)
                      .map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                           deterministic=deterministic)
                      .unbatch())


def scan_google_records(files: list[str], *, progress: bool = False, keep=None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Check every record of Google-format files; return their lengths.

    Every record is checked against `tfpack.formats.validation.RULES`; the
    first bad one raises `TfpackError` naming its file, its 0-based index in
    that file and what is wrong, before anything else happens.

    Args:
        files: the files, read in this order.
        progress: show a tqdm progress bar on stderr.
        keep: called with each checked batch's examples, parsed in the same
            pass (`parse_google_batch` without the padding, as numpy: each
            ragged feature's flat ``values``, ``next_sentence_labels``
            ``[B]``), in input order, and with their runs (ragged feature
            -> int ``[B]``, each example's values); so a caller needs no
            second read (`tfpack.engines.spill.Spill.append`).

    Returns:
        ``(lengths, predictions)``: int64 ``[N]`` tokens and real masked-LM
        predictions of every record, files in the given order.
    """
    from tqdm import tqdm

    lengths, predictions = [], []
    check = functools.partial(_google_check, values=keep is not None)
    # Two batches are checked at once (TensorFlow runs them without the GIL);
    # their results are taken in input order, so the first bad record is named.
    with tqdm(desc="pass 1: scan", unit=" examples", disable=not progress) as bar, \
            concurrent.futures.ThreadPoolExecutor(2) as pool:
        # One file at a time, so that a bad record names its file.
        for path in files:
            state = {"index": 0, "widths": None}
            pending: collections.deque = collections.deque()

            def take(future, path=path, state=state):
                try:
                    (codes, tokens, preds, values), widths = future.result()
                except (tf.errors.InvalidArgumentError, UnicodeDecodeError):
                    # UnicodeDecodeError: TensorFlow's message about a record that
                    # does not parse can quote its bytes, which it then fails to decode.
                    _raise_unparseable(path, state["index"])
                if widths is None:
                    state["widths"] = None  # unpadded records: the rest variable-length
                bad = np.flatnonzero(codes)
                if bad.size:
                    i = state["index"] + int(bad[0])
                    where = f"file={path!r}, record {i}"
                    raise TfpackError(validation.describe(
                        int(codes[bad[0]]), where, _record_values(_record(path, i), where)))
                lengths.append(tokens)
                predictions.append(preds)
                if keep is not None:
                    per = {"tokens": tokens, "predictions": preds}
                    keep(dict(zip(_KEPT, values)),
                         {name: per[count] for name, count in _KEPT.items() if count})
                state["index"] += len(codes)
                bar.update(len(codes))

            iterator = protos.record_batches(path, _BATCH)
            first = True
            while True:
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                except (protos.RecordError, tf.errors.OpError) as error:
                    while pending:  # an earlier bad record is named first
                        take(pending.popleft())
                    raise TfpackError(
                        "Every input file must be a readable TFRecord file. Received: "
                        f"file={path!r} after record {state['index']} ({type(error).__name__}: "
                        f"{str(error).splitlines()[0]})") from None
                if first:
                    state["widths"] = validation.google_widths(batch[0])
                    first = False
                pending.append(pool.submit(_check_batch, check, batch, state["widths"]))
                if len(pending) > 2:
                    take(pending.popleft())
            while pending:
                take(pending.popleft())
    if not lengths:
        raise TfpackError(f"The input files must hold at least one example. Received: {files}")
    return np.concatenate(lengths), np.concatenate(predictions)


def _check_batch(check, batch: list[bytes], widths):
    """``((codes, lengths, predictions, kept values), widths)`` of a batch, as numpy.

    Compiled (`validation.google_scan`), or with TensorFlow (``check``, a
    `_google_check`, through `validation.dense_first`) for a batch with a
    record the compiled scan leaves to it.
    """
    fast = validation.google_scan(batch)
    if fast is not None:
        return fast, widths
    (codes, tokens, preds, *values), widths = validation.dense_first(
        check, tf.constant(batch, tf.string), widths)
    return (codes.numpy(), tokens.numpy(), preds.numpy(), [v.numpy() for v in values]), widths


# What `scan_google_records` hands to ``keep``, in this order, and how many values of each an
# example has (one where None).
_KEPT = {"input_ids": "tokens", "token_type_ids": "tokens", "masked_lm_positions": "predictions",
         "masked_lm_ids": "predictions", "masked_lm_weights": "predictions",
         "next_sentence_labels": None}


@functools.lru_cache(maxsize=None)
def _google_check(widths: tuple | None, values: bool = False):
    """`validation.google_problems` traced once (seconds) for every file and batch size.

    One graph per ``widths`` (`validation.google_widths`, as items) and one
    for records of any widths (``None``). ``values``: the graph also returns
    the examples' values without their padding (`_KEPT`, as in
    `parse_google_batch`), parsed once for both.
    """
    def check(serialized):
        if not values:
            return validation.google_problems(serialized, None if widths is None else dict(widths))
        rows = validation.google_rows(serialized, None if widths is None else dict(widths))
        codes, lengths, predictions = validation.google_problems(rows=rows)
        real = lambda name, n, dtype=tf.int32: tf.cast(rows[name].first(n), dtype)  # noqa: E731
        return (codes, lengths, predictions, real("input_ids", lengths),
                real("segment_ids", lengths), real("masked_lm_positions", predictions),
                real("masked_lm_ids", predictions),
                real("masked_lm_weights", predictions, tf.float32),
                tf.cast(rows["next_sentence_labels"].values[:, 0], tf.int32))

    return tf.function(check, autograph=False,
                       input_signature=[tf.TensorSpec([None], tf.string)])


def _record(path: str, index: int) -> bytes:
    return next(iter(tf.data.TFRecordDataset(path).skip(index).take(1))).numpy()


def _record_values(record: bytes, where: str) -> dict:
    try:  # TensorFlow's parser takes what protobuf refuses (a key that is not UTF-8)
        features = tf.train.Example.FromString(record).features.feature
    except Exception:  # noqa: BLE001 - any decoding failure is a bad record
        raise TfpackError(
            f"Every record must be a serialized tf.train.Example. Received: {where}") from None
    return {n: list(getattr(f, f.WhichOneof("kind")).value) if f.WhichOneof("kind") else []
            for n, f in features.items()}


def _raise_unparseable(path: str, start: int) -> None:
    """The batch from record ``start`` did not parse: name its first bad record."""
    for i, record in enumerate(tf.data.TFRecordDataset(path).skip(start).take(_BATCH)):
        where = f"file={path!r}, record {start + i}"
        try:
            features = tf.train.Example.FromString(record.numpy()).features.feature
        except Exception:  # noqa: BLE001 - any decoding failure is a bad record
            raise TfpackError(
                f"Every record must be a serialized tf.train.Example. Received: {where}") from None
        for name, dtype in GOOGLE_FEATURES.items():
            want = "float_list" if dtype == tf.float32 else "int64_list"
            kind = features[name].WhichOneof("kind") if name in features else None
            if kind not in (None, want):
                raise TfpackError(f"Every record must have `{name}` stored as {want}. "
                                  f"Received: {where} with {name} as {kind}")
    raise TfpackError(f"Every record must parse as a BERT pre-training example. Received: "
                      f"file={path!r}, records {start} to {start + _BATCH - 1}")


@validate_params({
    "input_ids": TokenIds(), "token_type_ids": TokenIds(), "masked_lm_positions": TokenIds(),
    "masked_lm_ids": TokenIds(), "next_sentence_label": Integer(0, 1),
    "max_seq_length": Integer(1), "max_predictions_per_seq": Integer(0),
})
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


def packed_features(packs: dict[str, np.ndarray]) -> dict:
    """Manifest ``features`` (stored dtype and shape) of a batch of packs ``[P, ...]``."""
    return {n: ("float32" if np.asarray(v).dtype.kind == "f" else "int64",
                list(np.shape(v)[1:])) for n, v in packs.items()}


@validate_params({"packs": Anything("batches of packs, each checked as it is written"),
                  "path": [OutputPath("file"), Directory()]})
def write_packed(packs: Iterable[dict[str, np.ndarray]], path: str) -> int:
    """Write batches of packs (dicts of ``[P, ...]`` arrays) as a complete packed output.

    ``path`` is the shard file, or a directory (the shard is then
    ``part-00000-of-00001.tfrecord``). The directory follows the rules of
    ``tfpack pack`` (`tfpack.formats.outputs`): it must be missing, empty, or
    hold the previous output of this same shard (replaced whole); the output
    is built beside it (the shard, then ``manifest.json``, see
    `tfpack.formats.manifest`) and swapped in complete, so `read_packed` can
    check it. Anything else (another tfpack output, a file of the user's) is
    refused and left untouched.

    Returns the number of packs written.

    Example:

    >>> import numpy as np, tempfile, tfpack
    >>> packs = {"input_ids": np.array([[5, 6, 7, 0]]), "sequence_ids": np.array([[1, 1, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 0]]),
    ...          "sequence_mask": np.array([[1.0, 1.0]], np.float32)}
    >>> folder = tempfile.mkdtemp()
    >>> tfpack.formats.write_packed([packs], folder)
    1
    >>> [p["sequence_ids"].tolist() for p in tfpack.formats.read_packed(folder).as_numpy_iterator()]
    [[1, 1, 2, 0]]
    """
    if os.path.isdir(path):
        path = os.path.join(path, "part-00000-of-00001.tfrecord")
    directory, name = os.path.split(os.path.abspath(path))
    if os.path.exists(os.path.join(directory, manifest.MANIFEST)):
        try:
            previous = [s["name"] for s in manifest.read_manifest(directory)["shards"]]
        except TfpackError:
            previous = None
        if previous != [name]:
            raise TfpackError(
                "`write_packed` writes a one-shard output into a directory without another "
                f"tfpack output. Received: path={path!r} beside "
                f"{os.path.join(directory, manifest.MANIFEST)!r} listing {previous}")
    elif os.path.isdir(directory) and os.listdir(directory):
        raise TfpackError(
            "`write_packed` writes into a directory that is missing, empty or holds its own "
            "previous output, never beside other files. Received: path="
            f"{path!r} in a directory holding {sorted(os.listdir(directory))[:3]!r}")
    with outputs.replacing_output(directory, overwrite=True) as staging:
        return _write_one_shard(packs, staging, name)


def _write_one_shard(packs, directory: str, name: str) -> int:
    written = sequences = tokens = 0
    features = None
    with manifest.atomic_path(os.path.join(directory, name)) as tmp, \
            blocks.ShardWriter(tmp) as writer:
        for batch in packs:
            batch = {n: np.asarray(v) for n, v in batch.items()}
            check_packs(batch, first_pack=written)
            if features is None:
                features = packed_features(batch)
            elif packed_features(batch) != features:
                raise TfpackError("Every batch of packs must have the same features and "
                                  f"shapes. Received: {features} then {packed_features(batch)}")
            serialized = serialize_packs(batch)
            writer.write_many(serialized)
            written += len(serialized)
            if "sequence_mask" in batch:
                sequences += int((batch["sequence_mask"] > 0).sum())
            tokens += int((batch["sequence_ids"] > 0).sum()) if "sequence_ids" in batch else 0
        if features is None:
            raise TfpackError("`packs` must hold at least one batch of packs. Received: none")
    shape = lambda n: features[n][1][0] if n in features else None  # noqa: E731
    shard = writer.shard_info(os.path.join(directory, name))
    manifest.write_manifest(
        directory, [shard], features=features, max_length=shape("input_ids"),
        max_sequences_per_pack=shape("sequence_mask") or 0,
        max_predictions_per_pack=shape("masked_lm_positions"),
        sequences=sequences, tokens=tokens, created_by="tfpack.formats.write_packed")
    return written
