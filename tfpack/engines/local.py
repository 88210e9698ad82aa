"""Pack Google BERT TFRecords into packed TFRecord shards, beyond host memory.

`pack_records` (behind ``tfpack pack``) works in passes so that only
per-example integer arrays (lengths, prediction counts, pack of each example)
scale with the dataset; examples themselves are held one bucket at a time:

1. check every record (`tfpack.formats.validation`; a bad one fails naming its
   file and index before anything is written) and keep its lengths.
2. plan the histogram (or take ``plan=``), assign examples to packs, shuffle
   whole packs with ``seed``; output shard ``s`` holds packs
   ``[s * packs_per_shard, (s + 1) * packs_per_shard)``.
3. route: read the records again and append each one, unparsed, to the
   temporary bucket file of its shard.
4. build: for each bucket, parse its records, assemble its packs and write
   the output shard (`tfpack.engines.shards.ShardBuilder`, the builder the Beam
   engine uses too); delete the bucket.

Outputs in ``output_dir``: ``part-00000-of-000NN.tfrecord`` ...,
``plan.json`` (`PackingPlan.to_json`), ``stats.json`` and, written last,
``manifest.json`` (`tfpack.formats.manifest`). The whole output is built in a
hidden sibling directory and swapped in when complete
(`tfpack.formats.outputs`): a crash leaves the old output or the new one.

Example:

>>> from tfpack.engines.local import pack_records
>>> stats = pack_records("wiki_*.tfrecord", "packed", max_length=512,
...                      max_sequences_per_pack=3, algorithm="lpfhp")  # doctest: +SKIP
>>> stats["efficiency"]  # doctest: +SKIP
0.996
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
from tqdm import tqdm

from tfpack.formats import manifest, outputs, validation
from tfpack.formats.records import (
    GOOGLE_FEATURES,
    list_files,
    packed_features,
    scan_google_records,
    serialize_packs,
)
from tfpack.engines.shards import ShardBuilder
from tfpack.errors import TfpackError

__all__ = ["pack_records", "read_lengths"]

_BATCH = 1024


def read_lengths(files: list[str], *, progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Pass 1: check every record; its tokens and real predictions, in order.

    `tfpack.formats.records.scan_google_records` under the name the engines use.
    """
    return scan_google_records(files, progress=progress)


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
) -> dict:
    """Pack Google-format TFRecords into packed shards; returns the stats.

    Args:
        input_pattern: glob, comma-separated globs or list of globs.
        output_dir: must be missing or empty; gets the shards, ``plan.json``,
            ``stats.json`` and, last, ``manifest.json``. Written beside it and
            swapped in whole (`tfpack.formats.outputs`).
        max_length, max_sequences_per_pack: ``L`` and ``K`` (``None``: the
            depth the plan uses).
        algorithm: planner name (default ``"optimal"``), or ``plan``: a
            `tfpack.packing.PackingPlan` (e.g. from ``tfpack plan``).
        max_predictions_per_pack: ``M``; ``None``: the most any pack needs.
        packs_per_shard: packs per output shard; bounds the memory of pass 4.
        seed: seeds the assignment and the pack shuffle.
        shuffle: shuffle whole packs across shards.
        overwrite: replace a previous tfpack output in ``output_dir``
            (recognised by its manifest; nothing else is ever replaced).
        progress: show tqdm progress bars on stderr.

    Returns:
        The dict written to ``stats.json``.
    """
    from tfpack.data.flow import check_plan_fits, check_source

    check_source(plan, algorithm)
    if not isinstance(packs_per_shard, int) or packs_per_shard < 1:
        raise TfpackError("`packs_per_shard` must be a positive integer. "
                          f"Received: packs_per_shard={packs_per_shard!r}")
    validation.check_sizes(max_length, max_sequences_per_pack, max_predictions_per_pack)
    if plan is not None:
        check_plan_fits(plan, max_length, max_sequences_per_pack)
    with outputs.replacing_output(output_dir, overwrite=overwrite) as staging:
        return _pack(input_pattern, staging, max_length, max_sequences_per_pack, algorithm,
                     plan, max_predictions_per_pack, packs_per_shard, seed, shuffle, progress)


