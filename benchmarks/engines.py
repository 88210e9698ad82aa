"""The engines of ``tfpack pack`` against the read+parse+write floor (issues 11, 17).

1. Throughput on Google-format BERT TFRecords at L=512, for two length
   distributions (token ids are synthetic, the lengths real):

   - ``google``: the lengths Google's ``create_pretraining_data`` algorithm
     gives on long documents (`tfpack.builders.bert.create_bert_examples`,
     max_seq_length 512, on the standard library's docstrings,
     `tfpack.datasets.stdlib_documents`, 8 modules to a document); most
     records are full, mean about 478 tokens;
   - ``wikipedia``: lengths drawn from `wikipedia_512` (mean 256).

   Jobs, in interleaved rounds (one process), median and spread (min-max):

   - floor: read the same records, parse them (`tf.io.parse_example`, as a
     parallel `tf.data` map) and write them to new files: the least any job
     over these files does;
   - local engine: `tfpack.engines.local.pack_records` (``tfpack pack``),
     ``optimal``, K=3, M=80, 4,096 packs per shard;
   - with ``--beam``: the Beam engine on the DirectRunner with 2 worker
     processes, its shards checked byte for byte against the local engine's.

   Reported: seconds, examples/s, input MB/s, peak memory (the process's
   peak RSS during the job, the mark reset before each job) and the ratio
   job / floor throughput of the same round. Target: local >= 0.35x the floor.
2. ``PackingPlan.assign`` on 10^8 lengths (``--assign``), in a fresh process:
   seconds and peak memory above the lengths array itself.
3. Beam on the Dask runner (`dask_scaling`, ``--dask``): the same input packed
   on a `distributed.LocalCluster` of one and of two worker processes (one
   thread each; clusters started and warmed up before timing), interleaved
   rounds, median and spread; output checked byte for byte against the local
   engine's. Writes ``benchmarks/results/engines_dask.md``.

Run:

    .venv/bin/python benchmarks/engines.py                 # 100,000 records, 3 rounds
    .venv/bin/python benchmarks/engines.py --records 20000 --rounds 2 --beam
    .venv/bin/python benchmarks/engines.py --skip throughput --assign
    .venv/bin/python benchmarks/engines.py --dask --records 8000 --rounds 3   # section 3 only

Writes ``benchmarks/results/engines.md``; inputs go to ``benchmarks/output/``.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline  # noqa: E402  (benchmarks/pipeline.py: the synthetic Google records)
from results_file import write_results  # noqa: E402

L, K, M = pipeline.L, pipeline.K, pipeline.M_PACK
TARGET = 0.35  # local engine / floor, examples per second (issue 17)
MODULES_PER_DOCUMENT = 8


def google_lengths(count: int, seed: int) -> np.ndarray:
    """Lengths of Google's algorithm on long real documents, resampled to ``count``."""
    from tfpack.builders.bert import create_bert_examples, load_vocab, tokenize_documents
    from tfpack.datasets import stdlib_documents

    modules = tokenize_documents(stdlib_documents())
    documents = [[s for module in modules[i:i + MODULES_PER_DOCUMENT] for s in module]
                 for i in range(0, len(modules), MODULES_PER_DOCUMENT)]
    examples = create_bert_examples(documents, load_vocab(), max_seq_length=L,
                                    max_predictions_per_seq=pipeline.M_SEQ, seed=seed)
    pool = np.array([len(e.input_ids) for e in examples], np.int64)
    return np.random.default_rng(seed).choice(pool, size=count)


def input_files(name: str, count: int, seed: int) -> str:
    """The glob of ``count`` records with ``name`` lengths, written once (cached)."""
    folder = os.path.join(HERE, "output", f"engines-{name}-{count}")
    if not os.path.exists(os.path.join(folder, "done")):
        shutil.rmtree(folder, ignore_errors=True)
        lengths = google_lengths(count, seed) if name == "google" else None
        pipeline.write_google_shards(folder, count, shards=4, seed=seed, lengths=lengths)
        open(os.path.join(folder, "done"), "w").close()
    return os.path.join(folder, "*.tfrecord")


