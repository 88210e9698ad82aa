"""`tfpack pack` against the read+parse+write floor on a generated suite of inputs (issue 23).

`benchmarks/engines.py` measures two length distributions of Google-layout
records; this suite generates the cases instead, so no number can be tuned
to: for every length family (log-normal short-heavy, long-heavy near ``L``,
bimodal, Zipf, uniform, spikes at ``L``, documents cut into ``L`` windows)
and seed, the same lengths are written in both layouts users have:

- ``padded``: Google's ``create_pretraining_data`` layout, every record of a
  file padded to ``L`` tokens and ``M_SEQ`` predictions;
- ``unpadded``: one width per record (its own length and predictions), as
  other writers emit them.

For every case, in interleaved rounds in one process: the floor (read the
records, parse them in a parallel `tf.data` map with TensorFlow's fastest
parse for the layout: fixed-length features for padded records,
variable-length ones for unpadded records; write them to new files: the
least any job over them does; `engines.floor`) and the local engine
(`tfpack.engines.local.pack_records`, ``optimal``, K=3, M=80, 4,096 packs per
shard). Reported per case: the median ratio floor seconds / job seconds
(higher is better; 1.0 = as fast as the floor) with its spread, and, for the
suite, the **worst case** beside the median. Target: >= 0.5x on every case.

With ``--memory N,N,...`` (issue 23 item 3), instead: memory against input
size. For each ``--memory-cases`` case (``family:layout``) and record count,
one `pack_records` in a fresh process, its anonymous and file-backed resident
memory sampled from ``/proc/<pid>/status`` and reported per phase above the
process's baseline, with the kernel's exact peak (`measure_memory`); its own
section of the results file (the ratios' section stays, and the other way round).

Run:

    .venv/bin/python benchmarks/pack_suite.py                       # 7 families x 2 layouts
    .venv/bin/python benchmarks/pack_suite.py --records 20000 --rounds 2 --families lognormal
    .venv/bin/python benchmarks/pack_suite.py --memory 50000,200000,800000   # ~3 GB of inputs

Writes ``benchmarks/results/pack_suite.md``; inputs go to ``benchmarks/output/``.
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import shutil
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import engines  # noqa: E402  (the floor)
import pipeline  # noqa: E402  (synthetic Google features)
from results_file import write_results  # noqa: E402

L, K, M_SEQ, M_PACK = pipeline.L, pipeline.K, pipeline.M_SEQ, pipeline.M_PACK
TARGET = 0.5
FAMILIES = ("lognormal", "long", "bimodal", "zipf", "uniform", "spikes", "windows")


def lengths_of(family: str, count: int, seed: int) -> np.ndarray:
    """``count`` lengths in ``[2, L]`` of one family (seeded)."""
    rng = np.random.default_rng(seed)
    if family == "lognormal":  # short-heavy: median ~60 tokens
        x = rng.lognormal(np.log(60), 0.9, count)
    elif family == "long":  # long-heavy: most records near L
        x = L - rng.exponential(40, count)
    elif family == "bimodal":
        x = np.where(rng.random(count) < 0.5, rng.normal(64, 16, count), rng.normal(440, 40, count))
    elif family == "zipf":
        x = rng.zipf(1.6, count) * 8
    elif family == "uniform":
        x = rng.integers(2, L + 1, count)
    elif family == "spikes":  # a third exactly L, the rest short
        x = np.where(rng.random(count) < 0.33, L, rng.lognormal(np.log(40), 0.7, count))
    elif family == "windows":  # documents cut into L-token windows: full windows + remainders
        docs = rng.lognormal(np.log(1500), 1.0, count).astype(np.int64) + 2
        x = np.concatenate([np.concatenate([np.full(d // L, L), [d % L]]) for d in docs])[:count]
    else:
        raise ValueError(f"unknown family {family!r}")
    return np.clip(np.round(x), 2, L).astype(np.int64)


def write_records(folder: str, lengths: np.ndarray, seed: int, padded: bool) -> None:
    """Google-format records of ``lengths`` in 2 files, padded to L or one width per record.

    Generated ``_GENERATE`` records at a time (the first chunk from ``seed``
    itself, so cases up to that size are the ones earlier results used), so
    that the memory curve's large inputs fit in memory while written.
    """
    import tensorflow as tf

    os.makedirs(folder, exist_ok=True)
    half = len(lengths) // 2
    writers = [tf.io.TFRecordWriter(os.path.join(folder, f"part-{part}.tfrecord"))
               for part in range(2)]
    with writers[0], writers[1]:
        for first in range(0, len(lengths), _GENERATE):
            chunk = lengths[first:first + _GENERATE]
            records = _records(chunk, seed + first // _GENERATE * 7919, padded)
            for row, record in enumerate(records, start=first):
                writers[row >= half].write(record)


_GENERATE = 50_000


def _records(lengths: np.ndarray, seed: int, padded: bool) -> list[bytes]:
    from tfpack.formats.protos import encode_examples

    features = pipeline.synthetic_bert(lengths, seed)
    if padded:
        return encode_examples(features)
    # One width per record: encode each (length, predictions) group at its widths.
    predictions = features["masked_lm_weights"].sum(axis=1).astype(np.int64)
    names = ("input_ids", "input_mask", "segment_ids")
    records = [None] * len(lengths)
    keys = lengths * (M_SEQ + 1) + predictions
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        n, m = int(lengths[rows[0]]), int(predictions[rows[0]])
        group = {name: features[name][rows, :n] for name in names}
        group.update({name: features[name][rows, :m] for name in (
            "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")})
        group["next_sentence_labels"] = features["next_sentence_labels"][rows]
        for row, record in zip(rows, encode_examples(group)):
            records[row] = record
    return records


def case_input(family: str, layout: str, count: int, seed: int,
               workdir: str = os.path.join(HERE, "output")) -> tuple[str, float]:
    """The glob of one case's records (written once, cached) and their mean length."""
    lengths = lengths_of(family, count, seed)
    folder = os.path.join(workdir, f"pack-suite-{family}-{layout}-{count}-{seed}")
    if not os.path.exists(os.path.join(folder, "done")):
        shutil.rmtree(folder, ignore_errors=True)
        write_records(folder, lengths, seed, padded=layout == "padded")
        open(os.path.join(folder, "done"), "w").close()
    return os.path.join(folder, "*.tfrecord"), float(lengths.mean())


