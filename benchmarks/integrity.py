"""What checking costs: every input record validated, every packed output verified.

1. Pass 1 of ``tfpack pack``: `scan_google_records` (every record checked
   against `tfpack.formats.validation.RULES`, lengths kept) against the
   lengths-only read it replaced (parse ``input_mask`` and
   ``masked_lm_weights``, sum them), on the same files, interleaved rounds.
2. `read_packed`: the call, which verifies the manifest, sizes and sha256 of
   every shard before returning, against one full read of the packs it
   returns (parse every record).

Data: synthetic Google-format records from the Wikipedia-512 histogram
(`benchmarks/pipeline.py`), written to ``benchmarks/output/`` (ignored by git).

    .venv/bin/python benchmarks/integrity.py            # 100k records, 5 rounds

Writes ``benchmarks/results/integrity.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time

import numpy as np
from results_file import write_results

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def lengths_only(files):
    """The pass 1 before validation: token and prediction counts, nothing checked."""
    import tensorflow as tf

    spec = {"input_mask": tf.io.VarLenFeature(tf.int64),
            "masked_lm_weights": tf.io.VarLenFeature(tf.float32)}

    def counts(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        tokens = tf.sparse.reduce_sum(parsed["input_mask"], axis=1, output_is_sparse=False)
        real = tf.sparse.map_values(lambda w: tf.cast(w > 0, tf.int64),
                                    parsed["masked_lm_weights"])
        return tokens, tf.sparse.reduce_sum(real, axis=1, output_is_sparse=False)

    out = []
    for path in files:
        dataset = tf.data.TFRecordDataset(path).batch(1024).map(
            counts, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)
        out += [t.numpy() for t, _ in dataset]
    return np.concatenate(out)


def timed(function):
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=os.path.join(HERE, "results", "integrity.md"))
    args = parser.parse_args(argv)

    import pipeline

    import tfpack
    from tfpack.formats.records import scan_google_records

    folder = os.path.join(HERE, "output", f"integrity-{args.records}")
    shutil.rmtree(folder, ignore_errors=True)
    pipeline.write_google_shards(folder, args.records, shards=4, seed=0)
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder))
    mb = sum(os.path.getsize(f) for f in files) / 1e6

    scan_google_records(files), lengths_only(files)  # warm up: traces, page cache
    checked, plain = [], []
    for _ in range(args.rounds):  # interleaved, so load changes hit both alike
        seconds, (lengths, _) = timed(lambda: scan_google_records(files))
        checked.append(seconds)
        seconds, baseline = timed(lambda: lengths_only(files))
        plain.append(seconds)
        assert (lengths == baseline).all()

    out = os.path.join(folder, "packed")
    stats = tfpack.engines.local.pack_records(os.path.join(folder, "*.tfrecord"), out,
                                     max_length=pipeline.L, max_sequences_per_pack=pipeline.K,
                                     algorithm="lpfhp", packs_per_shard=8192)
    packed_mb = sum(os.path.getsize(os.path.join(out, n)) for n in stats["output_files"]) / 1e6
    verify, read = [], []
    for _ in range(args.rounds):
        seconds, dataset = timed(lambda: tfpack.formats.read_packed(out))
        verify.append(seconds)
        seconds, packs = timed(lambda: sum(1 for _ in dataset))
        read.append(seconds)
        assert packs == stats["packs"]

    def spread(values):
        return f"{np.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"

    ratio = np.array(checked) / np.array(plain)
    share = np.array(verify) / np.array(read)
    text = f"""# Integrity: what checking costs

Command: `.venv/bin/python benchmarks/integrity.py --records {args.records} --rounds {args.rounds}`
({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; median of {args.rounds}
interleaved rounds, min-max in parentheses).

## Pass 1 of `tfpack pack`: every record checked vs lengths only

{args.records:,} Google-format records (L=512, 76 prediction slots, Wikipedia-512 lengths),
{mb:,.0f} MB in 4 files.

| pass 1 | time |
| --- | --- |
| lengths only (before) | {spread(plain)} |
| every record checked (`scan_google_records`) | {spread(checked)} |
| ratio, checked / lengths only | {np.median(ratio):.2f}x ({ratio.min():.2f}-{ratio.max():.2f}) |

## `read_packed`: manifest, sizes and sha256 checked before the first pack

{stats['packs']:,} packs in {len(stats['output_files'])} shards, {packed_mb:,.0f} MB.

| step | time |
| --- | --- |
| `read_packed(out)` (verification) | {spread(verify)} |
| one full read of the packs it returns | {spread(read)} |
| ratio, verification / one read | {np.median(share):.2f}x ({share.min():.2f}-{share.max():.2f}) |
"""
    write_results(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
