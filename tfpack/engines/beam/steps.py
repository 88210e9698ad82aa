"""The steps of the Beam packing pipeline, as plain functions of numpy data.

Each step works on one input file or one output shard, so no worker needs
all examples, and none receives all examples of one length: records are
grouped by output shard (``pack id // packs_per_shard``), and pack ids are a
seeded permutation independent of length. Steps report bad input as data
(an ``"error"`` entry) instead of raising inside a worker, so the launcher
raises the one `TfpackError` the local engine raises, and nothing is
written that claims to be complete.

1. `scan_file`: lengths and masked-LM prediction counts of every record of a
   file, every record validated (`FileScan`).
2. `decide`: from the per-file summaries, the histogram, the plan and the
   `tfpack.packing.Placement`, plus each file's rank offsets per length.
3. `place_file`: pack and slot of every example of a file.
4. `pack_totals` / `limits`: sequences and predictions per pack -> ``K``, ``M``.
5. `route_file`: the file's raw records, grouped per output shard.
6. `BuildShard` (in `tfpack.engines.beam.pipeline`): one shard's packs, with the
   builder of the local engine.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["FileScan", "Placed", "scan_file", "summary", "decide", "place_file",
           "pack_totals", "shard_totals", "limits", "route_file", "shard_layout"]

_BATCH = 1024


@dataclasses.dataclass
class FileScan:
    """One input file: its lengths and prediction counts, or its error."""

    index: int
    path: str
    lengths: np.ndarray | None
    predictions: np.ndarray | None
    error: str | None = None


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


def scan_file(item: tuple[int, str]) -> FileScan:
    """Step 1: read and check every record of one file (the local engine's validator)."""
    import tensorflow as tf

    from tfpack.formats.records import scan_google_records

    index, path = item
    if tf.io.gfile.stat(path).length == 0:
        empty = np.zeros(0, np.int64)
        return FileScan(index, path, empty, empty)
    try:
        lengths, predictions = scan_google_records([path])
    except TfpackError as error:
        return FileScan(index, path, None, None, str(error))
    return FileScan(index, path, lengths.astype(np.int64), predictions.astype(np.int64))


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


def decide(summaries: list[dict], *, files: list[str], max_length: int,
           max_sequences_per_pack, plan, algorithm, seed: int, shuffle: bool,
           packs_per_shard: int) -> dict:
    """Step 2: the checks of the local engine, in its order, then the placement.

    Returns ``{"error": message}`` or the plan, the placement, each file's
    rank offsets and first example, and the output's shape.
    """
    from tfpack.data.flow import choose_plan
    from tfpack.data.windows import length_error
    from tfpack.packing import placement
    from tfpack.packing.histograms import length_range_error

    summaries = sorted(summaries, key=lambda s: s["index"])
    try:
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
        chosen = choose_plan(histogram, max_length=max_length,
                             max_sequences_per_pack=max_sequences_per_pack, plan=plan,
                             algorithm=algorithm, seed=seed)
        short = chosen.max_length  # a given plan may be shorter than max_length
        if histogram[short:].any():
            first, s = next((f, s) for f, s in zip(firsts, summaries)
                            if s["histogram"][short + 1:].any())
            index = s["first_of_length"][short + 1:]
            length = short + 1 + int(np.argmin(np.where(index >= 0, index, counts.sum())))
            raise length_range_error(int(histogram[short:].sum()),
                                     int(first) + int(s["first_of_length"][length]), length,
                                     short)
        rule = placement(chosen, histogram[:short], seed=seed, shuffle=shuffle)
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
        "shards": -(-rule.num_packs // packs_per_shard),
    }


def place_file(scan: FileScan, decision: dict):
    """Step 3: pack and slot of each example of one file (nothing after an error)."""
    from tfpack.packing import length_ranks

    if decision["error"] is not None or scan.lengths.size == 0:
        return
    rule = decision["placement"]
    ranks = length_ranks(scan.lengths, rule.max_length,
                         start=decision["starts"][scan.index][:rule.max_length + 1])
    pack, position = rule.place(scan.lengths, ranks)
    yield Placed(scan.index, scan.path, scan.lengths, scan.predictions, pack, position,
                 decision["firsts"][scan.index])


def pack_totals(placed: Placed, packs_per_shard: int):
    """Step 4a: per output shard, the sequences and predictions this file adds to its packs."""
    shard = placed.pack // packs_per_shard
    for s in np.unique(shard):
        mine = shard == s
        packs, inverse = np.unique(placed.pack[mine], return_inverse=True)
        yield int(s), (packs, np.bincount(inverse),
                       np.bincount(inverse, weights=placed.predictions[mine]).astype(np.int64))


def shard_totals(item) -> tuple[int, int, int]:
    """Step 4b: ``(deepest pack, most predictions, first pack with them)`` of one shard."""
    _, parts = item
    packs = np.concatenate([p for p, _, _ in parts])
    unique, inverse = np.unique(packs, return_inverse=True)
    depth = np.bincount(inverse, weights=np.concatenate([c for _, c, _ in parts]))
    preds = np.bincount(inverse, weights=np.concatenate([w for _, _, w in parts]))
    top = int(np.argmax(preds))
    return int(depth.max()), int(preds[top]), int(unique[top])


def limits(totals: list, decision: dict, *, max_sequences_per_pack, max_predictions_per_pack
           ) -> dict:
    """Step 4c: ``K`` and ``M``, checked as the local engine checks them, or the error."""
    from tfpack.data.flow import predictions_per_pack, sequences_per_pack

    if decision["error"] is not None:
        return {"error": decision["error"]}
    depth = max(t[0] for t in totals)
    most = max(t[1] for t in totals)
    pack = min(t[2] for t in totals if t[1] == most)
    try:
        K = sequences_per_pack(depth, max_sequences_per_pack)
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

    if limit["error"] is not None or limit.get("bad_pack") is not None:
        return
    records = [r for batch in tf.data.TFRecordDataset(placed.path).batch(_BATCH)
               for r in batch.numpy()]
    if len(records) != placed.lengths.size:
        raise TfpackError("The input files must not change while they are packed. Received: "
                          f"file={placed.path!r} with {placed.lengths.size} records, "
                          f"then {len(records)}")
    shard = placed.pack // packs_per_shard
    for s in np.unique(shard):
        mine = np.flatnonzero(shard == s)
        yield int(s), (placed.pack[mine], placed.position[mine], placed.lengths[mine],
                       [records[i] for i in mine], placed.first_example + mine)


def shard_layout(parts) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    """One shard's records in pack order, the splits of its packs, and each
    record's global index (its position across the input files, in order).

    Within a pack: longest first, then by slot, as `tfpack.packing.layout`.
    """
    pack = np.concatenate([p[0] for p in parts])
    position = np.concatenate([p[1] for p in parts])
    lengths = np.concatenate([p[2] for p in parts])
    records = [r for p in parts for r in p[3]]
    ids = np.concatenate([p[4] for p in parts]).astype(np.int64)
    order = np.lexsort((position, -lengths, pack))
    first = int(pack.min())
    sizes = np.bincount(pack - first)
    splits = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return [records[i] for i in order], splits, ids[order]