def run_case(pattern: str, rounds: int, seed: int, dense: bool,
             workdir: str = os.path.join(HERE, "output")) -> dict:
    """Interleaved rounds of the floor and the local engine; seconds and ratios."""
    from tfpack.engines.local import pack_records

    out = os.path.join(workdir, "pack-suite-out")
    args = dict(max_length=L, max_sequences_per_pack=K, algorithm="optimal",
                max_predictions_per_pack=M_PACK, packs_per_shard=4096, seed=seed)
    engines.floor(pattern, os.path.join(out, "warm"), dense=dense)  # traces its graphs once
    runs = engines.interleaved({"floor": lambda d: engines.floor(pattern, d, dense=dense),
                                "local": lambda d: pack_records(pattern, d, **args)},
                               rounds, out)
    shutil.rmtree(out, ignore_errors=True)
    floor_s, job_s = np.array(runs["floor"]["seconds"]), np.array(runs["local"]["seconds"])
    ratios = floor_s / job_s
    return {"floor": float(np.median(floor_s)), "local": float(np.median(job_s)),
            "ratio": float(np.median(ratios)), "low": float(ratios.min()),
            "high": float(ratios.max()),
            "cpu": float(np.median(np.array(runs["floor"]["cpu"]) /
                                   np.array(runs["local"]["cpu"]))),
            "peak_mb": float(max(runs["local"]["peak_mb"]))}


def report(rows: list[dict], args, load: tuple) -> str:
    ratios = [r["ratio"] for r in rows]
    worst = min(rows, key=lambda r: r["ratio"])
    lines = [
        "# `tfpack pack` on a generated suite (`benchmarks/pack_suite.py`)", "",
        f"Command: `.venv/bin/python benchmarks/pack_suite.py --records {args.records} "
        f"--rounds {args.rounds} --seeds {args.seeds} --families {','.join(args.families)}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared (load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end). Ratios come from interleaved "
        "rounds of one process: floor seconds / job seconds, median (min-max); the CPU column "
        "is the same ratio of process CPU seconds (all threads), less sensitive to the load; "
        "peak RSS: the process's high-water mark over the local engine's rounds (TensorFlow "
        "included: how it grows with the input is the section "
        "\"Memory against input size\").", "",
        f"**Worst case: {worst['ratio']:.2f}x** ({worst['family']}, {worst['layout']}, seed "
        f"{worst['seed']}); median over the suite {np.median(ratios):.2f}x; target >= {TARGET}x "
        f"{'met' if worst['ratio'] >= TARGET else 'NOT met'} on every case.", "",
        "| family | layout | seed | mean length | floor s | local s | local vs floor | CPU | "
        "peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(f"| {r['family']} | {r['layout']} | {r['seed']} | {r['mean']:.0f} | "
                     f"{r['floor']:.2f} | {r['local']:.2f} | {r['ratio']:.2f}x "
                     f"({r['low']:.2f}-{r['high']:.2f}) | {r['cpu']:.2f}x | "
                     f"{r['peak_mb']:.0f} |")
    return "\n".join(lines) + "\n"


