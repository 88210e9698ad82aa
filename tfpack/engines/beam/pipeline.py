"""`pack_tfrecords`: ``tfpack pack`` as an Apache Beam pipeline.

Same job, same output as the local engine (`tfpack.engines.local`): for the
same input files, plan or algorithm, seed and ``packs_per_shard``, the same
packs holding the same examples in the same order, in the same shards. The
graph (steps in `tfpack.engines.beam.steps`)::

    files ─ scan (validate, lengths) ─┬─ summaries ─ decide (plan, placement) ─┐ side input
                                      └─ place ◄──────────────────────────────┘
    place ─ totals per shard ─ limits (K, M) ─┐ side input
    place ─ route records to shards ◄──────────┘ ─ GroupByKey(shard) ─ build + write shard
    finish (after every shard): plan.json, stats.json, manifest.json last; or the error

Records are keyed by output shard (``pack id // packs_per_shard``, pack ids
shuffled independently of length), so a key holds at most
``packs_per_shard`` packs and no worker receives all examples of a length.

Example:

>>> import tfpack.beam
>>> stats = tfpack.beam.pack_tfrecords(
...     "wiki_*.tfrecord", "packed", max_length=512, max_sequences_per_pack=3,
...     algorithm="lpfhp", beam_options="--direct_num_workers=4")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import secrets
import time

import apache_beam as beam
import numpy as np

from tfpack.engines.beam import steps
from tfpack.engines.beam.options import pipeline_options
from tfpack.errors import TfpackError

__all__ = ["pack_tfrecords"]

_ERROR_FILE = ".tfpack-beam-error-"


def pack_tfrecords(
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
    beam_options=None,
) -> dict:
    """Pack Google-format TFRecords into packed shards on Apache Beam; returns the stats.

    Arguments as `tfpack.data.pack_records` (the output directory is
    checked, built beside and swapped in the same way, `tfpack.formats.outputs`),
    plus ``beam_options``: Beam pipeline options (a string as on a command
    line, or a list), added after the default in-process runner
    (`tfpack.beam.DEFAULT_OPTIONS`).

    Raises:
        TfpackError: as the local engine does, for the same bad input, with
            nothing written under ``output_dir``.
    """
    from tfpack.formats import outputs, validation
    from tfpack.data.flow import check_plan_fits, check_source

    check_source(plan, algorithm)
    if not isinstance(packs_per_shard, int) or packs_per_shard < 1:
        raise TfpackError("`packs_per_shard` must be a positive integer. "
                          f"Received: packs_per_shard={packs_per_shard!r}")
    validation.check_sizes(max_length, max_sequences_per_pack, max_predictions_per_pack)
    if plan is not None:
        check_plan_fits(plan, max_length, max_sequences_per_pack)
    options = pipeline_options(beam_options)
    started = time.perf_counter()
    with outputs.replacing_output(output_dir, overwrite=overwrite) as staging:
        stats = _run(options, input_pattern, staging, dict(
            max_length=int(max_length), max_sequences_per_pack=max_sequences_per_pack,
            algorithm=algorithm, plan=plan, max_predictions_per_pack=max_predictions_per_pack,
            packs_per_shard=packs_per_shard, seed=seed, shuffle=shuffle))
    stats["seconds"] = {"total": time.perf_counter() - started}
    return stats


def _run(options, input_pattern, output_dir: str, job: dict) -> dict:
    """Build and run the pipeline into the empty ``output_dir``; the stats, or raise."""
    from tfpack.formats.records import GOOGLE_FEATURES, list_files

    files = list_files(input_pattern, required=GOOGLE_FEATURES)
    error_path = os.path.join(output_dir, _ERROR_FILE + secrets.token_hex(4))
    L, pps = job["max_length"], job["packs_per_shard"]
    with beam.Pipeline(options=options) as p:
        scans = (p | "files" >> beam.Create(list(enumerate(files)))
                 | "scan" >> beam.Map(steps.scan_file))
        decision = beam.pvalue.AsSingleton(
            scans | "summary" >> beam.Map(steps.summary, L)
            | "summaries" >> beam.combiners.ToList()
            | "decide" >> beam.Map(
                steps.decide, files=files, max_length=L,
                max_sequences_per_pack=job["max_sequences_per_pack"], plan=job["plan"],
                algorithm=job["algorithm"], seed=job["seed"], shuffle=job["shuffle"],
                packs_per_shard=pps))
        placed = scans | "place" >> beam.FlatMap(steps.place_file, decision)
        limit = beam.pvalue.AsSingleton(
            placed | "pack totals" >> beam.FlatMap(steps.pack_totals, pps)
            | "by shard" >> beam.GroupByKey()
            | "shard totals" >> beam.Map(steps.shard_totals)
            | "all totals" >> beam.combiners.ToList()
            | "limits" >> beam.Map(
                steps.limits, decision, max_sequences_per_pack=job["max_sequences_per_pack"],
                max_predictions_per_pack=job["max_predictions_per_pack"]))
        bad_pack = placed | "bad pack" >> beam.FlatMap(steps.examples_of_pack, limit)
        shards = (placed | "route" >> beam.FlatMap(steps.route_file, limit, pps)
                  | "group" >> beam.GroupByKey()
                  | "build" >> beam.ParDo(_BuildShard(output_dir, L), decision, limit))
        _ = (p | "start finish" >> beam.Create([None])
             | "finish" >> beam.Map(
                 _finish, decision, limit, beam.pvalue.AsList(shards),
                 beam.pvalue.AsList(bad_pack), output_dir=output_dir, error_path=error_path,
                 files=len(files), job=job))
    if os.path.exists(error_path):
        with open(error_path, encoding="utf-8") as f:
            raise TfpackError(f.read())
    with open(os.path.join(output_dir, "stats.json"), encoding="utf-8") as f:
        return json.load(f)


class _BuildShard(beam.DoFn):
    """Build one output shard (once every record of it is grouped) and write it."""

    def __init__(self, output_dir: str, max_length: int):
        self.output_dir = output_dir
        self.max_length = max_length
        self.builder = None

    def process(self, item, decision, limit):
        import tensorflow as tf

        from tfpack.formats import manifest
        from tfpack.formats.records import packed_features, serialize_packs
        from tfpack.engines.shards import ShardBuilder

        shard, parts = item
        records, splits, ids = steps.shard_layout(list(parts))
        if self.builder is None:
            self.builder = ShardBuilder(self.max_length, limit["K"], limit["M"])
        name = f"part-{shard:05d}-of-{decision['shards']:05d}.tfrecord"
        path = os.path.join(self.output_dir, name)
        count, features = 0, None
        with manifest.atomic_path(path) as partial, tf.io.TFRecordWriter(partial) as writer:
            for packs in self.builder.packs(records, np.arange(len(records)), splits,
                                            example_ids=ids):
                features = features or packed_features(packs)
                for record in serialize_packs(packs):
                    writer.write(record)
                    count += 1
        # Hashed here, by the worker that wrote it, not by one process at the end.
        size, sha256 = manifest.describe_file(path)
        yield {"shard": shard, "info": manifest.ShardInfo(name, count, size, sha256),
               "features": features}


def _finish(_, decision, limit, shards, bad_pack, *, output_dir, error_path, files, job):
    """After every shard: plan, stats and, last, the manifest; or the one error."""
    import hashlib

    from tfpack.formats import manifest
    from tfpack.data.windows import predictions_error

    error = decision["error"] or limit["error"]
    if error is None and limit.get("bad_pack") is not None:
        examples = [i for _, _, i in sorted(bad_pack)]
        error = str(predictions_error(job["max_predictions_per_pack"], limit["bad_pack"],
                                      examples, limit["most"]))
    if error is not None:
        manifest.write_atomic(error_path, error)
        return
    shards = sorted(shards, key=lambda s: s["shard"])
    plan, L = decision["plan"], job["max_length"]
    K, M = limit["K"], limit["M"]
    stats = {
        "input_files": files,
        "output_files": [s["info"].name for s in shards],
        "packs": decision["packs"],
        "sequences": decision["sequences"],
        "tokens": decision["tokens"],
        "padding_tokens": decision["packs"] * L - decision["tokens"],
        "efficiency": decision["tokens"] / (decision["packs"] * L),
        "packing_factor": decision["sequences"] / decision["packs"],
        "max_length": L,
        "max_sequences_per_pack": K,
        "max_predictions_per_pack": M,
        "algorithm": plan.algorithm,
        "seed": job["seed"],
        "engine": "beam",
    }
    plan_json = plan.to_json()
    manifest.write_atomic(os.path.join(output_dir, "plan.json"), plan_json)
    manifest.write_atomic(os.path.join(output_dir, "stats.json"), json.dumps(stats, indent=2))
    # Last: the manifest that makes the output complete for `read_packed`.
    manifest.write_manifest(
        output_dir, [s["info"] for s in shards], features=shards[0]["features"],
        max_length=L, max_sequences_per_pack=K, max_predictions_per_pack=M,
        sequences=decision["sequences"], tokens=decision["tokens"],
        files=("plan.json", "stats.json"), seed=job["seed"],
        plan_sha256=hashlib.sha256(plan_json.encode()).hexdigest(),
        created_by="tfpack pack --engine beam",
        extra={"algorithm": plan.algorithm, "shuffle": job["shuffle"],
               "packs_per_shard": job["packs_per_shard"], "engine": "beam"})