def floor(pattern: str, output: str, *, dense: bool = False) -> int:
    """Read, parse and write the same records: the floor of any job over them.

    ``dense``: parse with fixed-length features at the widths of each file's
    first record (TensorFlow's fastest parse, for records padded to one
    width: Google's layout); else variable-length features, densified.
    """
    import tensorflow as tf

    from tfpack.formats.records import GOOGLE_FEATURES
    from tfpack.formats.validation import google_widths

    os.makedirs(output, exist_ok=True)
    written = 0
    for path in sorted(glob.glob(pattern)):
        if dense:
            first = next(iter(tf.data.TFRecordDataset(path).take(1))).numpy()
            widths = google_widths(first)
            spec = {n: tf.io.FixedLenFeature([widths[n]], d) for n, d in GOOGLE_FEATURES.items()}
            parse = tf.autograph.experimental.do_not_convert(
                lambda batch, spec=spec: (batch, tf.io.parse_example(batch, spec)))
        else:
            spec = {n: tf.io.VarLenFeature(d) for n, d in GOOGLE_FEATURES.items()}
            parse = tf.autograph.experimental.do_not_convert(
                lambda batch, spec=spec: (batch, {n: tf.sparse.to_dense(t) for n, t in
                                                  tf.io.parse_example(batch, spec).items()}))
        dataset = tf.data.TFRecordDataset(path).batch(1024).map(
            parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
        with tf.io.TFRecordWriter(os.path.join(output, os.path.basename(path))) as writer:
            for records, _ in dataset:
                for record in records.numpy():
                    writer.write(record)
                    written += 1
    return written


def _reset_peak() -> None:
    """Reset the peak-RSS mark to the RSS now (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def interleaved(jobs: dict, rounds: int, out: str) -> dict:
    """Run ``jobs`` (name -> function of an output folder) in interleaved rounds.

    The machine is shared: each round runs every job once, in turn, so a
    burst of load hits all of them. Returns name -> ``seconds``, ``cpu``
    (process CPU seconds, all threads) and ``peak_mb`` (peak RSS) per round,
    and ``result``, the last round's return value; outputs of the last round
    stay in ``out/<name>``.
    """
    runs = {job: {"seconds": [], "cpu": [], "peak_mb": [], "result": None} for job in jobs}
    for _ in range(rounds):
        for job, run in jobs.items():
            shutil.rmtree(os.path.join(out, job), ignore_errors=True)
            _reset_peak()
            start, start_cpu = time.perf_counter(), time.process_time()
            runs[job]["result"] = run(os.path.join(out, job))
            runs[job]["seconds"].append(time.perf_counter() - start)
            runs[job]["cpu"].append(time.process_time() - start_cpu)
            runs[job]["peak_mb"].append(pipeline._status_kb("VmHWM") / 1024)
    return runs


def throughput(name: str, count: int, rounds: int, seed: int, beam: bool) -> dict:
    from tfpack.engines.local import pack_records

    pattern = input_files(name, count, seed)
    out = os.path.join(HERE, "output", "engines-out")
    args = dict(max_length=L, max_sequences_per_pack=K, algorithm="optimal",
                max_predictions_per_pack=M, packs_per_shard=4096, seed=seed)
    jobs = {"floor": lambda d: floor(pattern, d), "local": lambda d: pack_records(pattern, d, **args)}
    if beam:
        from tfpack.beam import pack_tfrecords

        jobs["beam"] = lambda d: pack_tfrecords(pattern, d, **args)
    runs = interleaved(jobs, rounds, out)
    seconds = {job: r["seconds"] for job, r in runs.items()}
    peak_mb = {job: r["peak_mb"] for job, r in runs.items()}
    packs, identical = runs["local"]["result"]["packs"], None
    if beam:  # the last round's outputs: same shards, byte for byte
        local, other = os.path.join(out, "local"), os.path.join(out, "beam")
        shards = sorted(n for n in os.listdir(local) if n.startswith("part-"))
        identical = shards == sorted(
            n for n in os.listdir(other) if n.startswith("part-")) and all(
            filecmp.cmp(os.path.join(local, n), os.path.join(other, n), shallow=False)
            for n in shards)
    shutil.rmtree(out, ignore_errors=True)
    from tfpack.formats.records import list_files, scan_google_records

    lengths, _ = scan_google_records(list_files(pattern))
    return {"lengths": name, "examples": count, "mean_length": float(lengths.mean()),
            "packs": packs, "rounds": rounds, "seconds": seconds, "peak_mb": peak_mb,
            "identical": identical,
            "input_mb": sum(os.path.getsize(f) for f in glob.glob(pattern)) / 2**20}


def assign_child(count: int, seed: int) -> None:
    """Plan and assign ``count`` lengths in this process; print seconds and peak RSS as JSON."""
    import tfpack

    hist = tfpack.datasets.histogram("wikipedia_512").astype(np.float64)
    rng = np.random.default_rng(seed)
    lengths = np.empty(count, np.int64)
    for start in range(0, count, 1 << 24):  # chunks: no float64 array of size count
        size = min(1 << 24, count - start)
        lengths[start:start + size] = rng.choice(np.arange(1, L + 1), size=size,
                                                 p=hist / hist.sum())
    start = time.perf_counter()
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, L), L, K, algorithm="optimal")
    plan_seconds = time.perf_counter() - start
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak mark: measure assign alone
    before = pipeline._status_kb("VmRSS")
    start = time.perf_counter()
    assignment = plan.assign(lengths, seed=seed)
    seconds = time.perf_counter() - start
    print(json.dumps({"lengths": count, "plan_seconds": plan_seconds, "seconds": seconds,
                      "packs": assignment.num_packs, "rss_before_mb": before / 1024,
                      "peak_rss_mb": pipeline._status_kb("VmHWM") / 1024}))


def assign_benchmark(count: int, seed: int) -> dict:
    child = subprocess.run([sys.executable, __file__, "--assign-child", str(count)],
                           check=True, capture_output=True, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(child.stdout.strip().splitlines()[-1])


LABELS = {"floor": "floor: read, parse, write the same records",
          "local": "local engine (`tfpack pack`)",
          "beam": "Beam engine, DirectRunner, 2 worker processes"}


def report(throughputs, asg) -> str:
    command = " ".join([".venv/bin/python", "benchmarks/engines.py", *sys.argv[1:]])
    lines = ["# Engines of `tfpack pack` (`benchmarks/engines.py`)", "",
             f"Command: `{command}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other "
             f"jobs (load average {os.getloadavg()[0]:.1f} at the end; absolute times drift, "
             "ratios come from interleaved rounds of one run).", ""]
    if throughputs:
        tp = throughputs[0]
        lines += [
            "## 1. Throughput: the local engine vs the read+parse+write floor", "",
            f"{tp['examples']:,} Google-format BERT records in 4 files per length distribution, "
            f"L={L}, K={K}, M={M}, `optimal`, 4,096 packs per shard; {tp['rounds']} interleaved "
            "rounds, median (min-max). \"vs floor\": floor seconds / job seconds of the same "
            "round, median (min-max) over rounds. Peak memory: the process's peak RSS during the "
            "job (TensorFlow included; the mark reset before each job), the most over rounds; "
            "`benchmarks/pipeline.py` section 3 shows it flat in the number of records. Lengths `google`: "
            "Google's `create_pretraining_data` algorithm (`tfpack.builders.bert`) on long "
            "real documents (standard-library docstrings, "
            f"{MODULES_PER_DOCUMENT} modules a document); `wikipedia`: the `wikipedia_512` "
            "histogram.", "",
            "| lengths | job | seconds | examples/s | MB/s | peak memory MB | vs floor |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
        verdicts = []
        for tp in throughputs:
            ratios = {k: np.array(tp["seconds"]["floor"]) / np.array(v)
                      for k, v in tp["seconds"].items()}
            for job, s in tp["seconds"].items():
                med, r = float(np.median(s)), ratios[job]
                lines.append(
                    f"| {tp['lengths']} (mean {tp['mean_length']:.0f}, {tp['input_mb']:,.0f} MB) | "
                    f"{LABELS[job]} | {med:.1f} ({min(s):.1f}-{max(s):.1f}) | "
                    f"{tp['examples'] / med:,.0f} | {tp['input_mb'] / med:,.1f} | "
                    f"{max(tp['peak_mb'][job]):,.0f} | "
                    f"{np.median(r):.2f}x ({r.min():.2f}-{r.max():.2f}) |")
            ratio = float(np.median(ratios["local"]))
            verdicts.append(
                f"- `{tp['lengths']}`: local {ratio:.2f}x the floor "
                f"(rounds {', '.join(f'{x:.2f}' for x in ratios['local'])}; {tp['packs']:,} packs): "
                f"target >= {TARGET}x {'met' if ratio >= TARGET else 'NOT met'}."
                + ("" if tp["identical"] is None else
                   f" Beam shards byte-identical to the local engine's: "
                   f"{'yes' if tp['identical'] else 'NO'}."))
        lines += ["", *verdicts, ""]
    if asg:
        lines += [
            "## 2. `PackingPlan.assign` on 10^8 lengths", "",
            f"{asg['lengths']:,} lengths from `wikipedia_512`, L={L}, K={K}, plan `optimal` "
            f"({asg['plan_seconds']:.1f} s), in a fresh process.", "",
            "| lengths | packs | assign seconds | ns per example | RSS before MB "
            "(lengths: 8 bytes each) | peak RSS MB | peak - before, bytes per example |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            f"| {asg['lengths']:,} | {asg['packs']:,} | {asg['seconds']:.1f} | "
            f"{asg['seconds'] / asg['lengths'] * 1e9:.0f} | {asg['rss_before_mb']:,.0f} | "
            f"{asg['peak_rss_mb']:,.0f} | "
            f"{(asg['peak_rss_mb'] - asg['rss_before_mb']) * 2**20 / asg['lengths']:.1f} |", ""]
    return "\n".join(lines)


def dask_scaling(count: int, rounds: int, seed: int, files: int = 8) -> dict:
    """Section 3: Beam's Dask runner on 1 and on 2 worker processes, same input."""
    import distributed

    from tfpack.beam import pack_tfrecords
    from tfpack.engines.local import pack_records

    folder = os.path.join(HERE, "output", f"engines-dask-{count}-{files}")
    if not os.path.exists(os.path.join(folder, "done")):
        shutil.rmtree(folder, ignore_errors=True)
        pipeline.write_google_shards(folder, count, shards=files, seed=seed)
        open(os.path.join(folder, "done"), "w").close()
    pattern = os.path.join(folder, "*.tfrecord")
    out = os.path.join(HERE, "output", "engines-dask-out")
    args = dict(max_length=L, max_sequences_per_pack=K, algorithm="optimal",
                max_predictions_per_pack=M, packs_per_shard=1024, seed=seed)
    shutil.rmtree(out, ignore_errors=True)
    pack_records(pattern, os.path.join(out, "local"), **args)
    runner = "--runner=apache_beam.runners.dask.dask_runner.DaskRunner"
    clusters = {n: distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                            dashboard_address=":0") for n in (1, 2)}
    seconds = {n: [] for n in clusters}
    identical = True
    try:
        for round_ in range(rounds + 1):  # round 0 warms the workers up (TensorFlow import)
            for n, cluster in clusters.items():  # interleaved: the machine is shared
                target = os.path.join(out, f"dask-{n}")
                shutil.rmtree(target, ignore_errors=True)
                start = time.perf_counter()
                pack_tfrecords(pattern, target, beam_options=(
                    f"{runner} --dask_client_address={cluster.scheduler_address}"), **args)
                if round_:
                    seconds[n].append(time.perf_counter() - start)
                local = os.path.join(out, "local")
                identical &= all(filecmp.cmp(os.path.join(local, f), os.path.join(target, f),
                                             shallow=False)
                                 for f in os.listdir(local) if f.startswith("part-"))
    finally:
        for cluster in clusters.values():
            cluster.close()
        shutil.rmtree(out, ignore_errors=True)
    return {"examples": count, "files": files, "rounds": rounds, "identical": identical,
            "seconds": {str(n): v for n, v in seconds.items()}, "load": os.getloadavg()[1],
            "input_mb": sum(os.path.getsize(f) for f in glob.glob(pattern)) / 2**20}


