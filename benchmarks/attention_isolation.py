"""What keeping non-finite values inside their sequence costs in dense attention.

`tfpack.layers.dense_attention.softmax_attention` now selects the scores
with the mask (`where`) and routes values through
`tfpack.layers.attention_mask.isolate_values` (non-finite rows zeroed, the
queries that may see one marked NaN). The baseline is the computation
before that change, kept here: scores plus the additive mask, softmax,
probabilities times values. Both run a jit-compiled forward and backward
pass (gradients of query, key and value) on the same inputs (packs of 3
sequences with the block-diagonal mask), interleaved, alternating which goes
first; reported: median milliseconds per step of each with the spread, and
the ratio new/baseline per round (median, min-max).

Usage:
    python benchmarks/attention_isolation.py [--rounds 7] [--steps 5]
        [--output benchmarks/results/attention_isolation.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from tfpack.layers import PackedAttentionMask  # noqa: E402
from tfpack.layers.dense_attention import softmax_attention  # noqa: E402
from results_file import write_results  # noqa: E402

# name: (batch, L, heads, head_dim)
CASES = {"L=512": (8, 512, 4, 32), "L=2048": (2, 2048, 4, 32)}


def baseline(query, key, value, bias):
    """The dense path before isolation: scores + additive mask."""
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
    probabilities = ops.softmax(scores + ops.cast(bias, "float32"), axis=-1)
    return ops.einsum("bhqk,bkhd->bqhd", ops.cast(probabilities, query.dtype), value)


def isolated(query, key, value, bias):
    return softmax_attention(query, key, value, bias=bias)


def step(attention):
    @tf.function(jit_compile=True)
    def run(query, key, value, bias):
        with tf.GradientTape() as tape:
            tape.watch([query, key, value])
            loss = tf.reduce_sum(tf.square(attention(query, key, value, bias)))
        return tape.gradient(loss, [query, key, value])
    return run


def inputs(batch, length, heads, head_dim):
    rng = np.random.default_rng(0)
    q, k, v = (tf.constant(rng.normal(size=(batch, length, heads, head_dim)), tf.float32)
               for _ in range(3))
    cuts = np.sort(rng.choice(np.arange(1, length), 2, replace=False))
    ids = np.ones((batch, length), np.int32)
    ids[:, cuts[0]:] = 2
    ids[:, cuts[1]:] = 3
    bias = PackedAttentionMask(mask_type="additive")(tf.constant(ids))
    return q, k, v, bias


def timed(function, args, steps):
    start = time.perf_counter()
    for _ in range(steps):
        result = function(*args)
    np.asarray(result[0])
    return (time.perf_counter() - start) / steps * 1000


def measure(case, rounds, steps):
    args = inputs(*CASES[case])
    runs = {"baseline": step(baseline), "isolated": step(isolated)}
    for function in runs.values():  # Compile both first.
        timed(function, args, 1)
    times = {name: [] for name in runs}
    ratios = []
    for r in range(rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        got = {name: timed(runs[name], args, steps) for name in order}
        for name, ms in got.items():
            times[name].append(ms)
        ratios.append(got["isolated"] / got["baseline"])
    return times, ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    lines = ["# Non-finite isolation in dense attention: cost against the additive-mask baseline",
             "", f"`python benchmarks/attention_isolation.py --rounds {args.rounds} "
             f"--steps {args.steps}`; {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, TensorFlow {tf.__version__}, XLA, forward + backward.", "",
             "| case (B, L, heads, head_dim) | baseline ms | isolated ms | isolated / baseline |",
             "| --- | --- | --- | --- |"]
    for case in CASES:
        times, ratios = measure(case, args.rounds, args.steps)
        cell = lambda v: f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"  # noqa: E731
        ratio = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        lines.append(f"| {case} {CASES[case]} | {cell(times['baseline'])} | "
                     f"{cell(times['isolated'])} | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        write_results(args.output, text)


if __name__ == "__main__":
    main()
