"""Stages 1-4 of ``tfpack pack`` as one Apache Beam pipeline, for any runner.

Same job, same output as the local engine (`tfpack.engines.local`): for the
same input files, plan or algorithm, seed and ``packs_per_shard``, the same
packs holding the same examples in the same order, in the same shards. The
graph (steps in `tfpack.engines.beam.steps`)::

    files ─ scan (validate, lengths) ─┬─ summaries ─ decide (plan, placement) ─┐ side input
                                      └─ place ◄──────────────────────────────┘
    place ─ totals per shard ─ limits (K, M) ─┐ side input
    place ─ route records to shards ◄──────────┘ ─ GroupByKey(shard) ─ build + write shard
    collect (applied last, needs every step): the result file, or the error

Records are keyed by output shard (``pack id // packs_per_shard``, pack ids
shuffled independently of length), so a key holds at most
``packs_per_shard`` packs and no worker receives all examples of a length.

It relies only on what every runner gives: elements, side inputs and the
shared output path. No step keeps state between elements beyond a cache; and
since a runner may compute a side input more than once, and deliver an
element more than once (Beam's Dask runner recomputes each side input where
it is read and can replay a step's outputs), every step's result is keyed by
its source (input file, output shard) and each merge keeps one per key and
checks that none is missing. The last step writes one small result file into
the staging directory; the launching process reads it and finishes the output
(`tfpack.engines.base.finish`).

Example:

>>> import tfpack.beam
>>> stats = tfpack.beam.pack_tfrecords(
...     "wiki_*.tfrecord", "packed", max_length=512, max_sequences_per_pack=3,
...     algorithm="lpfhp", beam_options="--direct_num_workers=4")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets

import apache_beam as beam
import numpy as np

from tfpack.engines import base
from tfpack.engines.beam import steps
from tfpack.errors import TfpackError
from tfpack.packing import PackingPlan

__all__ = ["run_pipeline"]

_RESULT_FILE = ".tfpack-beam-result-"


def run_pipeline(options, job: base.Job, files: list[str], staging: str) -> base.Built:
    """Run stages 1-4 of ``job`` on ``files`` into ``staging``; what they built, or raise.

    Raises:
        TfpackError: bad input (the local engine's message), or a failure
            inside the runner, as one line naming the step that failed.
    """
    result_path = os.path.join(staging, _RESULT_FILE + secrets.token_hex(4))
    p = beam.Pipeline(options=options)
    _graph(p, job, files, staging, result_path)
    result = None
    try:
        result = p.run()
        result.wait_until_finish()
    except Exception as error:  # noqa: BLE001  (any runner, any failure: one line)
        raise TfpackError(runner_failure(error)) from None
    finally:
        client = getattr(result, "client", None)  # the Dask runner's connection
        if client is not None:
            client.close()
    if not os.path.exists(result_path):
        raise TfpackError("The Beam runner must run the pipeline to its last step. Received: "
                          f"no result in {staging!r} (is the output path shared with the "
                          "workers?)")
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    for name in os.listdir(staging):  # the output holds only what the manifest lists
        if name.startswith((_RESULT_FILE, steps.CACHE_PREFIX)):
            os.remove(os.path.join(staging, name))
    if result["error"] is not None:
        raise TfpackError(result["error"])
    from tfpack.formats.manifest import ShardInfo

    return base.Built(
        plan=PackingPlan.from_json(result["plan"]),
        shards=[ShardInfo(**s) for s in result["shards"]],
        features={n: tuple(f) for n, f in result["features"].items()},
        max_sequences_per_pack=result["K"], max_predictions_per_pack=result["M"],
        input_files=len(files), sequences=result["sequences"], tokens=result["tokens"],
        packs=result["packs"], balance=result["balance"])


def _graph(p, job: base.Job, files: list[str], staging: str, result_path: str) -> None:
    def step(name, function):
        return steps.Step(name, function).run
    L, pps = job.max_length, job.packs_per_shard
    scans = (p | "files" >> beam.Create(list(enumerate(files)))
             | "scan" >> beam.Map(step("scan", steps.scan_file), cache_dir=staging))
    decision = beam.pvalue.AsSingleton(
        scans | "summary" >> beam.Map(step("summary", steps.summary), L)
        | "summaries" >> beam.combiners.ToList()
        | "decide" >> beam.Map(step("decide", steps.decide), files=files, job=job,
                               cache_dir=staging))
    placed = scans | "place" >> beam.FlatMap(step("place", steps.place_file), decision)
    limit = beam.pvalue.AsSingleton(
        placed | "pack totals" >> beam.FlatMap(step("pack totals", steps.pack_totals), pps)
        | "by shard" >> beam.GroupByKey()
        | "shard totals" >> beam.Map(step("shard totals", steps.shard_totals))
        | "all totals" >> beam.combiners.ToList()
        | "limits" >> beam.Map(step("limits", steps.limits), decision, job=job))
    bad_pack = placed | "bad pack" >> beam.FlatMap(step("bad pack", steps.examples_of_pack),
                                                   limit)
    shards = (placed | "route" >> beam.FlatMap(step("route", steps.route_file), limit, pps)
              | "group" >> beam.GroupByKey()
              | "build" >> beam.ParDo(_BuildShard(staging, job), decision, limit))
    # Applied last and fed by every branch: runners that compute only what the
    # last step needs (the Dask runner) still run the whole pipeline.
    _ = (p | "start collect" >> beam.Create([None])
         | "collect" >> beam.Map(
             step("collect", steps.collect), decision, limit, beam.pvalue.AsList(shards),
             beam.pvalue.AsList(bad_pack), job=job, result_path=result_path))


class _BuildShard(beam.DoFn):
    """Stage 4: build one output shard (once every record of it is grouped) and write it."""

    def __init__(self, staging: str, job: base.Job):
        self.staging = staging
        self.job = job

    def process(self, item, decision, limit):
        try:
            yield self._build(item, decision, limit)
        except Exception as error:  # noqa: BLE001
            raise steps.StepFailed.of("build", error) from error

    def _build(self, item, decision, limit) -> dict:
        import dataclasses

        shard, parts = item
        records, splits, ids, lengths = steps.shard_layout(list(parts), with_lengths=True)
        builder = _shard_builder(self.job.max_length, limit["K"], limit["M"])
        name = self.job.shard_name(shard, decision["shards"])
        # Written, hashed and digested here, by the worker that built it, not by
        # one process at the end.
        info, features = builder.write(os.path.join(self.staging, name), records,
                                       np.arange(len(records)), splits, example_ids=ids,
                                       lengths=lengths)
        return {"shard": int(shard), **dataclasses.asdict(info), "features": features}


@functools.lru_cache(maxsize=4)
def _shard_builder(L: int, K: int, M: int):
    """One `ShardBuilder` per worker process and ``(L, K, M)``: a cache only.

    Runners may hand every bundle a fresh copy of a DoFn (the Dask runner
    does), and each new builder traces its graphs again (about a second).
    """
    from tfpack.engines.shards import ShardBuilder

    return ShardBuilder(L, K, M)


_STEP = re.compile(r"tfpack step '(?P<step>[^']+)' failed: (?P<why>[^\n]*)")
_BEAM_STEP = re.compile(r"\[while running '(?P<step>[^']+)'\]")


def runner_failure(error: BaseException) -> str:
    """One line for a failure inside the runner, naming the step that failed.

    >>> runner_failure(RuntimeError("Traceback ...\\nRuntimeError: tfpack step 'route' "
    ...                             "failed: OSError: disk full [while running 'route']"))
    "The Beam pipeline failed in step 'route': OSError: disk full"
    """
    text = str(error)
    found = _STEP.search(text)
    if found:
        why = _BEAM_STEP.sub("", found["why"]).strip()
        if why.startswith("TfpackError: "):  # bad input found inside a step: its own line
            return why[len("TfpackError: "):]
        return f"The Beam pipeline failed in step '{found['step']}': {why}"
    beam_step = _BEAM_STEP.search(text)
    where = f" in step '{beam_step['step']}'" if beam_step else ""
    line = next((l.strip() for l in reversed(text.splitlines()) if l.strip()), "")
    line = _BEAM_STEP.sub("", line).strip()
    return f"The Beam runner failed{where}: {type(error).__name__}: {line}"