def _pack(input_pattern, output_dir, max_length, max_sequences_per_pack, algorithm, plan,
          max_predictions_per_pack, packs_per_shard, seed, shuffle, progress) -> dict:
    """`pack_records` into the empty directory ``output_dir``."""
    from tfpack.data.flow import offline_packs

    started = time.perf_counter()
    files = list_files(input_pattern, required=GOOGLE_FEATURES)
    lengths, predictions = scan_google_records(files, progress=progress)
    read_seconds = time.perf_counter() - started

    packs = offline_packs(lengths, predictions, max_length=max_length,
                          max_sequences_per_pack=max_sequences_per_pack,
                          max_predictions_per_pack=max_predictions_per_pack, plan=plan,
                          algorithm=algorithm, seed=seed, shuffle=shuffle)
    plan, order, splits = packs.plan, packs.order, packs.splits
    K, M = packs.max_sequences_per_pack, packs.max_predictions_per_pack
    num_packs = len(splits) - 1
    plan_seconds = time.perf_counter() - started - read_seconds

    num_shards = -(-num_packs // packs_per_shard)
    # Shard of each example: one int per example, like `lengths`.
    pack_of = np.empty(len(lengths), np.int64)
    pack_of[order] = np.repeat(np.arange(num_packs), np.diff(splits))
    shard_of = (pack_of // packs_per_shard).astype(np.int32)
    del pack_of
    tmp = tempfile.mkdtemp(prefix=f"{manifest.TEMP_PREFIX}buckets-", dir=output_dir)
    try:
        route_started = time.perf_counter()
        _route(files, shard_of, tmp, num_shards, progress)
        build_started = time.perf_counter()
        shards, features = _build_shards(tmp, output_dir, order, splits, shard_of,
                                         packs_per_shard, num_shards, max_length, K, M,
                                         progress)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    tokens = int(lengths.sum())
    stats = {
        "input_files": len(files),
        "output_files": [name for name, _ in shards],
        "packs": num_packs,
        "sequences": int(len(lengths)),
        "tokens": tokens,
        "padding_tokens": num_packs * max_length - tokens,
        "efficiency": tokens / (num_packs * max_length),
        "packing_factor": len(lengths) / num_packs,
        "max_length": max_length,
        "max_sequences_per_pack": K,
        "max_predictions_per_pack": M,
        "algorithm": plan.algorithm,
        "seed": seed,
        "seconds": {"read_lengths": read_seconds, "plan": plan_seconds,
                    "route": build_started - route_started,
                    "build": time.perf_counter() - build_started,
                    "total": time.perf_counter() - started},
    }
    plan_json = plan.to_json()
    manifest.write_atomic(os.path.join(output_dir, "plan.json"), plan_json)
    manifest.write_atomic(os.path.join(output_dir, "stats.json"), json.dumps(stats, indent=2))
    manifest.write_manifest(
        output_dir, shards, features=features, max_length=max_length,
        max_sequences_per_pack=K, max_predictions_per_pack=M, sequences=len(lengths),
        tokens=tokens, files=("plan.json", "stats.json"), seed=seed,
        plan_sha256=hashlib.sha256(plan_json.encode()).hexdigest(), created_by="tfpack pack",
        extra={"algorithm": plan.algorithm, "shuffle": shuffle,
               "packs_per_shard": packs_per_shard})
    return stats


def _route(files, shard_of, tmp, num_shards, progress):
    """Pass 3: append each raw record to its shard's bucket file."""
    writers = [tf.io.TFRecordWriter(os.path.join(tmp, f"bucket-{s:05d}"))
               for s in range(num_shards)]
    try:
        index = 0
        dataset = tf.data.TFRecordDataset(files).batch(_BATCH).prefetch(2)
        with tqdm(total=len(shard_of), desc="pass 2: route", unit=" examples",
                  disable=not progress) as bar:
            for batch in dataset:
                records = batch.numpy()
                for record, shard in zip(records, shard_of[index:index + len(records)]):
                    writers[shard].write(record)
                index += len(records)
                bar.update(len(records))
    finally:
        for writer in writers:
            writer.close()
    if index != len(shard_of):
        raise TfpackError("The input files changed between passes. "
                          f"Received: {len(shard_of)} examples, then {index}")


def _build_shards(tmp, output_dir, order, splits, shard_of, packs_per_shard, num_shards,
                  L, K, M, progress):
    """Pass 4: turn each bucket into one output shard of packs (`ShardBuilder`)."""
    # Examples of each shard in input order = their order in its bucket file.
    by_shard = np.argsort(shard_of, kind="stable")
    shard_starts = np.searchsorted(shard_of[by_shard], np.arange(num_shards + 1))
    num_packs = len(splits) - 1
    builder = ShardBuilder(L, K, M)
    shards, features = [], None
    bar = tqdm(total=num_packs, desc="pass 3: build", unit=" packs", disable=not progress)
    for s in range(num_shards):
        members = by_shard[shard_starts[s]:shard_starts[s + 1]]  # global ids, ascending
        first, last = s * packs_per_shard, min((s + 1) * packs_per_shard, num_packs)
        local_splits = splits[first:last + 1] - splits[first]
        local_order = np.searchsorted(members, order[splits[first]:splits[last]])
        bucket = tf.data.TFRecordDataset(os.path.join(tmp, f"bucket-{s:05d}"))
        name = f"part-{s:05d}-of-{num_shards:05d}.tfrecord"
        with manifest.atomic_path(os.path.join(output_dir, name)) as partial, \
                tf.io.TFRecordWriter(partial) as writer:
            for packs in builder.packs(bucket, local_order, local_splits, example_ids=members):
                features = features or packed_features(packs)
                for record in serialize_packs(packs):
                    writer.write(record)
                bar.update(len(packs["input_ids"]))
        os.remove(os.path.join(tmp, f"bucket-{s:05d}"))
        shards.append((name, last - first))
    bar.close()
    return shards, features
