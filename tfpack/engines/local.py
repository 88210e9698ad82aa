"""The local engine: ``tfpack pack`` in one process, beyond host memory.

`pack_records` (``tfpack pack``, ``--engine local``) runs the stages of
`tfpack.engines.base` in two passes, so that only per-example integer arrays
(lengths, prediction counts, pack order, where each example's values start)
scale with the dataset in memory; examples themselves stay on disk and are
read a chunk of packs at a time (docs/data.md, "Memory"):

- pass 1, scan: read, parse and check every record once
  (`tfpack.formats.validation`; a bad one fails naming its file and index
  before anything is written) and keep its lengths; what it parsed goes,
  without padding, to a flat file on disk (`tfpack.engines.spill`). Every
  input file must still have the size and modification time it had before
  the scan (else one `TfpackError` naming it). Then plan the histogram (or
  take ``plan=``), assign examples to packs, shuffle whole packs with
  ``seed``; output shard ``s`` holds packs
  ``[s * packs_per_shard, (s + 1) * packs_per_shard)``.
- pass 2, build: for each shard, serialize its packs straight from the
  spill (`tfpack.engines.columns`, compiled, two chunks at a time; each
  chunk reads only its examples, one positioned read each, nothing mapped) and
  write the output shard with its block digests. The bytes are those the
  Beam engine writes through `tfpack.data.assemble`
  (`tfpack.engines.shards.ShardBuilder`): both engines write the same shards.

Outputs in ``output_dir``: ``part-00000-of-000NN.tfrecord`` ...,
``plan.json`` (`PackingPlan.to_json`), ``stats.json`` and, written last,
``manifest.json`` (`tfpack.formats.manifest`), all by `tfpack.engines.base`.
The whole output is built in a hidden sibling directory and swapped in when
complete (`tfpack.formats.outputs`): a crash leaves the old output or the new
one.

Example:

>>> from tfpack.engines.local import pack_records
>>> stats = pack_records("wiki_*.tfrecord", "packed", max_length=512,
...                      max_sequences_per_pack=3, algorithm="lpfhp")  # doctest: +SKIP
>>> stats["efficiency"]  # doctest: +SKIP
0.996
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import shutil
import tempfile
import time

import numpy as np

from tfpack.engines import base
from tfpack.engines.spill import Spill
from tfpack.packing.flow import offline_packs

# TensorFlow and the record formats are imported where they are used, so that
# registering the engine (`tfpack pack --help`) does not start TensorFlow.

__all__ = ["LocalEngine", "pack_records"]

# Packs per call of the encoder: about this many tokens (bounds its memory), and
# chunks encoded ahead of the writer (memory: about this many chunks).
_CHUNK_TOKENS = 1 << 19
_AHEAD = 4


def pack_records(
    input_pattern,
    output_dir: str,
    *,
    max_length: int,
    max_sequences_per_pack: int | None,
    algorithm: str | None = None,
    plan=None,
    max_predictions_per_pack: int | None = None,
    packs_per_shard: int = 16384,
    seed: int = 0,
    shuffle: bool = True,
    overwrite: bool = False,
    progress: bool = False,
    batch_size: int | None = None,
    balance=False,
) -> dict:
    """Pack Google-format TFRecords into packed shards; returns the stats.

    Args:
        input_pattern: glob, comma-separated globs or list of globs.
        output_dir: must be missing or empty; gets the shards, ``plan.json``,
            ``stats.json`` and, last, ``manifest.json``. Written beside it and
            swapped in whole (`tfpack.formats.outputs`).
        max_length, max_sequences_per_pack, algorithm, plan,
            max_predictions_per_pack, packs_per_shard, seed, shuffle: the
            `tfpack.engines.base.Job`.
        overwrite: replace a previous tfpack output in ``output_dir``
            (recognised by its manifest; nothing else is ever replaced).
        progress: show tqdm progress bars on stderr.
        batch_size, balance: balanced batches, see `tfpack.engines.base.Job`;
            ``stats["balance"]`` says how evenly.

    Returns:
        The dict written to ``stats.json``.
    """
    job = {k: v for k, v in locals().items() if k in base.JOB_FIELDS}
    return base.pack("local", input_pattern, output_dir, overwrite=overwrite,
                     engine_options={"progress": progress}, **job)


@base.register("local")
class LocalEngine(base.Engine):
    """Stages 1-4 in this process, in two passes, one read of the input (module docstring).

    Args:
        progress: show tqdm progress bars on stderr.
    """

    def __init__(self, *, progress: bool = False):
        self.progress = progress

    @classmethod
    def options_from(cls, args) -> dict:
        import sys

        return {"progress": sys.stderr.isatty()}  # bars only for a person watching

    def build(self, job: base.Job, staging: str) -> base.Built:
        from tfpack.formats import manifest
        from tfpack.formats.records import GOOGLE_FEATURES, list_files, scan_google_records

        started = time.perf_counter()
        files = list_files(job.input_pattern, required=GOOGLE_FEATURES)
        stamps = [base.input_stamp(f) for f in files]  # each pass checks the files kept them
        spill = Spill(tempfile.mkdtemp(prefix=f"{manifest.TEMP_PREFIX}spill-", dir=staging))
        try:
            try:
                lengths, predictions = scan_google_records(files, progress=self.progress,
                                                           keep=spill.append)
            finally:
                spill.close()
            _check_unchanged(files, stamps)
        except BaseException:
            shutil.rmtree(spill.folder, ignore_errors=True)
            raise
        scanned = time.perf_counter()

        packs = offline_packs(lengths, predictions, max_length=job.max_length,
                              max_sequences_per_pack=job.max_sequences_per_pack,
                              max_predictions_per_pack=job.max_predictions_per_pack,
                              plan=job.plan, algorithm=job.algorithm, seed=job.seed,
                              shuffle=job.shuffle, balance=job.balance,
                              batch_size=job.batch_size if job.balance else None)
        order, splits = packs.order, packs.splits
        K, M = packs.max_sequences_per_pack, packs.max_predictions_per_pack
        num_packs = len(splits) - 1
        planned = time.perf_counter()

        num_shards = -(-num_packs // job.packs_per_shard)
        try:
            shards, features = _build_shards(
                job, spill, staging, order, splits, num_shards, K, M, self.progress,
                {"tokens": lengths, "predictions": predictions})
        finally:
            shutil.rmtree(spill.folder, ignore_errors=True)
        return base.Built(
            plan=packs.plan, shards=shards, features=features, max_sequences_per_pack=K,
            max_predictions_per_pack=M, input_files=len(files), sequences=int(len(lengths)),
            tokens=int(lengths.sum()), packs=num_packs,
            seconds={"scan": scanned - started, "plan": planned - scanned,
                     "build": time.perf_counter() - planned},
            balance=packs.balance.to_dict() if packs.balance else None)


def _check_unchanged(files, stamps) -> None:
    for path, stamp in zip(files, stamps):
        base.check_unchanged(path, stamp)


def _build_shards(job, spill, output_dir, order, splits, num_shards, K, M, progress, counts):
    """Pass 2: serialize each shard's packs straight from the spill.

    The packs' features are described from the examples' values
    (`tfpack.engines.columns`) and written by the compiled encoder, two
    chunks at a time (it runs without the GIL): no dense pack is built.
    """
    from tqdm import tqdm

    from tfpack.data.features import packed_feature_spec
    from tfpack.features import FeatureRoles
    from tfpack.engines.columns import pack_columns, starts_of
    from tfpack.formats import manifest
    from tfpack.formats.blocks import ShardWriter
    from tfpack.formats.protos import encode

    sizes = {"L": job.max_length, "K": K, "M": M}
    num_packs = len(splits) - 1
    packs_per_shard = job.packs_per_shard
    chunk = max(1, _CHUNK_TOKENS // job.max_length)
    # Every chunk of packs, shard after shard: encoded ahead of the writer,
    # across shard ends, so both threads stay busy.
    chunks = [(start, min(start + chunk, (s + 1) * packs_per_shard, num_packs))
              for s in range(num_shards)
              for start in range(s * packs_per_shard, min((s + 1) * packs_per_shard, num_packs),
                                 chunk)]
    values = spill.reader()  # each chunk reads its examples (pread), nothing mapped
    starts = starts_of(counts)  # once: per chunk it would cost the dataset's size
    shards = []
    bar = tqdm(total=num_packs, desc="pass 2: build", unit=" packs", disable=not progress)

    def encoded(bounds):
        start, end = bounds
        local = splits[start:end + 1] - splits[start]
        return encode(local, pack_columns(values, counts, members=order[splits[start]:splits[end]],
                                          splits=local, sizes=sizes, starts=starts), framed=True)

    with values, concurrent.futures.ThreadPoolExecutor(2) as pool:
        pending = collections.deque(pool.submit(encoded, c) for c in chunks[:_AHEAD])
        ahead = iter(chunks[_AHEAD:])
        for s in range(num_shards):
            path = os.path.join(output_dir, job.shard_name(s, num_shards))
            shard_end = min((s + 1) * packs_per_shard, num_packs)
            with manifest.atomic_path(path) as partial, ShardWriter(partial) as writer:
                done = s * packs_per_shard
                while done < shard_end:
                    data, record_sizes = pending.popleft().result()
                    following = next(ahead, None)
                    if following is not None:
                        pending.append(pool.submit(encoded, following))
                    writer.write_framed(data, record_sizes)
                    bar.update(len(record_sizes))
                    done += len(record_sizes)
            shards.append(writer.shard_info(path))
    bar.close()
    # The manifest's features, as `packed_features` gives them for dense packs.
    spec = packed_feature_spec(FeatureRoles.bert(), job.max_length, K, M)
    features = {n: ("float32" if s.dtype.is_floating else "int64", s.shape.as_list())
                for n, s in spec.items()} if num_packs else None
    return shards, features
