"""Reading a packed output: start-up time, bytes read per epoch, throughput; before and after.

Before: main's `read_packed` (the sha256 of every shard computed when called,
then the packs read); after: this tree's (metadata-time open, each block's
digest checked as it is read). Both read the same outputs (written by this
tree; main reads their manifests too), each in a fresh process, interleaved
rounds. Per process and output:

- start-up: the `read_packed` call until the first pack is in hand;
- bytes read from files over the call and one epoch (``rchar`` of
  /proc/self/io), as a multiple of the output's size;
- packs/s over one epoch, and its ratio to `tf.data.TFRecordDataset` + parse
  (no checks) on the same files in the same process.

Outputs: synthetic BERT packs (L=512, K=3, M=76), 1x and 10x packs.

    .venv/bin/python benchmarks/reading.py --before /path/to/main --rounds 3

Writes ``benchmarks/results/reading.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
L, K, M = 512, 3, 76


def write_output(directory: str, packs: int, packs_per_shard: int = 2000) -> int:
    import numpy as np

    import tfpack
    from tfpack.formats import blocks, manifest
    from tfpack.formats.records import packed_features, serialize_packs

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    infos, shards = [], -(-packs // packs_per_shard)
    for s in range(shards):
        count = min(packs_per_shard, packs - s * packs_per_shard)
        lengths = rng.integers(L // 2, L + 1, count)
        real = np.arange(L)[None] < lengths[:, None]
        batch = {"input_ids": real * rng.integers(1000, 30000, (count, L)),
                 "sequence_ids": real.astype(np.int64), "position_ids": real * np.arange(L)[None],
                 "token_type_ids": np.zeros((count, L), np.int64),
                 "sequence_mask": np.ones((count, K), np.float32),
                 "masked_lm_positions": rng.integers(0, L // 2, (count, M)),
                 "masked_lm_ids": rng.integers(1000, 30000, (count, M)),
                 "masked_lm_weights": np.ones((count, M), np.float32)}
        path = os.path.join(directory, f"part-{s:05d}-of-{shards:05d}.tfrecord")
        with manifest.atomic_path(path) as tmp, blocks.ShardWriter(tmp) as writer:
            for record in serialize_packs(batch):
                writer.write(record)
        infos.append(writer.shard_info(path))
        features = packed_features(batch)
    manifest.write_manifest(directory, infos, features=features, max_length=L,
                            max_sequences_per_pack=K, max_predictions_per_pack=M,
                            sequences=packs * K, tokens=packs * L)
    del tfpack
    return sum(i.bytes for i in infos)


def rchar() -> int:
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def measure(directory: str) -> dict:
    """In a fresh process: the `read_packed` of whatever tfpack is on the path."""
    import tensorflow as tf

    import tfpack

    first_bytes = rchar()
    started = time.perf_counter()
    dataset = tfpack.formats.read_packed(directory)
    iterator = iter(dataset)
    next(iterator)
    startup = time.perf_counter() - started
    count = 1 + sum(1 for _ in iterator)
    epoch = time.perf_counter() - started
    read = rchar() - first_bytes
    found = json.load(open(os.path.join(directory, "manifest.json")))
    files = [os.path.join(directory, s["name"]) for s in found["shards"]]
    spec = {n: tf.io.FixedLenFeature(f["shape"], tf.float32 if f["dtype"] == "float32"
                                     else tf.int64) for n, f in found["features"].items()}
    started = time.perf_counter()
    plain = (tf.data.TFRecordDataset(files).batch(256)
             .map(lambda s: tf.io.parse_example(s, spec), num_parallel_calls=tf.data.AUTOTUNE)
             .unbatch())
    plain_count = sum(1 for _ in plain)
    plain_epoch = time.perf_counter() - started
    assert plain_count == count
    return {"startup": startup, "epoch": epoch, "packs": count, "read": read,
            "plain_epoch": plain_epoch}


def run(tree: str, directory: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run([sys.executable, __file__, "--measure", directory], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def spread(values, fmt="{:.3f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"({fmt.format(min(values))}-{fmt.format(max(values))})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--measure")
    parser.add_argument("--before", help="a checkout of main (its tfpack is 'before')")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--packs", type=int, default=2000, help="packs of the 1x output")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    root = tempfile.mkdtemp(prefix="reading-", dir=os.path.join(HERE, "output")
                            if os.path.isdir(os.path.join(HERE, "output")) else None)
    sizes = {}
    for scale in (1, 10):
        sizes[scale] = write_output(os.path.join(root, f"x{scale}"), args.packs * scale)
    results = {(scale, who): [] for scale in sizes for who in ("before", "after")}
    for r in range(args.rounds):
        for scale in sizes:
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for who in order:
                tree = args.before if who == "before" else TREE
                results[scale, who].append(run(tree, os.path.join(root, f"x{scale}")))
    lines = [
        "# Reading packed outputs: start-up, bytes read, throughput",
        "",
        "Command: `benchmarks/reading.py --before <main checkout> "
        f"--rounds {args.rounds} --packs {args.packs}` on {platform.machine()}, "
        f"{os.cpu_count()} cores (shared, load {os.getloadavg()[0]:.0f}); each cell a fresh "
        "process, before/after interleaved; median (min-max) over rounds.",
        "Before: main's `read_packed` (sha256 of every shard at the call); after: this tree's "
        "(metadata-time open, block digests checked while reading). Synthetic BERT packs "
        f"L={L}, K={K}, M={M}, 2,000 packs a shard.",
        "",
        "| output | code | start-up to first pack (s) | bytes read / output size, one epoch | "
        "packs/s after the first pack | packs/s, whole epoch with start-up | "
        "epoch / TFRecordDataset+parse epoch, same process |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for scale, size in sizes.items():
        for who in ("before", "after"):
            rows = results[scale, who]
            lines.append(
                f"| {scale}x ({args.packs * scale:,} packs, {size / 2**20:.0f} MiB) | {who} | "
                f"{spread([x['startup'] for x in rows])} | "
                f"{spread([x['read'] / size for x in rows], '{:.2f}')} | "
                f"{spread([(x['packs'] - 1) / (x['epoch'] - x['startup']) for x in rows], '{:.0f}')} | "
                f"{spread([x['packs'] / x['epoch'] for x in rows], '{:.0f}')} | "
                f"{spread([x['epoch'] / x['plain_epoch'] for x in rows], '{:.2f}')} |")
    lines += ["", "Bytes read count every file read of the process over the call and the "
              "epoch (`rchar`): the shards, the manifest and small files."]
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "reading.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