# -- memory against input size (``--memory``) ---------------------------------

MEMORY_TITLE = "## Memory against input size"
_STATUS = ("RssAnon", "RssFile", "VmHWM")


def _status(pid="self") -> dict[str, int]:
    """``_STATUS`` fields of ``/proc/<pid>/status`` in kB (Linux); {} once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f)
                    if k in _STATUS}
    except (OSError, ValueError):
        return {}


def memory_child(pattern: str, output: str, seed: int) -> None:
    """Run the local engine once in this fresh process; print its marks as JSON lines."""
    import json

    import tensorflow as tf  # noqa: F401 - TensorFlow's import belongs to the baseline

    from tfpack.engines.local import pack_records

    with open("/proc/self/clear_refs", "w") as f:  # VmHWM from here on: the job's own
        f.write("5")
    start = time.time()
    print(json.dumps({"start": start, "baseline": _status()}), flush=True)
    stats = pack_records(pattern, output, max_length=L, max_sequences_per_pack=K,
                         algorithm="optimal", max_predictions_per_pack=M_PACK,
                         packs_per_shard=4096, seed=seed)
    print(json.dumps({"end": time.time(), "seconds": stats["seconds"], "packs": stats["packs"],
                      "status": _status()}), flush=True)


def measure_memory(pattern: str, seed: int, workdir: str, every: float = 0.005) -> dict:
    """Peak memory of one `pack_records` in a fresh process, by phase.

    The parent reads the child's ``/proc/<pid>/status`` every ``every``
    seconds: anonymous (heap, numpy arrays, TensorFlow's buffers) and
    file-backed (mapped files: libraries; the spill is read, not mapped) resident
    memory, each as its peak over a phase (``scan``, ``plan``, ``build`` from
    the job's stats; ``finish`` after) less the baseline (after importing
    TensorFlow, before the job). ``VmHWM``: the kernel's exact peak of the
    sum during the job (its mark reset when the job starts).
    """
    import json
    import subprocess

    out = os.path.join(workdir, "pack-memory-out")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--memory-child", pattern, out, str(seed)],
        stdout=subprocess.PIPE, env=env, text=True)
    samples = []
    while child.poll() is None:
        status = _status(child.pid)
        if status:
            samples.append((time.time(), status.get("RssAnon", 0), status.get("RssFile", 0)))
        time.sleep(every)
    marks = [json.loads(line) for line in child.stdout.read().splitlines() if line.startswith("{")]
    shutil.rmtree(out, ignore_errors=True)
    if child.returncode or len(marks) != 2:
        raise RuntimeError(f"the memory child failed (exit {child.returncode}): {marks}")
    start, end = marks[0]["start"], marks[1]["end"]
    base = marks[0]["baseline"]
    bounds, t = {}, start
    for phase in ("scan", "plan", "build"):
        bounds[phase] = (t, t + marks[1]["seconds"][phase])
        t += marks[1]["seconds"][phase]
    bounds["finish"] = (t, end)
    row = {"seconds": end - start, "packs": marks[1]["packs"],
           "hwm_mb": (marks[1]["status"]["VmHWM"] - base["RssAnon"] - base["RssFile"]) / 1024,
           "baseline_mb": (base["RssAnon"] + base["RssFile"]) / 1024, "samples": len(samples),
           "phase_seconds": marks[1]["seconds"]}
    for phase, (lo, hi) in bounds.items():
        within = [(a, f) for when, a, f in samples if lo <= when <= hi] or [(0, 0)]
        row[f"{phase}_anon_mb"] = (max(a for a, _ in within) - base["RssAnon"]) / 1024
        row[f"{phase}_file_mb"] = (max(f for _, f in within) - base["RssFile"]) / 1024
    return row


def memory_report(rows: list[dict], args, load: tuple) -> str:
    lines = [
        MEMORY_TITLE, "",
        f"Command: `.venv/bin/python benchmarks/pack_suite.py --memory "
        f"{','.join(map(str, args.memory))} --memory-cases {','.join(args.memory_cases)}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared (load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end). One run of `pack_records` "
        "(optimal, K=3, M=80, 4,096 packs per shard) per row, each in a fresh process; "
        "memory above that process's baseline (TensorFlow imported, before the job), in MB. "
        "Anonymous and file-backed resident memory are sampled every 5 ms from "
        "`/proc/<pid>/status` (RssAnon, RssFile), peak per phase; peak RSS is the kernel's "
        "exact high-water mark of their sum over the job (VmHWM, reset at its start).", "",
        "Reading it: anonymous memory is the job's own (heap, numpy arrays, TensorFlow's "
        "buffers); above a constant it grows only with the plan's per-example integers "
        "(lengths, prediction counts, pack order, where each example's values start in the "
        "spill: int64), the last column. File-backed memory is the mapped libraries: pass 2 "
        "reads the spill (`tfpack.engines.spill`) with positioned reads (`pread`) into each "
        "chunk's own arrays, so no page of it stays mapped in the process (its page cache is "
        "the kernel's, unmapped, dropped first under memory pressure). Peak RSS is the sum.", "",
        "| family | layout | records | input MB | packs | s | scan anon | plan anon | "
        "build anon | build file | peak RSS | peak anon added per record |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    first = {}
    for r in rows:
        anon = max(r[f"{p}_anon_mb"] for p in ("scan", "plan", "build", "finish"))
        base = first.setdefault((r["family"], r["layout"]), (r["records"], anon))
        slope = (f"{(anon - base[1]) * 2**20 / (r['records'] - base[0]):,.0f} B"
                 if r["records"] > base[0] else "-")
        lines.append(
            f"| {r['family']} | {r['layout']} | {r['records']:,} | {r['input_mb']:,.0f} | "
            f"{r['packs']:,} | {r['seconds']:.1f} | {r['scan_anon_mb']:.0f} | "
            f"{r['plan_anon_mb']:.0f} | {r['build_anon_mb']:.0f} | {r['build_file_mb']:.0f} | "
            f"{r['hwm_mb']:.0f} | {slope} |")
    return "\n".join(lines) + "\n"


def _write_section(path: str, title: str, text: str) -> None:
    """Put ``text`` in ``path`` in place of its section ``title`` (to the next ``## ``), or
    after the rest; the other sections stay."""
    old = open(path).read() if os.path.exists(path) else ""
    head, found, rest = old.partition(title)
    if found:
        tail = rest.find("\n## ")
        old = head + (rest[tail + 1:] if tail >= 0 else "")
    with open(path, "w") as f:
        f.write((old.rstrip("\n") + "\n\n" if old.strip() else "") + text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--families", type=lambda s: s.split(","), default=list(FAMILIES))
    parser.add_argument("--layouts", type=lambda s: s.split(","), default=["padded", "unpadded"])
    parser.add_argument("--output", default=os.path.join(HERE, "results", "pack_suite.md"))
    parser.add_argument("--workdir", default=os.path.join(HERE, "output"),
                        help="where the generated inputs (cached) and outputs go")
    parser.add_argument("--memory", type=lambda s: [int(n) for n in s.split(",")],
                        help="instead of the ratios: memory at these record counts "
                             "(e.g. 50000,200000,800000), its own section of --output")
    parser.add_argument("--memory-cases", type=lambda s: s.split(","),
                        default=["long:padded", "lognormal:unpadded"],
                        help="family:layout cases of --memory")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child[0], args.memory_child[1], int(args.memory_child[2]))
        return 0
    start_load = os.getloadavg()[0]
    if args.memory:
        rows = []
        for case in args.memory_cases:
            family, layout = case.split(":")
            for records in args.memory:
                pattern, _ = case_input(family, layout, records, 0, args.workdir)
                size = sum(os.path.getsize(f) for f in glob.glob(pattern)) / 2**20
                row = measure_memory(pattern, 0, args.workdir)
                rows.append({"family": family, "layout": layout, "records": records,
                             "input_mb": size, **row})
                print(f"{family:10s} {layout:9s} {records:>9,}: {row}", file=sys.stderr,
                      flush=True)
        text = memory_report(rows, args, (start_load, os.getloadavg()[0]))
        _write_section(args.output, MEMORY_TITLE, text)
        print(text)
        return 0
    rows = []
    for seed in range(args.seeds):
        for family in args.families:
            for layout in args.layouts:
                pattern, mean = case_input(family, layout, args.records, seed, args.workdir)
                result = run_case(pattern, args.rounds, seed, dense=layout == "padded",
                                  workdir=args.workdir)
                rows.append({"family": family, "layout": layout, "seed": seed, "mean": mean,
                             **result})
                print(f"{family:10s} {layout:9s} seed {seed}: {result['ratio']:.2f}x "
                      f"({result['low']:.2f}-{result['high']:.2f})", file=sys.stderr, flush=True)
    text = report(rows, args, (start_load, os.getloadavg()[0]))
    old = open(args.output).read() if os.path.exists(args.output) else ""
    kept = old[old.find(MEMORY_TITLE):] if MEMORY_TITLE in old else ""
    write_results(args.output, text + ("\n" + kept if kept else ""))  # the memory section (--memory) stays
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
