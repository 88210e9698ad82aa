"""Reading packed outputs: opened in metadata time, checked as they are read.

`packed_output` opens an output from its metadata only (the manifest,
validated against its schema, and one ``stat`` per file): its time does not
grow with the data. `read_packed` then reads each shard once, in blocks
(`tfpack.formats.blocks`): a block's records are released only after their
digest and count match the manifest opened, so no pack of a damaged,
truncated, extended or replaced shard reaches a model, and an output
re-packed while a job reads it (``.repeat()`` reopens shards by name) stops
the job with one clear error instead of mixing two generations.

``packs=(start, stop)`` reads the packs of global index ``[start, stop)`` in
written order, opening only the shards that hold them (the part of the first
shard before ``start``'s block is skipped by reading it; the block holding
``stop - 1`` is read whole, to check it).

Outputs written before block digests (manifests whose shards have no
``blocks``) are checked the old way: the sha256 of every shard read, before
the first pack (``verify_checksums=True``).

Example:

>>> import numpy as np, tempfile, tfpack
>>> from tfpack.formats.packed import packed_output, read_packed
>>> folder = tempfile.mkdtemp()
>>> packs = {"input_ids": np.arange(12).reshape(3, 4), "sequence_ids": np.ones((3, 4), int),
...          "position_ids": np.tile(np.arange(4), (3, 1)),
...          "sequence_mask": np.ones((3, 1), np.float32)}
>>> tfpack.formats.write_packed([packs], folder)
3
>>> output = packed_output(folder)
>>> output.packs, output.max_length, [records for _, records in output.shards]
(3, 4, [3])
>>> [int(p["input_ids"][0]) for p in read_packed(folder, packs=(1, 3)).as_numpy_iterator()]
[4, 8]
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterable

import numpy as np
import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, iterator_ops

from tfpack.errors import TfpackError
from tfpack.formats import blocks, manifest
from tfpack.params import (Boolean, Directory, InstanceOf, Integer, IntegerPair, Text,
                           declare_fields, validate_params)

# An output directory, a glob, comma-separated globs or a list of globs (tfpack.params).
PATTERN = [Text("an output directory, a glob or comma-separated globs"), Directory(),
           InstanceOf(list, tuple, description="a list of globs")]

__all__ = ["PackedOutput", "packed_output", "read_packed"]

_LEGACY_BLOCK = 1024  # records per (count-checked) block of a shard without digests
_MARK = "TfpackError: "


@declare_fields({
    "directory": Text("a directory path"), "shards": InstanceOf(tuple), "packs": Integer(0),
    "features": InstanceOf(dict), "max_length": Integer(1), "max_sequences_per_pack": Integer(1),
    "max_predictions_per_pack": [None, Integer(0)], "batch_size": [None, Integer(1)],
    "generation": [None, InstanceOf(str)], "blocks": InstanceOf(tuple),
    "sha256": InstanceOf(tuple),
})
@dataclasses.dataclass(frozen=True)
class PackedOutput:
    """A packed output as its manifest describes it (no shard is read).

    Attributes:
        directory: the output directory.
        shards: ``(path, records)`` of every shard, in written order.
        packs: packs in all shards.
        features: the manifest's features: name -> ``{"dtype", "shape"}``.
        max_length, max_sequences_per_pack, max_predictions_per_pack: ``L``,
            ``K``, ``M`` (``M`` ``None`` without masked-LM features).
        batch_size: the batch size the output was balanced for, or ``None``.
        generation: the id of the write (``None`` for outputs written before
            generations): a re-pack into the same directory has another.
        blocks: per shard, ``(block_records, digests hex)`` or ``None``
            (written before block digests).
        sha256: per shard, the whole file's sha256.
    """

    directory: str
    shards: tuple
    packs: int
    features: dict = dataclasses.field(hash=False)
    max_length: int
    max_sequences_per_pack: int
    max_predictions_per_pack: int | None
    batch_size: int | None
    generation: str | None
    blocks: tuple = dataclasses.field(default=(), repr=False)
    sha256: tuple = dataclasses.field(default=(), repr=False)

    @property
    def checked_in_pass(self) -> bool:
        """Whether every shard has block digests (else `manifest.verify` checks it)."""
        return all(b is not None for b in self.blocks)


@validate_params({"pattern": PATTERN})
def packed_output(pattern) -> PackedOutput:
    """Open one packed output from its metadata: manifest, file sizes, record counts.

    ``pattern`` is the output directory, or a glob (or list, or
    comma-separated globs) matching exactly its shards. The manifest is
    validated against its schema and every listed file must exist with its
    recorded size; no shard is read.

    Raises:
        TfpackError: naming the file and what is wrong, in one line.

    Example:

    >>> packed_output("packed").shards  # doctest: +SKIP
    (('packed/part-00000-of-00002.tfrecord', 512), ('packed/part-00001-of-00002.tfrecord', 37))
    """
    outputs = _open_all(pattern)
    if len(outputs) != 1:
        raise TfpackError("`pattern` must name one packed output. Received: shards of "
                          f"{[o.directory for o in outputs]}")
    return outputs[0]


def _open_all(pattern) -> list[PackedOutput]:
    if isinstance(pattern, (str, os.PathLike)) and os.path.isdir(pattern):
        groups = {os.fspath(pattern): None}
    else:
        patterns = pattern.split(",") if isinstance(pattern, str) else [str(p) for p in pattern]
        matched = sorted({f for p in patterns for f in tf.io.gfile.glob(p.strip())
                          if not os.path.basename(f).startswith(".")
                          and os.path.basename(f) != manifest.MANIFEST})
        if not matched:
            raise TfpackError("`pattern` must name a packed output directory or match its "
                              f"shards. Received: pattern={pattern!r}")
        groups = {}
        for f in matched:
            groups.setdefault(os.path.dirname(f) or ".", []).append(f)
    return [_open(directory, group) for directory, group in groups.items()]


def _open(directory: str, files) -> PackedOutput:
    found = manifest.read_manifest(directory)
    paths = manifest.check_files(directory, found, files)
    shards = found["shards"]
    return PackedOutput(
        directory=directory,
        shards=tuple((p, s["records"]) for p, s in zip(paths, shards)),
        packs=found["packs"], features=found["features"], max_length=found["max_length"],
        max_sequences_per_pack=found["max_sequences_per_pack"],
        max_predictions_per_pack=found["max_predictions_per_pack"],
        batch_size=found.get("batch_size"), generation=found.get("generation"),
        blocks=tuple((s["block_records"], s["blocks"]) if "blocks" in s else None
                     for s in shards),
        sha256=tuple(s["sha256"] for s in shards))


@validate_params({"pattern": PATTERN, "deterministic": Boolean(), "verify_checksums": Boolean(),
                  "batched": Boolean(), "packs": [None, IntegerPair(0)]})
def read_packed(pattern: str | Iterable[str], *, deterministic: bool = True,
                verify_checksums: bool = True, batched: bool = False,
                packs: tuple[int, int] | None = None) -> tf.data.Dataset:
    """Packs of a complete packed output, each block checked before it is released.

    ``pattern`` is the output directory of `tfpack pack` / `write_packed`, or
    a glob (or list) of its shards: then the files matched must be exactly
    the shards its ``manifest.json`` lists. Opening costs metadata only
    (`packed_output`) plus the first record (its features must be the
    manifest's). Each shard is then read once: every block of records is
    checked against the manifest's digest and count as it is read, and an
    error is raised before any record of a bad block is released. Feature
    names and shapes (``L``, ``K``, ``M``) come from the manifest; int
    features come back int32, float features float32.

    Iterating eagerly raises `TfpackError` for a damaged, truncated or
    replaced shard (e.g. the output re-packed while read); inside
    ``model.fit`` or after further transformations it surfaces as a
    TensorFlow error whose message starts with the same line.

    Args:
        pattern: output directory, glob, comma-separated globs or list.
        deterministic: keep the record order (``False`` for speed: shards
            read in parallel, order not fixed).
        verify_checksums: compare each block's digest as it is read (outputs
            without block digests: the sha256 of every shard read in range,
            before the first pack). ``False`` checks record counts only.
        batched: batches of the ``batch_size`` the output was balanced for
            (``tfpack pack --batch-size B --balance``), in order; the last
            one may be smaller. Packs always come back in the order written
            (with ``deterministic=True``), and balanced shards hold whole
            batches, so ``.batch(B)`` gives the same batches.
        packs: ``(start, stop)``: only the packs of global index
            ``start <= i < stop`` in written order (shards in manifest
            order, outputs in pattern order); only the shards holding them
            are opened.

    Example:

    >>> ds = tfpack.formats.read_packed("packed")  # doctest: +SKIP
    >>> ds.element_spec["input_ids"]  # doctest: +SKIP
    TensorSpec(shape=(512,), dtype=tf.int32, name=None)
    """
    outputs = _open_all(pattern)
    spec = outputs[0].features
    for output in outputs[1:]:
        if output.features != spec:
            raise TfpackError("All packed outputs read together must have the same features. "
                              f"Received: {output.directory!r} differs from "
                              f"{outputs[0].directory!r}")
    total = sum(o.packs for o in outputs)
    if total == 0:
        raise TfpackError(
            f"The packed files must hold at least one pack. Received: pattern={pattern!r}")
    batch_sizes = {o.batch_size for o in outputs}
    if batched and (len(batch_sizes) != 1 or None in batch_sizes):
        raise TfpackError(
            "`batched=True` needs an output packed for one batch size (`tfpack pack "
            "--batch-size B --balance`). Received: batch sizes "
            f"{sorted(batch_sizes, key=str)} in {[o.directory for o in outputs]}")
    start, stop = _range(packs, total)
    plan = _Plan(outputs, start, stop, verify_checksums)
    if plan.first_path is not None:
        _check_first_record(plan.first_path, spec)
    dataset = plan.dataset(spec, deterministic)
    per_element = batch_sizes.pop() if batched else 1
    if batched:
        dataset = dataset.batch(per_element)
    return _raising(dataset, plan.locator(
        deterministic, per_element,
        ", ".join(repr(o.directory) for o in outputs)))


def _range(packs, total: int) -> tuple[int, int]:
    if packs is None:
        return 0, total
    if not packs[0] <= packs[1] <= total:  # two integers >= 0: declared
        raise TfpackError(f"`packs` must be (start, stop) with 0 <= start <= stop <= {total} "
                          f"(the packs of the output). Received: packs={packs!r}")
    return int(packs[0]), int(packs[1])


class _Plan:
    """The blocks to read for packs ``[start, stop)``: flat per-block arrays, per-shard segments.

    Every block of every shard gets one row of ``digests``, ``counts``,
    ``checked`` (digest compared), ``lo``/``hi`` (the records of it to
    release) and ``labels`` (for errors); a segment reads blocks
    ``first .. first + n`` of one shard.
    """

    def __init__(self, outputs: list[PackedOutput], start: int, stop: int, checksums: bool):
        digests, counts, checked, lo, hi, shard_of, index = [], [], [], [], [], [], []
        labels = []  # per shard read
        self.segments = []  # (path, skip records, first block row, blocks, to the end, R)
        self.reads = []  # (path, packs released from it)
        self.first_path = None
        offset, totals, rows = 0, [], 0
        for output in outputs:
            for (path, records), block, sha256 in zip(output.shards, output.blocks,
                                                      output.sha256):
                begin, end = offset, offset + records
                offset = end
                overlap = max(begin, start) < min(end, stop)
                if block is None:  # before block digests: counts here, sha256 now
                    R = max(1, min(records, _LEGACY_BLOCK))
                    values = np.zeros(-(-records // R), np.int64)
                    if overlap and checksums and manifest.describe_file(path)[1] != sha256:
                        manifest._differs(path)  # noqa: SLF001 - the one message for it
                else:
                    R, text = block
                    values = blocks.digests_from_hex(text)
                if not overlap:
                    continue
                row = rows
                rows += len(values)
                n_blocks = len(values)
                sizes = np.full(n_blocks, R, np.int64)
                if n_blocks:
                    sizes[-1] = records - R * (n_blocks - 1)
                a, b = max(begin, start) - begin, min(end, stop) - begin  # local records
                first, last = a // R, (b - 1) // R
                low, high = np.zeros(n_blocks, np.int64), sizes.copy()
                low[first], high[last] = a - first * R, b - last * R
                digests.append(values)
                counts.append(sizes)
                checked.append(np.full(n_blocks, checksums and block is not None))
                lo.append(low)
                hi.append(high)
                shard_of.append(np.full(n_blocks, len(labels), np.int64))
                index.append(np.arange(n_blocks, dtype=np.int64))
                labels.append(f"{path} (output generation {output.generation})")
                totals.append(n_blocks)
                self.segments.append((path, first * R, row + first, last - first + 1,
                                      int(last == n_blocks - 1), R))
                self.reads.append((path, b - a))
                if self.first_path is None:
                    self.first_path = path
        join = lambda parts, dtype: np.concatenate(parts).astype(dtype) if parts else (  # noqa: E731
            np.zeros([0], dtype))
        self.digests, self.counts = join(digests, np.int64), join(counts, np.int64)
        self.checked = join(checked, bool)
        self.lo, self.hi = join(lo, np.int64), join(hi, np.int64)
        self.shard_of, self.index = join(shard_of, np.int64), join(index, np.int64)
        self.labels = [f"{label}" for label in labels] or [""]
        self.totals = totals or [0]

    def locator(self, deterministic: bool, per_element: int, directories: str):
        """Elements released -> the shard read next (in order), for read errors."""
        ends = np.cumsum([n for _, n in self.reads])

        def where(released: int) -> str:
            g = released * per_element
            if not deterministic or not self.reads or g >= ends[-1]:
                return f"the output {directories}"
            shard = int(np.searchsorted(ends, g, side="right"))
            return f"{self.reads[shard][0]!r} (after {g} packs)"

        return where

    def dataset(self, spec: dict, deterministic: bool) -> tf.data.Dataset:
        paths, skips, firsts, ns, ends, sizes = (list(c) for c in zip(*self.segments)) \
            if self.segments else ([], [], [], [], [], [])
        segments = tf.data.Dataset.from_tensor_slices((
            tf.constant(paths, tf.string), tf.constant(skips, tf.int64),
            tf.constant(firsts, tf.int64), tf.constant(ns, tf.int64),
            tf.constant(ends, tf.int64), tf.constant(sizes, tf.int64)))
        if deterministic:
            blocks_ = segments.flat_map(_segment)
        else:
            blocks_ = segments.interleave(_segment, cycle_length=4,
                                          num_parallel_calls=tf.data.AUTOTUNE,
                                          deterministic=False)
        check = _checker(self, spec)
        return _add_empty(
            blocks_.map(tf.autograph.experimental.do_not_convert(check),
                        num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
            .unbatch(), spec)


def _segment(path, skip, first, n, to_end, R):
    """One shard's blocks ``first..first+n`` as ``(records, row)``; the end: ``-2 - last row``.

    With ``to_end`` an empty block (row -1) must follow the last one: a shard
    with more records than the manifest lists pairs a real block with it; a
    shorter one pairs the empty end marker with a row the manifest fills.
    """
    # A shard gone since the output was opened (a re-pack with other shard names)
    # is our one-line error too, not TensorFlow's NotFoundError.
    pattern = tf.strings.regex_replace(path, r"([*?\[\]\\])", r"\\\1")
    there = tf.debugging.Assert(tf.size(tf.io.matching_files(pattern)) > 0, [tf.strings.join([
        _MARK, "Every shard of a packed output must exist while it is read. Received: ",
        path, " is gone (removed or re-packed after the output was opened)"])])
    with tf.control_dependencies([there]):
        path = tf.identity(path)
    data = (tf.data.TFRecordDataset(path).skip(skip).batch(R).take(n + to_end)
            .concatenate(tf.data.Dataset.from_tensors(tf.zeros([0], tf.string))))
    rows = (tf.data.Dataset.range(first, first + n)
            .concatenate(tf.data.Dataset.from_tensors(-2 - (first + n - 1)))
            .take(n + to_end))
    return tf.data.Dataset.zip((data, rows))


def _checker(plan: _Plan, spec: dict):
    digests, counts = tf.constant(plan.digests), tf.constant(plan.counts)
    checked, lo, hi = tf.constant(plan.checked), tf.constant(plan.lo), tf.constant(plan.hi)
    labels, totals = tf.constant(plan.labels), tf.constant(plan.totals, tf.int64)
    shard_of, index = tf.constant(plan.shard_of), tf.constant(plan.index)
    parse = _parser(spec)

    def check(records, row):
        end = row < 0
        i = tf.where(end, -2 - row, row)
        count = tf.size(records, out_type=tf.int64)
        want = tf.where(end, tf.constant(0, tf.int64), tf.gather(counts, i))
        same = tf.logical_or(tf.logical_or(end, tf.logical_not(tf.gather(checked, i))),
                             tf.equal(blocks.digest(records), tf.gather(digests, i)))
        ok = tf.logical_and(tf.equal(count, want), same)
        shard = tf.gather(shard_of, i)
        block = tf.strings.join([" block ", tf.strings.as_string(tf.gather(index, i)), " of ",
                                 tf.strings.as_string(tf.gather(totals, shard))])
        message = tf.strings.join([
            _MARK, "Every block of a shard must hold the records its manifest lists. "
            "Received: ", tf.gather(labels, shard),
            tf.where(end, tf.constant(" after its last block"), block), ": ",
            tf.strings.as_string(count), " records", tf.where(
                tf.logical_and(tf.equal(count, want), tf.logical_not(same)),
                tf.constant(" of another digest"), tf.constant("")),
            ", the manifest ", tf.strings.as_string(want),
            " (damaged, truncated or replaced after the output was opened: re-packed "
            "while read?)"])
        assertion = tf.debugging.Assert(ok, [message])
        with tf.control_dependencies([assertion]):
            released = tf.where(end, tf.constant(0, tf.int64), tf.gather(lo, i))
            upto = tf.where(end, tf.constant(0, tf.int64), tf.gather(hi, i))
            return parse(records[released:upto])

    return check


def _parser(spec: dict):
    """Parse a block of serialized packs: every feature of non-zero width.

    Zero-width features (``M = 0``: ``masked_lm_*`` of shape ``[0]``) are
    not parsed (a zero-width `FixedLenFeature`) nor unbatched (TensorFlow's
    ``unbatch`` of a ``[n, 0]`` tensor crashes the process): `_add_empty`
    adds them to each pack after ``unbatch``.
    """
    parsed = {n: tf.io.FixedLenFeature(f["shape"], tf.float32 if f["dtype"] == "float32"
                                       else tf.int64)
              for n, f in spec.items() if int(np.prod(f["shape"])) > 0}

    def parse(serialized):
        out = tf.io.parse_example(serialized, parsed)
        return {n: tf.cast(t, tf.int32) if t.dtype == tf.int64 else t for n, t in out.items()}

    return parse


def _add_empty(dataset: tf.data.Dataset, spec: dict) -> tf.data.Dataset:
    """Each pack with the zero-width features of ``spec`` too, in ``spec``'s order."""
    empty = {n: (f["shape"], tf.float32 if f["dtype"] == "float32" else tf.int32)
             for n, f in spec.items() if int(np.prod(f["shape"])) == 0}
    if not empty:
        return dataset

    def add(pack):
        return {n: pack[n] if n not in empty else tf.zeros(*empty[n]) for n in spec}

    return dataset.map(add)