def dask_report(result: dict) -> str:
    command = " ".join([".venv/bin/python", "benchmarks/engines.py", *sys.argv[1:]])
    med = {n: float(np.median(v)) for n, v in result["seconds"].items()}
    one = np.array(result["seconds"]["1"])
    speedup = one / np.array(result["seconds"]["2"])  # per round: interleaved pairs
    lines = ["# `tfpack pack --engine beam` on Beam's Dask runner: 1 vs 2 workers", "",
             f"Command: `{command}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other "
             "jobs (absolute times drift; the ratio comes from interleaved rounds).", "",
             f"Load average during the run: {result.get('load', float('nan')):.1f} "
             f"(on {os.cpu_count()} cores).", "",
             f"{result['examples']:,} Google-format records (L={L}, `wikipedia_512` lengths, "
             f"{result['input_mb']:,.0f} MB) in {result['files']} files; "
             "`distributed.LocalCluster`, one thread per worker process, started and warmed "
             f"up before timing; {result['rounds']} interleaved rounds.", "",
             "| workers | seconds (median) | min-max | examples/s |",
             "| --- | --- | --- | --- |"]
    for n in ("1", "2"):
        v = result["seconds"][n]
        lines.append(f"| {n} | {med[n]:.1f} | {min(v):.1f}-{max(v):.1f} | "
                     f"{result['examples'] / med[n]:,.0f} |")
    lines += ["", f"Speed-up of 2 workers over 1: **{float(np.median(speedup)):.2f}x** "
              f"(per-round {speedup.min():.2f}x-{speedup.max():.2f}x). Shards byte-identical "
              f"to the local engine's: {result['identical']}.", "",
              "Beam's Dask runner (2.77) computes each side input again in every partition "
              "that reads it (tfpack caches the scans and the plan in the staging directory, "
              "so these recomputations are cheap reads, but still tasks); two workers gain "
              "only where the cores are free.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", "--examples", dest="records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lengths", default="google,wikipedia",
                        help="comma-separated: google,wikipedia")
    parser.add_argument("--beam", action="store_true", help="also the Beam engine (slow)")
    parser.add_argument("--assign", action="store_true",
                        help="also section 2: assign 10^8 lengths (minutes, ~6 GB)")
    parser.add_argument("--assign-lengths", type=int, default=100_000_000)
    parser.add_argument("--skip", default="", help="comma-separated: throughput")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=os.path.join(HERE, "results", "engines.md"))
    parser.add_argument("--assign-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dask", action="store_true",
                        help="only section 3: Beam's Dask runner, 1 vs 2 workers")
    args = parser.parse_args(argv)
    if args.dask:
        result = dask_scaling(args.records, args.rounds, args.seed)
        print(json.dumps(result), flush=True)
        text = dask_report(result)
        with open(os.path.join(HERE, "results", "engines_dask.md"), "w") as f:
            f.write(text)
        print(text)
        return 0
    if args.assign_child:
        assign_child(args.assign_child, args.seed)
        return 0
    skip = set(filter(None, args.skip.split(",")))
    asg = assign_benchmark(args.assign_lengths, args.seed) if args.assign else None
    if asg:
        print(json.dumps(asg), flush=True)
    throughputs = []
    if "throughput" not in skip:
        for name in filter(None, args.lengths.split(",")):
            throughputs.append(throughput(name, args.records, args.rounds, args.seed, args.beam))
            print(json.dumps(throughputs[-1]), flush=True)
    text = report(throughputs, asg)
    write_results(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
