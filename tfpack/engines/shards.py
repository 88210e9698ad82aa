"""Build the packs of one output shard from its Google-format records.

The Beam engine's builder (`tfpack.beam`): it hands `ShardBuilder.write` the
records a worker grouped for that shard, parsed with `parse_google_batch`,
assembled with `tfpack.data.assemble` in chunks of packs and serialized with
`serialize_packs`, written as one complete shard (atomic, with the block
digests of `tfpack.formats.blocks`), whose manifest entry is returned. The
local engine (`tfpack.engines.local`) writes the same bytes from the examples
its scan kept, without dense packs (`tfpack.engines.columns`, tested equal).

Example:

>>> import numpy as np
>>> from tfpack.formats.records import google_example
>>> records = [google_example([101, 7, 102], [0, 0, 0], [1], [8], 0,
...                           max_seq_length=8, max_predictions_per_seq=2),
...            google_example([101, 9, 102], [0, 0, 0], [1], [4], 1,
...                           max_seq_length=8, max_predictions_per_seq=2)]
>>> builder = ShardBuilder(max_length=8, max_sequences_per_pack=2, max_predictions=2)
>>> (packs,) = builder.packs(records, order=np.array([1, 0]), splits=np.array([0, 2]))
>>> packs["input_ids"].tolist()
[[101, 9, 102, 101, 7, 102, 0, 0]]
"""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Iterator

import numpy as np
import tensorflow as tf

from tfpack.data.assemble import assemble
from tfpack.features import FeatureRoles
from tfpack.errors import TfpackError
from tfpack.formats import manifest
from tfpack.formats.blocks import ShardWriter
from tfpack.formats.protos import dense_columns, encode
from tfpack.formats.records import packed_features, parse_google_batch
from tfpack.formats.validation import dense_first, google_widths

__all__ = ["ShardBuilder"]

_BATCH = 1024
_ASSEMBLE_PACKS = 1024  # packs per `assemble` call: bounds the dense [P, L] tensors