def _check_first_record(path: str, spec: dict) -> None:
    """The first record must hold exactly the manifest's features, of its kinds and sizes."""
    try:  # TFRecord framing: length (8 bytes), its CRC (4), the record, its CRC (4)
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            f.read(4)
            record = f.read(size) if size < (1 << 30) else b""
        if len(record) != size or size == 0:
            raise ValueError(f"a first record of {size} bytes, {len(record)} there")
        found = tf.train.Example.FromString(record).features.feature
    except Exception as error:  # noqa: BLE001 - an unreadable record, any kind
        raise TfpackError(f"Every shard must be a readable TFRecord file of tf.train.Example "
                          f"packs. Received: {path!r} ({type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''})") from None
    problems = []
    for name in sorted(set(found) - set(spec)):
        problems.append(f"{name} is not in the manifest")
    for name, feature in spec.items():
        if name not in found:
            problems.append(f"{name} is missing")
            continue
        want = "float_list" if feature["dtype"] == "float32" else "int64_list"
        kind = found[name].WhichOneof("kind")
        size = len(getattr(found[name], kind).value) if kind else 0
        if (kind or want) != want or size != int(np.prod(feature["shape"])):
            problems.append(f"{name} holds {size} values as {kind}, the manifest "
                            f"{feature['dtype']} {feature['shape']}")
    if problems:
        raise TfpackError(f"The manifest's features must be those the packs hold. Received: "
                          f"{path!r}, first record: {'; '.join(problems)}")


