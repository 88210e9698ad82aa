"""Input-pipeline benchmarks for `tfpack.data` (issue 3 targets).

1. Throughput: real tokens/s of the packed pipeline (offline and streaming
   ``pack``) against the plain padded pipeline (``padded_batch`` to L) on the
   same BERT examples, measured in one run. Target: packed >= 0.9x padded.
2. Streaming efficiency: ``window=10000`` against the offline plan on 1M
   lengths drawn from the Wikipedia histogram. Target: within 0.5%.
3. ``tfpack pack`` on synthetic Google-format TFRecords drawn from the
   Wikipedia histogram: time and peak memory at two dataset sizes, each in
   its own process, to show memory grows only with the per-example arrays.

Run:

    .venv/bin/python benchmarks/pipeline.py                      # all, 250k and 1M
    .venv/bin/python benchmarks/pipeline.py --pack-sizes 100000,250000

Writes a Markdown report (default ``benchmarks/results/pipeline.md``); the
generated TFRecords go to ``benchmarks/output/`` (ignored by git).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time

import numpy as np
from results_file import write_results

HERE = os.path.dirname(os.path.abspath(__file__))
L, K, M_SEQ, M_PACK = 512, 3, 76, 80


def sample_lengths(count: int, seed: int) -> np.ndarray:
    import tfpack

    hist = tfpack.datasets.histogram("wikipedia_512").astype(np.float64)
    rng = np.random.default_rng(seed)
    return rng.choice(np.arange(1, L + 1), size=count, p=hist / hist.sum()).astype(np.int64)


def synthetic_bert(lengths: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Padded Google-style BERT features ``[n, 512]`` / ``[n, 76]`` for ``lengths``."""
    rng = np.random.default_rng(seed)
    n = len(lengths)
    cols = np.arange(L)
    real = cols < lengths[:, None]
    ids = np.where(real, rng.integers(1000, 30000, size=(n, L)), 0)
    ids[:, 0] = 101
    split = np.maximum(1, (lengths * rng.uniform(0.2, 0.8, n)).astype(np.int64))
    segment = (real & (cols >= split[:, None])).astype(np.int64)
    predictions = np.minimum(M_SEQ, np.maximum(1, np.round(lengths * 0.15))).astype(np.int64)
    # Random distinct positions per row: the smallest random keys among real tokens.
    keys = np.where(real & (cols > 0), rng.random((n, L)), 2.0)
    chosen = np.sort(np.argsort(keys, axis=1)[:, :M_SEQ], axis=1)
    pred_real = np.arange(M_SEQ) < np.minimum(predictions, np.maximum(lengths - 1, 1))[:, None]
    positions = np.where(pred_real, chosen, 0)
    return {
        "input_ids": ids, "input_mask": real.astype(np.int64), "segment_ids": segment,
        "masked_lm_positions": positions,
        "masked_lm_ids": np.where(pred_real, np.take_along_axis(ids, positions, 1), 0),
        "masked_lm_weights": pred_real.astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, size=(n, 1)),
    }


# -- 1. throughput -------------------------------------------------------------


