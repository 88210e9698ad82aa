"""The steps of the Beam packing pipeline, as plain functions of numpy data.

Each step works on one input file or one output shard, so no worker needs
all examples, and none receives all examples of one length: records are
grouped by output shard (``pack id // packs_per_shard``), and pack ids are a
seeded permutation independent of length. Steps report bad input as data
(an ``"error"`` entry) instead of raising inside a worker, so the launcher
raises the one `TfpackError` the local engine raises, and nothing is
written that claims to be complete. Anything else that fails inside a step
is raised as `StepFailed`, naming the step.

Every result carries its source (input file index, output shard), and each
step that merges results (`decide`, `shard_totals`, `limits`,
`shard_layout`, `collect`) keeps one per source and checks that none is
missing (`unique_by`): a runner may deliver an element twice.

Stages of `tfpack.engines.base`, per file or per shard:

1. validate and scan, `scan_file`: lengths and masked-LM prediction counts of
   every record of a file, every record validated (`FileScan`).
2. plan, `decide`: from the per-file summaries, the histogram, the plan and
   the `tfpack.packing.Placement`, plus each file's rank offsets per length.
3. place, `place_file`: pack and slot of every example of a file;
   `pack_totals` / `shard_totals` / `limits`: sequences and predictions per
   pack -> ``K``, ``M``.
4. build shards, `route_file`: the file's raw records, grouped per output
   shard; `shard_layout`, then the builder of the local engine
   (``_BuildShard`` in `tfpack.engines.beam.pipeline`).
5. `collect`: the result the launcher finishes the output with
   (`tfpack.engines.base.finish`), or the one error.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing import length_ranks, placement
from tfpack.packing.flow import choose_plan, predictions_per_pack, sequences_per_pack
from tfpack.packing.histograms import length_range_error
from tfpack.packing.windows import length_error, predictions_error

__all__ = ["CACHE_PREFIX", "FileScan", "Placed", "Step", "StepFailed", "unique_by", "scan_file",
           "summary",
           "decide", "place_file", "pack_totals", "shard_totals", "limits",
           "examples_of_pack", "route_file", "shard_layout", "collect"]

_BATCH = 1024


class StepFailed(RuntimeError):
    """A step failed inside the runner; its message names the step.

    Only the message crosses process boundaries on some runners, so it holds
    everything: ``tfpack step 'route' failed: OSError: ...``.

    >>> str(StepFailed.of("route", OSError("disk full")))
    "tfpack step 'route' failed: OSError: disk full"
    """

    @classmethod
    def of(cls, step: str, error: BaseException) -> "StepFailed":
        if isinstance(error, StepFailed):
            return error
        first = str(error).strip().split("\n")[0]
        return cls(f"tfpack step '{step}' failed: {type(error).__name__}: {first}")


class Step:
    """A step function wrapped so that a failure inside it names the step.

    Generators are run to the end inside, so their failures are caught too.
    Give Beam the bound method `run` (Beam calls a callable object with the
    element only, a method with its side inputs too).

    >>> Step("double", lambda x: 2 * x).run(3)
    6
    """

    def __init__(self, name: str, function):
        self.name = name
        self.function = function

    def run(self, *args, **kwargs):
        try:
            result = self.function(*args, **kwargs)
            return list(result) if inspect.isgenerator(result) else result
        except Exception as error:  # noqa: BLE001
            raise StepFailed.of(self.name, error) from error


def unique_by(items, key, expected: int, what: str) -> list:
    """``items`` with one per ``key`` (sorted by it), checked to be ``range(expected)``.

    A runner may deliver an element more than once (a recomputed side input,
    a retried bundle): copies are equal, so one is kept. One missing is a
    runner fault, reported instead of a wrong output.

    >>> unique_by([(1, "b"), (0, "a"), (1, "b")], key=lambda x: x[0], expected=2, what="files")
    [(0, 'a'), (1, 'b')]
    """
    by_key = {}
    for item in items:
        by_key.setdefault(int(key(item)), item)
    if sorted(by_key) != list(range(expected)):
        missing = sorted(set(range(expected)) - set(by_key))
        raise TfpackError(f"The Beam runner must deliver the result of every {what[:-1]}. "
                          f"Received: {len(by_key)} of {expected} {what}, missing "
                          f"{missing[:5]}{' ...' if len(missing) > 5 else ''}")
    return [by_key[k] for k in sorted(by_key)]


@dataclasses.dataclass
class FileScan:
    """One input file: its lengths and prediction counts, or its error."""

    index: int
    path: str
    lengths: np.ndarray | None
    predictions: np.ndarray | None
    error: str | None = None
    stamp: tuple | None = None  # (size, mtime ns) before the scan: route checks it


@dataclasses.dataclass
class Placed:
    """The examples of one input file, placed: pack id and slot of each."""

    index: int
    path: str
    lengths: np.ndarray
    predictions: np.ndarray
    pack: np.ndarray
    position: np.ndarray
    first_example: int  # global index of the file's first example
    stamp: tuple | None = None  # the file's (size, mtime ns) when scanned


CACHE_PREFIX = ".tfpack-beam-cache-"


def scan_file(item: tuple[int, str], cache_dir: str | None = None) -> FileScan:
    """Step 1: read and check every record of one file (the local engine's validator).

    With ``cache_dir`` (the run's staging directory, shared by the workers),
    a valid file's lengths are kept there: a runner that computes the scan
    again (the Dask runner does, for every side input that depends on it, in
    every partition that reads one) reads them back instead of parsing the
    file again. The cache files are hidden (`CACHE_PREFIX`) and removed
    before the output is complete.
    """
    import os

    import tensorflow as tf

    from tfpack.formats import manifest
    from tfpack.formats.records import scan_google_records

    from tfpack.engines.base import input_stamp

    index, path = item
    cached = None if cache_dir is None else os.path.join(cache_dir,
                                                         f"{CACHE_PREFIX}scan-{index:05d}.npz")
    if cached is not None and os.path.exists(cached):
        with np.load(cached) as saved:
            return FileScan(index, path, saved["lengths"], saved["predictions"],
                            stamp=tuple(int(v) for v in saved["stamp"]))
    stamp = input_stamp(path)
    if stamp is None or stamp[0] == 0:
        empty = np.zeros(0, np.int64)
        return FileScan(index, path, empty, empty, stamp=stamp)
    try:
        lengths, predictions = scan_google_records([path])
    except TfpackError as error:
        return FileScan(index, path, None, None, str(error))
    lengths, predictions = lengths.astype(np.int64), predictions.astype(np.int64)
    if cached is not None:
        with manifest.atomic_path(cached) as partial, open(partial, "wb") as f:
            np.savez(f, lengths=lengths, predictions=predictions, stamp=np.asarray(stamp))
    return FileScan(index, path, lengths, predictions, stamp=stamp)


def summary(scan: FileScan, max_length: int) -> dict:
    """What `decide` needs of a file: its error, count, bad lengths, histogram."""
    if scan.error is not None:
        return {"index": scan.index, "error": scan.error}
    lengths = scan.lengths
    bad = np.flatnonzero((lengths < 1) | (lengths > max_length))
    return {
        "index": scan.index, "error": None, "count": int(lengths.size),
        "bad": int(bad.size),
        "first_bad": (int(bad[0]), int(lengths[bad[0]])) if bad.size else None,
        "histogram": np.bincount(np.clip(lengths, 0, max_length), minlength=max_length + 1),
        "first_of_length": _first_of_length(lengths, max_length),
    }


def _first_of_length(lengths: np.ndarray, max_length: int) -> np.ndarray:
    """int64 ``[max_length + 1]``: index of the first example of each length (-1: none)."""
    first = np.full(max_length + 1, -1, np.int64)
    values, index = np.unique(np.clip(lengths, 0, max_length), return_index=True)
    first[values] = index
    return first


def decide(summaries: list[dict], *, files: list[str], job, cache_dir: str | None = None
           ) -> dict:
    """Step 2: the checks of the local engine, in its order, then the placement.

    Returns ``{"error": message}`` or the plan, the placement, each file's
    rank offsets and first example, and the output's shape. With
    ``cache_dir``, the plan (planning may take seconds) is kept there as a
    plan file (JSON, checked when read back: `PackingPlan.load`), never as
    code-bearing state: the rest is recomputed from the summaries.
    """
    import os

    cached = None if cache_dir is None else os.path.join(cache_dir,
                                                         f"{CACHE_PREFIX}plan.json")
    return _decide(summaries, files=files, job=job, plan_cache=cached)


def _cached_plan(plan_cache: str | None, make):
    """The plan of ``plan_cache`` if one was written there, else ``make()`` (then kept)."""
    import os

    from tfpack.packing import PackingPlan

    if plan_cache is not None and os.path.isfile(plan_cache):
        return PackingPlan.load(plan_cache)
    chosen = make()
    if plan_cache is not None:
        chosen.save(plan_cache)
    return chosen


def _decide(summaries: list[dict], *, files: list[str], job, plan_cache=None) -> dict:
    max_length, seed = job.max_length, job.seed
    try:
        summaries = unique_by(summaries, lambda s: s["index"], len(files), "input files")
        for s in summaries:
            if s["error"] is not None:
                raise TfpackError(s["error"])
        counts = np.array([s["count"] for s in summaries], np.int64)
        if counts.sum() == 0:
            raise TfpackError(f"The input files must hold at least one example. Received: {files}")
        firsts = np.cumsum(counts) - counts
        bad = [(f, s) for f, s in zip(firsts, summaries) if s["bad"]]
        if bad:
            first, s = bad[0]
            index, length = s["first_bad"]
            raise length_error(sum(x["bad"] for _, x in bad), int(first) + index, length,
                               max_length)
        per_file = np.stack([s["histogram"] for s in summaries])
        histogram = per_file.sum(axis=0)[1:]
        chosen = _cached_plan(plan_cache, lambda: choose_plan(
            histogram, max_length=max_length, max_sequences_per_pack=job.max_sequences_per_pack,
            plan=job.plan, algorithm=job.algorithm, seed=seed))
        short = chosen.max_length  # a given plan may be shorter than max_length
        if histogram[short:].any():
            first, s = next((f, s) for f, s in zip(firsts, summaries)
                            if s["histogram"][short + 1:].any())
            index = s["first_of_length"][short + 1:]
            length = short + 1 + int(np.argmin(np.where(index >= 0, index, counts.sum())))
            raise length_range_error(int(histogram[short:].sum()),
                                     int(first) + int(s["first_of_length"][length]), length,
                                     short)
        rule = placement(chosen, histogram[:short], seed=seed, shuffle=job.shuffle,
                         balance=job.balance, batch_size=job.batch_size if job.balance else None)
    except TfpackError as error:
        return {"error": str(error)}
    starts = np.cumsum(per_file, axis=0) - per_file
    return {
        "error": None, "plan": chosen, "placement": rule,
        "starts": {s["index"]: starts[i] for i, s in enumerate(summaries)},
        "firsts": {s["index"]: int(firsts[i]) for i, s in enumerate(summaries)},
        "sequences": int(counts.sum()),
        "tokens": int((histogram * np.arange(1, max_length + 1)).sum()),
        "histogram": histogram,
        "packs": rule.num_packs,
        "shards": -(-rule.num_packs // job.packs_per_shard),
    }


def place_file(scan: FileScan, decision: dict):
    """Step 3: pack and slot of each example of one file (nothing after an error)."""
    if decision["error"] is not None or scan.lengths.size == 0:
        return
    rule = decision["placement"]
    ranks = length_ranks(scan.lengths, rule.max_length,
                         start=decision["starts"][scan.index][:rule.max_length + 1])
    pack, position = rule.place(scan.lengths, ranks)
    yield Placed(scan.index, scan.path, scan.lengths, scan.predictions, pack, position,
                 decision["firsts"][scan.index], scan.stamp)


def pack_totals(placed: Placed, packs_per_shard: int):
    """Step 4a: per output shard, the sequences and predictions this file adds to its packs."""
    shard = placed.pack // packs_per_shard
    for s in np.unique(shard):
        mine = shard == s
        packs, inverse = np.unique(placed.pack[mine], return_inverse=True)
        yield int(s), (placed.index, packs, np.bincount(inverse),
                       np.bincount(inverse, weights=placed.predictions[mine]).astype(np.int64))


def shard_totals(item) -> tuple[int, int, int, int]:
    """Step 4b: ``(shard, deepest pack, most predictions, first pack with them)``.

    One part per input file feeding the shard (copies dropped by file index).
    """
    shard, parts = item
    parts = list({index: (p, c, w) for index, p, c, w in parts}.values())
    packs = np.concatenate([p for p, _, _ in parts])
    unique, inverse = np.unique(packs, return_inverse=True)
    depth = np.bincount(inverse, weights=np.concatenate([c for _, c, _ in parts]))
    preds = np.bincount(inverse, weights=np.concatenate([w for _, _, w in parts]))
    top = int(np.argmax(preds))
    return int(shard), int(depth.max()), int(preds[top]), int(unique[top])


def limits(totals: list, decision: dict, *, job) -> dict:
    """Step 4c: ``K`` and ``M``, checked as the local engine checks them, or the error."""
    if decision["error"] is not None:
        return {"error": decision["error"]}
    max_predictions_per_pack = job.max_predictions_per_pack
    try:
        totals = unique_by(totals, lambda t: t[0], decision["shards"], "output shards")
    except TfpackError as error:
        return {"error": str(error)}
    depth = max(t[1] for t in totals)
    most = max(t[2] for t in totals)
    pack = min(t[3] for t in totals if t[2] == most)
    try:
        K = sequences_per_pack(depth, job.max_sequences_per_pack)
        M = predictions_per_pack(most, None)
        if max_predictions_per_pack is not None and most > max_predictions_per_pack:
            return {"error": None, "bad_pack": pack, "most": most}
    except TfpackError as error:
        return {"error": str(error)}
    return {"error": None, "bad_pack": None, "K": K,
            "M": M if max_predictions_per_pack is None else max_predictions_per_pack}


def examples_of_pack(placed: Placed, limit: dict):
    """The examples of the pack that needs too many predictions (error path only)."""
    if limit.get("bad_pack") is None:
        return
    for i in np.flatnonzero(placed.pack == limit["bad_pack"]):
        yield (-int(placed.lengths[i]), int(placed.position[i]), placed.first_example + int(i))


def route_file(placed: Placed, limit: dict, packs_per_shard: int):
    """Step 5: the file's raw records, one batch per output shard it feeds."""
    import tensorflow as tf

    from tfpack.engines.base import check_unchanged

    if limit["error"] is not None or limit.get("bad_pack") is not None:
        return
    if placed.stamp is not None:
        check_unchanged(placed.path, placed.stamp)
    try:
        records = [r for batch in tf.data.TFRecordDataset(placed.path).batch(_BATCH)
                   for r in batch.numpy()]
    finally:  # the records routed are those scanned, or one error naming the file
        if placed.stamp is not None:
            check_unchanged(placed.path, placed.stamp)
    if len(records) != placed.lengths.size:
        raise TfpackError("The input files must not change while they are packed. Received: "
                          f"file={placed.path!r} with {placed.lengths.size} records, "
                          f"then {len(records)}")
    shard = placed.pack // packs_per_shard
    for s in np.unique(shard):
        mine = np.flatnonzero(shard == s)
        yield int(s), (placed.index, placed.pack[mine], placed.position[mine],
                       placed.lengths[mine], [records[i] for i in mine],
                       placed.first_example + mine)


def shard_layout(parts, *, with_lengths: bool = False) -> tuple:
    """One shard's records in pack order, the splits of its packs, and each
    record's global index (its position across the input files, in order);
    ``with_lengths``: also each record's length when scanned.

    One part per input file feeding the shard (copies dropped by file index).
    Within a pack: longest first, then by slot, as `tfpack.packing.layout`.
    """
    parts = [part[1:] for part in {part[0]: part for part in parts}.values()]
    pack = np.concatenate([p[0] for p in parts])
    position = np.concatenate([p[1] for p in parts])
    lengths = np.concatenate([p[2] for p in parts])
    records = [r for p in parts for r in p[3]]
    ids = np.concatenate([p[4] for p in parts]).astype(np.int64)
    order = np.lexsort((position, -lengths, pack))
    first = int(pack.min())
    sizes = np.bincount(pack - first)
    splits = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    layout = [records[i] for i in order], splits, ids[order]
    return (*layout, lengths[order]) if with_lengths else layout


def collect(_, decision: dict, limit: dict, shards: list[dict], bad_pack: list, *, job,
            result_path: str) -> None:
    """Step 5: write what the launcher finishes the output with, or the one error.

    ``result_path`` gets JSON ``{"error": message}`` or the plan, the shards
    (in shard order), features, ``K``, ``M`` and the counts.
    """
    from tfpack.formats import manifest

    error = decision["error"] or limit["error"]
    if error is None and limit.get("bad_pack") is not None:
        examples = [i for _, _, i in sorted(set(bad_pack))]
        error = str(predictions_error(job.max_predictions_per_pack, limit["bad_pack"],
                                      examples, limit["most"]))
    if error is None:
        try:
            shards = unique_by(shards, lambda s: s["shard"], decision["shards"],
                               "output shards")
        except TfpackError as missing:
            error = str(missing)
    if error is not None:
        manifest.write_atomic(result_path, json.dumps({"error": error}))
        return
    result = {
        "error": None, "plan": decision["plan"].to_json(),
        "shards": [{k: s[k] for k in ("name", "records", "bytes", "sha256", "block_records",
                                      "blocks")} for s in shards],
        "features": shards[0]["features"], "K": limit["K"], "M": limit["M"],
        "sequences": decision["sequences"], "tokens": decision["tokens"],
        "packs": decision["packs"],
        "balance": (decision["placement"].balance.to_dict()
                    if decision["placement"].balance else None),
    }
    manifest.write_atomic(result_path, json.dumps(result))