class ShardBuilder:
    """Packs of BERT Google-format records, ``L``, ``K``, ``M`` fixed.

    Its parser and its assemble graph are traced once in a process, for
    every builder and shard (tracing costs about 0.5 s a graph).
    """

    def __init__(self, max_length: int, max_sequences_per_pack: int, max_predictions: int):
        self.max_length = int(max_length)
        self.max_sequences_per_pack = int(max_sequences_per_pack)
        self.max_predictions = int(max_predictions)
        self.roles = FeatureRoles.bert()
        self._build = None
        # False once a dense parse failed: unpadded records (a width per record)
        # would fail it again on every shard.
        self._dense = True

    def packs(self, records, order: np.ndarray, splits: np.ndarray,
              example_ids: np.ndarray | None = None,
              lengths: np.ndarray | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Batches of packs (dicts of numpy ``[P, ...]``), chunk after chunk.

        Args:
            records: the shard's serialized records, a `tf.data.Dataset` of
                strings or a list of bytes, in any order.
            order, splits: the shard's packs as in `tfpack.packing.Assignment`,
                indexing ``records``.
            example_ids: int ``[len(records)]``, each record's position in the
                whole input (all input files, in order), written to the
                packs' ``example_ids``; default its index in ``records``.
            lengths: int ``[len(records)]``, each record's length when the
                input was scanned: a record that no longer parses or has
                another length raises `TfpackError` (the input changed
                between passes), never a pack built against a stale plan.
        """
        if not isinstance(records, tf.data.Dataset):
            records = tf.data.Dataset.from_tensor_slices(tf.constant(list(records), tf.string))
        parts, widths = [], None
        try:
            for batch in records.batch(_BATCH).prefetch(2):
                if not parts and self._dense:
                    widths = google_widths(batch[0].numpy())
                part, widths = dense_first(self._parser, batch, widths)
                self._dense = self._dense and widths is not None
                parts.append(part)
        except (tf.errors.InvalidArgumentError, ValueError) as error:
            if lengths is None:
                raise
            raise TfpackError("The input files must not change while they are packed. "
                              "Received: a record that no longer parses as it did when "
                              f"scanned ({type(error).__name__})") from None
        examples = {n: tf.concat([p[n] for p in parts], axis=0) for n in parts[0]}
        if lengths is not None:
            _check_lengths(examples["input_ids"].row_lengths().numpy(), lengths)
        return self.assembled(examples, order, splits, example_ids)

    def assembled(self, examples: dict, order: np.ndarray, splits: np.ndarray,
                  example_ids: np.ndarray | None = None) -> Iterator[dict[str, np.ndarray]]:
        """`packs` of examples already parsed (as `parse_google_batch` returns them)."""
        if self._build is None:
            self._build = _assemble_function(_signature(examples), self.max_length,
                                             self.max_sequences_per_pack, self.max_predictions)
        return self._assembled(examples, order, splits, example_ids)

    def _assembled(self, examples, order, splits, example_ids):
        order, splits = np.asarray(order, np.int64), np.asarray(splits, np.int64)
        ids = np.arange(len(order), dtype=np.int64) if example_ids is None else np.asarray(
            example_ids, np.int64)

        def build(start: int) -> dict[str, np.ndarray]:
            sub = splits[start:start + _ASSEMBLE_PACKS + 1]
            packs = self._build(examples, order[sub[0]:sub[-1]], sub - sub[0], ids)
            return {n: t.numpy() for n, t in packs.items()}

        # The next chunk is assembled (TensorFlow, without the GIL) while the
        # caller serializes and writes this one: two cores instead of one.
        with concurrent.futures.ThreadPoolExecutor(1) as ahead:
            pending = None
            for start in range(0, len(splits) - 1, _ASSEMBLE_PACKS):
                future = ahead.submit(build, start)
                if pending is not None:
                    yield pending.result()
                pending = future
            if pending is not None:
                yield pending.result()

    def write(self, path: str, records, order: np.ndarray, splits: np.ndarray,
              example_ids: np.ndarray | None = None, lengths: np.ndarray | None = None, *,
              progress=None) -> tuple[manifest.ShardInfo, dict | None]:
        """Build the shard's packs (`packs`) and write them as the complete shard ``path``.

        Written under a temporary name and renamed when complete, with its
        block digests; ``lengths`` as in `packs`. ``progress(n)`` is called after each chunk of ``n``
        packs.

        Returns:
            ``(ShardInfo, features)``: the shard's manifest entry and the
            manifest ``features`` of its packs (``None`` for no packs).
        """
        return _write(path, self.packs(records, order, splits, example_ids=example_ids,
                                       lengths=lengths), progress)

    def _parser(self, widths: tuple | None):
        """`parse_google_batch` at ``widths`` (``None``: any)."""
        return _parser(widths)


@functools.lru_cache(maxsize=None)
def _parser(widths: tuple | None):
    """`parse_google_batch` at ``widths``, traced once in a process for every builder and shard.

    A `Dataset.map` would trace again for every shard.
    """
    return tf.function(
        lambda serialized: parse_google_batch(serialized, None if widths is None else dict(widths)),
        autograph=False, input_signature=[tf.TensorSpec([None], tf.string)])


def _write(path: str, chunks, progress) -> tuple[manifest.ShardInfo, dict | None]:
    features = None
    with manifest.atomic_path(path) as partial, ShardWriter(partial) as writer:
        for packs in chunks:
            features = features or packed_features(packs)
            writer.write_framed(*encode(*dense_columns(packs), framed=True))
            if progress is not None:
                progress(len(packs["input_ids"]))
    return writer.shard_info(path), features


def _check_lengths(found: np.ndarray, scanned) -> None:
    scanned = np.asarray(scanned, np.int64)
    if found.shape != scanned.shape or (found != scanned).any():
        bad = (np.flatnonzero(found != scanned)[:1].tolist() if found.shape == scanned.shape
               else [])
        what = (f"a record of {int(scanned[bad[0]])} tokens when scanned has {int(found[bad[0]])}"
                if bad else f"{scanned.size} records when scanned, then {found.size}")
        raise TfpackError("The input files must not change while they are packed. "
                          f"Received: {what}")


def _signature(examples: dict) -> tuple:
    """The relaxed (any batch size) input signature of parsed examples, hashable."""
    def relaxed(value):
        if isinstance(value, tf.RaggedTensor):
            return tf.RaggedTensorSpec([None, None], value.dtype, 1, value.row_splits.dtype)
        return tf.TensorSpec([None], value.dtype)

    return tuple((n, relaxed(v)) for n, v in examples.items())


@functools.lru_cache(maxsize=None)
def _assemble_function(signature: tuple, L: int, K: int, M: int):
    """`assemble` as one graph traced once in a process, for every builder, shard and chunk size.

    Op-by-op eager execution is about 2x slower; without a signature every
    new number of examples or packs would trace again, and a graph per
    builder would trace again for every ``tfpack pack`` of a process.
    """
    roles = FeatureRoles.bert()
    signature = [dict(signature), tf.TensorSpec([None], tf.int64),
                 tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.int64)]
    # No autograph: `assemble` is plain vectorized TF (converting it costs seconds).
    return tf.function(
        lambda examples, order, splits, ids: assemble(
            examples, order, splits, roles, L, K, M, check_partitions=False, example_ids=ids),
        input_signature=signature, autograph=False)
