"""Bytes each training worker reads, and single-worker throughput: before and after.

Before (main): `Trainer.fit(read_packed(dir))` -- every worker verifies the
output's sha256 (one full read) and then reads the whole stream, keeping every
W-th group of micro-batches (`Trainer.distribute`). After: `Trainer.fit(dir)`
-- each worker reads only the shards of its range of packs
(`tfpack.packing.workers.split_packs`, `Trainer.distribute_packed`).

1. Bytes read per worker per epoch (every worker's updates of 3 epochs, / 3),
   with 1 and 2 workers, on outputs of 1x and 10x the size: the input
   pipeline each worker builds (`Trainer.distribute*`'s ``dataset_fn`` with the
   worker's `tf.distribute.InputContext`) run in this process, counted with
   ``/proc/self/io`` ``rchar`` (every byte read by any thread; the pipeline is
   built inside the count, so start-up reads are included).
2. Single-worker training throughput: `Trainer.fit` of a small BERT for the same
   updates on the dataset (before) and on the directory (after), interleaved
   rounds, median packs/s with the min-max.

    .venv/bin/python benchmarks/worker_reads.py            # 2,000 and 20,000 packs, 5 rounds

Writes ``benchmarks/results/worker_reads.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "output", "worker_reads")
L, K, M, V = 128, 3, 20, 30522
EPOCHS = 3


def rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar")).split()[1])


def packs(n: int, seed: int) -> dict:
    """``n`` random packs of 1..K sequences (DESIGN.md features)."""
    rng = np.random.default_rng(seed)
    f = {k: np.zeros((n, L), np.int64) for k in ("input_ids", "sequence_ids", "position_ids",
                                                  "token_type_ids")}
    f.update({k: np.zeros((n, M), np.int64) for k in ("masked_lm_positions", "masked_lm_ids",
                                                      "masked_lm_sequence_ids")})
    f["masked_lm_weights"] = np.zeros((n, M), np.float32)
    f["cls_positions"] = np.zeros((n, K), np.int64)
    f["sequence_mask"] = np.zeros((n, K), np.float32)
    f["next_sentence_labels"] = np.zeros((n, K), np.int64)
    for i in range(n):
        start = 0
        for k, length in enumerate(rng.integers(8, L // K + 1, size=rng.integers(1, K + 1))):
            f["input_ids"][i, start:start + length] = rng.integers(1000, V, size=length)
            f["sequence_ids"][i, start:start + length] = k + 1
            f["position_ids"][i, start:start + length] = np.arange(length)
            f["cls_positions"][i, k], f["sequence_mask"][i, k] = start, 1.0
            start += length
        m = min(M, start // 7)
        f["masked_lm_positions"][i, :m] = np.sort(rng.choice(start, m, replace=False))
        f["masked_lm_ids"][i, :m] = f["input_ids"][i, f["masked_lm_positions"][i, :m]]
        f["masked_lm_weights"][i, :m] = 1.0
        f["masked_lm_sequence_ids"][i, :m] = f["sequence_ids"][i, f["masked_lm_positions"][i, :m]]
    return f


def write_output(directory: str, n: int, shards: int) -> str:
    """A packed output of ``n`` packs in ``shards`` shards of uneven sizes."""
    import tensorflow as tf

    from tfpack.formats import manifest
    from tfpack.formats.records import packed_features, serialize_packs

    if os.path.exists(os.path.join(directory, manifest.MANIFEST)):
        return directory
    os.makedirs(directory, exist_ok=True)
    data = packs(n, seed=n)
    weights = np.random.default_rng(0).uniform(0.5, 1.5, shards)
    counts = np.floor(weights / weights.sum() * n).astype(int)
    counts[-1] += n - counts.sum()
    listed, start = [], 0
    for i, count in enumerate(counts):
        name = f"part-{i:05d}-of-{shards:05d}.tfrecord"
        with manifest.atomic_path(os.path.join(directory, name)) as tmp, \
                tf.io.TFRecordWriter(tmp) as writer:
            for record in serialize_packs({k: v[start:start + count] for k, v in data.items()}):
                writer.write(record)
        listed.append((name, int(count)))
        start += count
    manifest.write_manifest(directory, listed,
                            features=packed_features({k: v[:1] for k, v in data.items()}),
                            max_length=L, max_sequences_per_pack=K, max_predictions_per_pack=M,
                            sequences=int(data["sequence_mask"].sum()), created_by="benchmark")
    return directory


class _Inline:
    """A stand-in strategy of ``workers`` one-replica workers whose
    ``distribute_datasets_from_function`` runs the input function of one worker
    (the pipeline that worker builds) in this process."""

    def __init__(self, workers: int, worker: int):
        import tensorflow as tf

        self.num_replicas_in_sync = workers
        self.context = tf.distribute.InputContext(workers, worker, workers)
        self.extended = type("Extended", (), {"_num_workers": workers})()

    def scope(self):
        import contextlib

        return contextlib.nullcontext()

    def distribute_datasets_from_function(self, fn):
        return fn(self.context)


def model_fn():
    import keras

    from tfpack import models

    keras.utils.set_random_seed(0)
    return models.BertPretrainer(models.BertEncoder(
        vocabulary_size=V, num_layers=1, hidden_dim=32, num_heads=2, intermediate_dim=64,
        max_sequence_length=L, dropout=0.0, attention_dropout=0.0))


def trainer(micro: int, strategy=None):
    from tfpack.training import Lamb, Trainer

    return Trainer(model_fn, lambda: Lamb(1e-3), micro_batch_size=micro, progress=False,
                   log_every=10, strategy=strategy)


def bytes_read(directory: str, workers: int, micro: int, mode: str) -> list[int]:
    """Bytes each of ``workers`` workers reads for one epoch of updates (before or after)."""
    from tfpack.formats import read_packed

    found = []
    for w in range(workers):
        t = trainer(micro, _Inline(workers, w))
        with open(os.path.join(directory, "manifest.json")) as f:
            packs_in_output = json.load(f)["packs"]
        steps = -(-packs_in_output // (workers * micro))  # updates of one epoch
        before = rchar()
        data = (t.distribute(read_packed(directory)) if mode == "before"
                else t.distribute_packed(directory))
        # The micro-batches of EPOCHS epochs (accumulation 1), per epoch: the pipeline
        # prefetches past the last update counted, so one epoch alone would count ahead.
        for _ in data.take(EPOCHS * steps):
            pass
        found.append((rchar() - before) // EPOCHS)
    return found


def throughput(directory: str, micro: int, steps: int, how: str) -> float:
    from tfpack.formats import read_packed

    t = trainer(micro)
    source = read_packed(directory).repeat() if how == "before" else directory
    t.fit(source, 10)  # compile and warm up
    tic = time.perf_counter()
    t.fit(source, 10 + steps)
    return steps * micro / (time.perf_counter() - tic)


def _child(tree: str, *args) -> dict:
    """Run this script's measurement ``args`` in a fresh process on the code of ``tree``."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": tree, "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, os.path.abspath(__file__), *map(str, args)],
                            env=env, capture_output=True, text=True, check=False)
    if result.returncode:
        raise SystemExit(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(args) -> None:
    """In a child process: the bytes or the throughput of one setting, as JSON."""
    if args.measure == "throughput":
        print(json.dumps({"packs_per_second": throughput(args.dir, args.micro, args.steps,
                                                         args.how)}))
    else:
        print(json.dumps({"reads": bytes_read(args.dir, args.workers, args.micro, args.how)}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--packs", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--before-tree", default="/work/main",
                        help="checkout of the code before (main)")
    parser.add_argument("--measure", choices=["reads", "throughput"], help=argparse.SUPPRESS)
    parser.add_argument("--how", choices=["before", "after"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return measure(args)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    after_tree = os.path.dirname(HERE)
    sys.path.insert(0, after_tree)
    trees = {"before": args.before_tree, "after": after_tree}

    outputs = {"1x": write_output(os.path.join(OUT, "1x"), args.packs, args.shards),
               "10x": write_output(os.path.join(OUT, "10x"), 10 * args.packs,
                                   10 * args.shards)}
    rows = []
    for size, directory in outputs.items():
        total = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
                    if f.endswith(".tfrecord"))
        for workers in (1, 2):
            for how in ("before", "after"):
                reads = _child(trees[how], "--measure", "reads", "--how", how, "--dir",
                               directory, "--workers", workers, "--micro", args.micro)["reads"]
                rows.append((size, total, workers, how, reads))

    timings = {"before": [], "after": []}
    for _ in range(args.rounds):
        for how in ("before", "after"):
            timings[how].append(_child(
                trees[how], "--measure", "throughput", "--how", how, "--dir", outputs["1x"],
                "--micro", args.micro, "--steps", args.steps)["packs_per_second"])
    def spread(values):
        return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"

    ratios = [a / b for a, b in zip(timings["after"], timings["before"])]
    lines = [
        "# Each worker reads its share of a packed output",
        "",
        f"Command: `.venv/bin/python benchmarks/worker_reads.py --packs {args.packs} "
        f"--shards {args.shards} --rounds {args.rounds}` (before: the code of main at",
        f"`{args.before_tree}`; after: this tree; each measurement in a fresh process)",
        f"({platform.machine()}, {os.cpu_count()} CPUs shared with other jobs; "
        f"L={L}, K={K}, M={M}; micro-batch {args.micro} packs per worker).",
        "",
        "## Bytes read per worker per epoch (`/proc/self/io` rchar over 3 epochs of updates, / 3)",
        "",
        "Before: `Trainer.fit(read_packed(dir))` (sha256 of every shard, then the whole",
        "stream, every W-th group of micro-batches kept). After: `Trainer.fit(dir)` (each",
        "worker reads only the shards of its range, `split_packs`; the manifest and sizes",
        "are checked when the output is opened). The start-up sha256 pass of `before` is",
        "counted once in its 3 epochs.",
        "",
        "| output | shard bytes | workers | | worker 0 | worker 1 | per worker / output |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for size, total, workers, how, reads in rows:
        cells = [f"{r / 1e6:.2f} MB" for r in reads] + ["-"] * (2 - len(reads))
        lines.append(f"| {size} | {total / 1e6:.2f} MB | {workers} | {how} | {cells[0]} | "
                     f"{cells[1]} | {max(reads) / total:.2f}x |")
    lines += [
        "",
        "## Single-worker training throughput (1x output, 1-layer BERT, hidden 32)",
        "",
        f"{args.steps} updates of {args.micro} packs after 10 warm-up updates, "
        f"{args.rounds} interleaved rounds, median packs/s (min-max).",
        "",
        "| input | packs/s |",
        "| --- | --- |",
        f"| dataset `read_packed(dir)` (before) | {spread(timings['before'])} |",
        f"| packed output `dir` (after) | {spread(timings['after'])} |",
        f"| ratio after / before | {statistics.median(ratios):.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f}) |",
        "",
    ]
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "worker_reads.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))

if __name__ == "__main__":
    main()