def _message(error: tf.errors.OpError, where: str) -> str:
    """One line for a TensorFlow error raised while reading a shard."""
    text = getattr(error, "message", None) or str(error)
    if _MARK in text:
        line = text.split(_MARK, 1)[1].split("\n", 1)[0]
        return line.rsplit("]", 1)[0] if "]" in line else line
    first = text.splitlines()[0] if text else ""
    first = first.split("}}", 1)[-1].strip() if first.startswith("{{") else first
    first = first.split(" [Op:", 1)[0]
    return (f"Every shard of a packed output must stay readable while it is read. Received: "
            f"{type(error).__name__} reading {where}: {first} (damaged, truncated or removed "
            "after the output was opened: re-packed while read?)")


class _Iterator(iterator_ops.OwnedIterator):
    def __init__(self, dataset, where):
        super().__init__(dataset)
        self._where = where
        self._released = 0

    def _next_internal(self):
        try:
            element = super()._next_internal()
            self._released += 1
            return element
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError,
                tf.errors.NotFoundError) as error:
            if isinstance(error, tf.errors.InvalidArgumentError) and _MARK not in str(error):
                raise
            raise TfpackError(_message(error, self._where(self._released))) from None


class _Raising(dataset_ops.UnaryUnchangedStructureDataset):
    def __init__(self, dataset: tf.data.Dataset, where):
        super().__init__(dataset, dataset._variant_tensor)  # noqa: SLF001 - same graph node
        self._where = where

    def __iter__(self):
        if tf.executing_eagerly():
            return _Iterator(self, self._where)
        return super().__iter__()


def _raising(dataset: tf.data.Dataset, where) -> tf.data.Dataset:
    """``dataset``, whose eager iterators raise `TfpackError` for a bad shard.

    The reading counterpart of `tfpack.data.boundary` (which sits above this
    layer and handles `TfpackError` raised in Python); the one message of a
    failed block check, and TensorFlow's own read errors, become one line.
    """
    return _Raising(dataset, where)