def throughput(count: int, batch: int, seed: int, repeats: int) -> dict:
    import tensorflow as tf

    import tfpack

    lengths = sample_lengths(count, seed)
    raw = synthetic_bert(lengths, seed)
    weights = raw["masked_lm_weights"] > 0
    ragged = lambda x, mask: tf.RaggedTensor.from_row_lengths(x[mask], mask.sum(1))
    real = raw["input_mask"] > 0
    tensors = {
        "input_ids": ragged(raw["input_ids"].astype(np.int32), real),
        "token_type_ids": ragged(raw["segment_ids"].astype(np.int32), real),
        "masked_lm_positions": ragged(raw["masked_lm_positions"].astype(np.int32), weights),
        "masked_lm_ids": ragged(raw["masked_lm_ids"].astype(np.int32), weights),
        "masked_lm_weights": ragged(raw["masked_lm_weights"], weights),
        "next_sentence_labels": tf.constant(raw["next_sentence_labels"][:, 0].astype(np.int32)),
    }
    examples = tf.data.Dataset.range(count).map(
        lambda i: {n: t[i] for n, t in tensors.items()}, num_parallel_calls=tf.data.AUTOTUNE)
    tokens = int(lengths.sum())
    def run(dataset):
        start = time.perf_counter()
        for _ in dataset:
            pass
        return time.perf_counter() - start

    padded_shapes = {"input_ids": [L], "token_type_ids": [L], "masked_lm_positions": [M_SEQ],
                     "masked_lm_ids": [M_SEQ], "masked_lm_weights": [M_SEQ],
                     "next_sentence_labels": []}
    start = time.perf_counter()
    packer = tfpack.data.pack(max_length=L, max_sequences_per_pack=K,
                              max_predictions_per_pack=M_PACK, batch_size=batch)
    packed = examples.apply(packer)
    build_seconds = time.perf_counter() - start
    pipelines = {
        "padded": examples.padded_batch(batch, padded_shapes),
        "offline": packed,
        "offline_unbatched": examples.apply(tfpack.data.pack(
            max_length=L, max_sequences_per_pack=K, max_predictions_per_pack=M_PACK)
        ).batch(batch),
    }
    for algorithm in ("optimal", "lpfhp"):
        pipelines[f"streaming_{algorithm}"] = examples.apply(tfpack.data.pack(
            max_length=L, max_sequences_per_pack=K, max_predictions_per_pack=M_PACK,
            algorithm=algorithm, window=10_000)).batch(batch)
    pipelines = {k: v.prefetch(tf.data.AUTOTUNE) for k, v in pipelines.items()}
    # The machine is shared: interleave the pipelines and keep each one's best epoch.
    seconds = {k: [] for k in pipelines}
    for _ in range(repeats):
        for name, dataset in pipelines.items():
            seconds[name].append(run(dataset))
    best = {k: min(v) for k, v in seconds.items()}
    results = {"examples": count, "tokens": tokens, "batch": batch, "repeats": repeats,
               "packs": packer.report.packs, "efficiency": packer.report.efficiency,
               "offline_build_seconds": build_seconds, "seconds": best, "all_seconds": seconds}
    results["tokens_per_s"] = {k: tokens / v for k, v in best.items()}
    return results


# -- 2. streaming efficiency ----------------------------------------------------


def streaming_vs_offline(count: int, window: int, seed: int, algorithms) -> list[dict]:
    import tfpack

    lengths = sample_lengths(count, seed)
    rows = []
    for algorithm in algorithms:
        start = time.perf_counter()
        offline = tfpack.packing.plan(tfpack.packing.histogram(lengths, L), L, K,
                                      algorithm=algorithm).metrics
        offline_seconds = time.perf_counter() - start
        start = time.perf_counter()
        streaming = tfpack.data.streaming_metrics(lengths, L, K, window, algorithm)
        rows.append({"algorithm": algorithm, "offline": offline["efficiency"],
                     "offline_packs": offline["packs"], "streaming": streaming["efficiency"],
                     "streaming_packs": streaming["packs"], "offline_seconds": offline_seconds,
                     "streaming_seconds": time.perf_counter() - start})
    return rows


# -- 3. tfpack pack ------------------------------------------------------------------


def write_google_shards(folder: str, count: int, shards: int, seed: int,
                        lengths: np.ndarray | None = None) -> None:
    """``count`` Google-format records in ``shards`` files; lengths from `wikipedia_512`
    unless given."""
    import tensorflow as tf

    from tfpack.formats.protos import encode_examples

    os.makedirs(folder, exist_ok=True)
    lengths = sample_lengths(count, seed) if lengths is None else lengths
    per_shard = -(-count // shards)
    chunk = 4096
    for s in range(shards):
        part = lengths[s * per_shard:(s + 1) * per_shard]
        with tf.io.TFRecordWriter(os.path.join(folder, f"wiki-{s:03d}.tfrecord")) as writer:
            for start in range(0, len(part), chunk):
                for record in encode_examples(synthetic_bert(part[start:start + chunk],
                                                             seed + s * 7919 + start)):
                    writer.write(record)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def pack_child(folder: str, output: str) -> None:
    """Run `pack_records` in this process and print time and peak memory as JSON."""
    import tensorflow as tf  # noqa: F401 - count TensorFlow in the baseline

    from tfpack.engines.local import pack_records

    # Reset the peak-RSS mark so TensorFlow's import transient does not hide ours.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    baseline = _status_kb("VmRSS")
    start = time.perf_counter()
    stats = pack_records(os.path.join(folder, "*.tfrecord"), output, max_length=L,
                         max_sequences_per_pack=K, algorithm="optimal",
                         max_predictions_per_pack=M_PACK)
    print(json.dumps({
        "seconds": time.perf_counter() - start, "phase_seconds": stats["seconds"],
        "peak_rss_mb": _status_kb("VmHWM") / 1024,
        "baseline_rss_mb": baseline / 1024, "packs": stats["packs"],
        "sequences": stats["sequences"], "efficiency": stats["efficiency"],
        "shards": len(stats["output_files"])}))


def pack_benchmark(size: int, seed: int) -> dict:
    folder = os.path.join(HERE, "output", f"google-{size}")
    output = os.path.join(HERE, "output", f"packed-{size}")
    start = time.perf_counter()
    if not os.path.exists(os.path.join(folder, "done")):
        shutil.rmtree(folder, ignore_errors=True)
        write_google_shards(folder, size, shards=max(1, size // 62_500), seed=seed)
        open(os.path.join(folder, "done"), "w").close()
    generate_seconds = time.perf_counter() - start
    shutil.rmtree(output, ignore_errors=True)
    child = subprocess.run([sys.executable, __file__, "--pack-child", folder, output],
                           check=True, capture_output=True, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    result = json.loads(child.stdout.strip().splitlines()[-1])
    result.update(size=size, generate_seconds=generate_seconds,
                  input_mb=sum(os.path.getsize(os.path.join(folder, f))
                               for f in os.listdir(folder)) / 2**20)
    shutil.rmtree(output, ignore_errors=True)
    return result


# -- report --------------------------------------------------------------------------


def report(args, tp, stream, packs) -> str:
    command = " ".join([".venv/bin/python", "benchmarks/pipeline.py", *sys.argv[1:]])
    lines = ["# Input pipeline benchmarks (`benchmarks/pipeline.py`)", "",
             f"Command: `{command}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared with other "
             "jobs: absolute times drift; ratios are measured in one run).", ""]
    if tp:
        rate = tp["tokens_per_s"]
        ratio = rate["offline"] / rate["padded"]
        with_build = tp["tokens"] / (tp["seconds"]["offline"] + tp["offline_build_seconds"])
        rows = [("padded (`padded_batch` to 512)", "padded"),
                ("packed offline (optimal), `pack(batch_size=32)`", "offline"),
                ("packed offline (optimal), `pack(...).batch(32)`", "offline_unbatched"),
                ("packed streaming, window 10,000, optimal", "streaming_optimal"),
                ("packed streaming, window 10,000, lpfhp", "streaming_lpfhp")]
        lines += [
            "## 1. Throughput: packed vs padded pipeline, same examples", "",
            f"{tp['examples']} BERT examples (lengths from `wikipedia_512`, {tp['tokens']:,} real "
            f"tokens), L={L}, K={K}, M={M_PACK}, batches of {tp['batch']}; in-memory source "
            f"dataset; best of {tp['repeats']} interleaved epochs per pipeline.",
            "", "| pipeline | seconds per epoch | real tokens/s | vs padded |",
            "| --- | --- | --- | --- |"]
        for label, key in rows:
            lines.append(f"| {label} | {tp['seconds'][key]:.2f} | {rate[key]:,.0f} | "
                         f"{rate[key] / rate['padded']:.2f}x |")
        lines += [
            f"| packed offline incl. pass 1 + plan ({tp['offline_build_seconds']:.2f} s, once) | "
            f"{tp['seconds']['offline'] + tp['offline_build_seconds']:.2f} | {with_build:,.0f} | "
            f"{with_build / rate['padded']:.2f}x |", "",
            f"Packs: {tp['packs']} for {tp['examples']} examples (efficiency "
            f"{tp['efficiency']:.4f}); a packed batch carries "
            f"{tp['examples'] / tp['packs']:.2f}x the real tokens of a padded one. "
            f"Target >= 0.9x (offline epoch): {'met' if ratio >= 0.9 else 'NOT met'}.", ""]
    if stream:
        lines += ["## 2. Streaming (window 10,000) vs offline plan", "",
                  f"{args.stream_examples:,} lengths drawn from `wikipedia_512`, L={L}, K={K}.", "",
                  "| algorithm | offline efficiency | streaming efficiency | difference "
                  "(points) | offline packs | streaming packs | streaming seconds |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in stream:
            lines.append(
                f"| {r['algorithm']} | {r['offline']:.4%} | {r['streaming']:.4%} | "
                f"{(r['offline'] - r['streaming']) * 100:.3f} | {r['offline_packs']:,} | "
                f"{r['streaming_packs']:,} | {r['streaming_seconds']:.1f} |")
        lines += ["", "Target: within 0.5 points of offline.", ""]
    if packs:
        lines += ["## 3. `tfpack pack` on synthetic Google TFRecords", "",
                  f"Lengths from `wikipedia_512`, padded to {L} like `create_pretraining_data`, "
                  f"K={K}, M={M_PACK}, optimal, 16,384 packs per shard; each size in a fresh "
                  "process (peak RSS includes TensorFlow itself).", "",
                  "| examples | input MB | seconds: scan / plan / route / build / total | "
                  "packs | efficiency | peak RSS MB | RSS before packing MB | peak - before MB |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in packs:
            ph = r["phase_seconds"]
            lines.append(
                f"| {r['size']:,} | {r['input_mb']:,.0f} | {ph.get('scan', ph.get('read_lengths')):.1f} / "
                f"{ph['plan']:.1f} / {ph['route']:.1f} / {ph['build']:.1f} / {r['seconds']:.1f} | "
                f"{r['packs']:,} | {r['efficiency']:.4f} | "
                f"{r['peak_rss_mb']:,.0f} | {r['baseline_rss_mb']:,.0f} | "
                f"{r['peak_rss_mb'] - r['baseline_rss_mb']:,.0f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=32768, help="throughput examples")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved epochs per pipeline")
    parser.add_argument("--stream-examples", type=int, default=1_000_000)
    parser.add_argument("--stream-algorithms", default="optimal,lpfhp")
    parser.add_argument("--pack-sizes", default="250000,1000000",
                        help="comma-separated dataset sizes for `tfpack pack` ('' to skip)")
    parser.add_argument("--skip", default="", help="comma-separated: throughput,streaming,pack")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=os.path.join(HERE, "results", "pipeline.md"))
    parser.add_argument("--pack-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pack_child:
        pack_child(*args.pack_child)
        return 0
    skip = set(filter(None, args.skip.split(",")))
    tp = None if "throughput" in skip else throughput(args.examples, args.batch, args.seed,
                                                              args.repeats)
    if tp:
        print(json.dumps(tp), flush=True)
    stream = None if "streaming" in skip else streaming_vs_offline(
        args.stream_examples, 10_000, args.seed, args.stream_algorithms.split(","))
    if stream:
        print(json.dumps(stream), flush=True)
    packs = []
    if "pack" not in skip:
        for size in filter(None, args.pack_sizes.split(",")):
            packs.append(pack_benchmark(int(size), args.seed))
            print(json.dumps(packs[-1]), flush=True)
    text = report(args, tp, stream, packs)
    write_results(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
