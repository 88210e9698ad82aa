"""Dense vs segmented packed attention: a jit-compiled training step.

For each case, one process builds the same small model twice (same weights),
once with `attention_implementation="dense"` and once with `"segmented"`,
compiles a forward+backward step of each (XLA: `tf.function(jit_compile=True)`
on TensorFlow, `jax.jit` on JAX) and times them interleaved, alternating
which goes first, on batches of packs drawn from a packing plan of real
lengths:

- L=512: the bundled Wikipedia histogram (`wikipedia_512`), packed by
  `spfhp` with K=3 (the PackedBERT setting); no bound on sequence length
  (S=L), as BERT pre-training data has sequences up to 512.
- L=2,048 and 8,192: long-document lengths from real text, the Python
  standard library: each top-level function or class of each module in
  `Lib/*.py`, tokenized with `tokenize` (one token per Python token), split
  into windows of at most S=L/8 tokens (the usual cap on document chunks in
  long-context packing), packed by `bfd` with K=16 (2,048) or K=32 (8,192).
  The same lengths with S=512 and with no bound (S=L) are also timed, to
  show what the cap buys and where segmented stops paying (the `"auto"`
  rule's threshold).

Each step is a forward and backward pass (gradients of every weight) of an
encoder (post-norm, bidirectional) or a decoder (pre-norm, rotary, causal)
with a token embedding, transformer layers and a 1,000-way softmax loss on
real tokens. L=8,192 uses one layer, 2 heads and width 64 so that dense
attention fits a 2-core CPU in minutes. Reported: median milliseconds per
step over the rounds, with the spread (min-max), and the speed-up
dense/segmented per round (median, min-max).

Usage:
    python benchmarks/attention.py [--backends tensorflow,jax] [--quick]
        [--output benchmarks/results/attention.md]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from lengths import position_ids  # noqa: E402
from lengths import sequence_ids_from_plan  # noqa: E402
from lengths import stdlib_lengths  # noqa: E402
from lengths import windowed_histogram  # noqa: E402
from results_file import write_results  # noqa: E402

VOCAB = 1000
# name: (L, K, S, batch, layers, width, heads, rounds, lengths)
CASES = {
    "L=512": (512, 3, None, 8, 2, 128, 4, 7, "wikipedia_512"),
    "L=2048": (2048, 16, 256, 2, 2, 128, 4, 5, "stdlib"),
    "L=2048 unbounded": (2048, 16, None, 2, 2, 128, 4, 3, "stdlib"),
    "L=2048 S=512": (2048, 16, 512, 2, 2, 128, 4, 3, "stdlib"),
    "L=8192": (8192, 32, 1024, 1, 1, 64, 2, 3, "stdlib"),
}


def packed_batches(case, count, seed=0):
    """`count` batches of `sequence_ids` drawn from a packing plan."""
    from tfpack.packing import plan

    length, k, s, batch = CASES[case][:4]
    if CASES[case][8] == "wikipedia_512":
        from tfpack.datasets import histogram

        packing = plan(histogram("wikipedia_512"), length, k, algorithm="spfhp")
    else:
        packing = plan(windowed_histogram(stdlib_lengths(), length, s),
                       length, k, algorithm="bfd")
    rng = np.random.default_rng(seed)
    return [sequence_ids_from_plan(packing, batch, rng) for _ in range(count)]


def build_model(case, implementation, decoder):
    import keras

    from tfpack.layers import PackedTransformerBlock

    length, k, s, _, layers, width, heads = CASES[case][:7]
    inputs = {name: keras.Input((length,), dtype="int32", name=name)
              for name in ("input_ids", "sequence_ids", "position_ids")}
    x = keras.layers.Embedding(VOCAB, width)(inputs["input_ids"])
    for _ in range(layers):
        x = PackedTransformerBlock(
            heads, width, 4 * width, norm_first=decoder, rotary=decoder,
            causal=decoder, attention_implementation=implementation,
            max_sequences_per_pack=k, segment_length=s)(
                x, None, inputs["position_ids"], inputs["sequence_ids"])
    logits = keras.layers.Dense(VOCAB)(x)
    return keras.Model(inputs, logits)


def _features(sequence_ids, rng):
    real = sequence_ids > 0
    return {"input_ids": (rng.integers(1, VOCAB, sequence_ids.shape) * real
                          ).astype("int32"),
            "sequence_ids": sequence_ids,
            "position_ids": position_ids(sequence_ids)}


def compiled_step(model):
    """A jit-compiled forward+backward step; returns a blocking callable."""
    import keras

    def loss_of(logits, features):
        targets = features["input_ids"]
        weights = keras.ops.cast(features["sequence_ids"] > 0, "float32")
        losses = keras.ops.sparse_categorical_crossentropy(
            targets, logits, from_logits=True)
        return keras.ops.sum(losses * weights) / keras.ops.sum(weights)

    if keras.backend.backend() == "jax":
        import jax

        def loss(weights, features):
            logits, _ = model.stateless_call(weights, [], features)
            return loss_of(logits, features)

        step = jax.jit(jax.value_and_grad(loss))
        weights = [v.value for v in model.trainable_variables]
        return lambda f: jax.block_until_ready(step(weights, f))
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def step(features):
        with tf.GradientTape() as tape:
            loss = loss_of(model(features), features)
        grads = tape.gradient(loss, model.trainable_variables)
        return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0
    return lambda f: step(f).numpy()


def run_case(case, decoder, rounds):
    """Times dense and segmented interleaved; returns a dict of results."""
    import keras

    from tfpack.layers.attention_implementation import choose_implementation

    keras.utils.set_random_seed(0)
    length, k, s = CASES[case][:3]
    rng = np.random.default_rng(1)
    batches = [_features(ids, rng) for ids in packed_batches(case, 3)]
    models = {name: build_model(case, name, decoder)
              for name in ("dense", "segmented")}
    models["segmented"].set_weights(models["dense"].get_weights())
    steps = {name: compiled_step(model) for name, model in models.items()}
    for name, step in steps.items():  # compile, then warm up
        step(batches[0])
        step(batches[1])
    times = {name: [] for name in steps}
    for r in range(rounds):
        order = list(steps) if r % 2 == 0 else list(steps)[::-1]
        for name in order:
            start = time.perf_counter()
            steps[name](batches[r % len(batches)])
            times[name].append(time.perf_counter() - start)
    ratios = [d / g for d, g in zip(times["dense"], times["segmented"])]
    sequences = np.mean([b["sequence_ids"].max(axis=1).mean() for b in batches])
    return {
        "case": case, "model": "decoder" if decoder else "encoder",
        "backend": keras.backend.backend(), "L": length, "K": k, "S": s or length,
        "batch": CASES[case][3], "layers": CASES[case][4],
        "width": CASES[case][5], "heads": CASES[case][6],
        "sequences_per_pack": float(sequences),
        "dense_ms": [1e3 * t for t in times["dense"]],
        "segmented_ms": [1e3 * t for t in times["segmented"]],
        "speedup": ratios,
        "auto": choose_implementation("auto", backend=keras.backend.backend(),
                                      length=length, max_sequences_per_pack=k,
                                      segment_length=s),
    }


def _spread(values, scale=1.0, digits=0):
    values = [v * scale for v in values]
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def report(results, command, versions):
    from tfpack.layers.attention_implementation import choose_implementation

    lines = [
        "# Packed attention: dense vs segmented (`benchmarks/attention.py`)",
        "",
        f"Command: `{command}`. Machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPU cores shared with other jobs; {versions}. "
        "Forward+backward step, jit-compiled (XLA), dense and segmented "
        "interleaved in one process; milliseconds per step, median (min-max) "
        "over the rounds; speed-up = dense / segmented per round. "
        "K = sequences per pack the segmented rows hold, S = longest sequence "
        "(windows of S tokens for the long cases), seqs/pack = mean over the "
        "timed batches. `auto` = what `attention_implementation=\"auto\"` "
        "picks for that shape.",
        "",
        "| backend | model | case | batch x layers x width x heads | K | S | "
        "seqs/pack | dense ms | segmented ms | speed-up | auto |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        # What the current rule picks (the raw file may predate it).
        r["auto"] = choose_implementation(
            "auto", backend=r["backend"], length=r["L"],
            max_sequences_per_pack=r["K"], segment_length=r["S"])
        lines.append(
            f"| {r['backend']} | {r['model']} | {r['case']} | "
            f"{r['batch']} x {r['layers']} x {r['width']} x {r['heads']} | "
            f"{r['K']} | {r['S']} | {r['sequences_per_pack']:.1f} | "
            f"{_spread(r['dense_ms'])} | {_spread(r['segmented_ms'])} | "
            f"{_spread(r['speedup'], digits=2)}x | {r['auto']} |")
    return "\n".join(lines) + "\n"


def _child(args):
    # One JSON line per case as soon as it is measured: a long run that is
    # stopped keeps what it measured (`--report-only` writes the table).
    with open(args.raw, "a") as raw:
        for case in args.cases.split(","):
            rounds = 3 if args.quick else CASES[case][7]
            for decoder in (False, True):
                raw.write(json.dumps(run_case(case, decoder, rounds)) + "\n")
                raw.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="tensorflow,jax")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--quick", action="store_true",
                        help="3 rounds per case (a smoke run)")
    parser.add_argument("--output", default="benchmarks/results/attention.md")
    parser.add_argument("--raw", default="benchmarks/results/attention.jsonl",
                        help="measurements, one JSON line per case")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite --output from --raw without measuring")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args)
    versions = []
    for backend in args.backends.split(","):
        if not args.report_only:
            done = subprocess.run(
                [sys.executable, __file__, "--child", "--cases", args.cases,
                 "--raw", args.raw] + (["--quick"] if args.quick else []),
                env=dict(os.environ, KERAS_BACKEND=backend),
                capture_output=True, text=True, check=False)
            if done.returncode:
                sys.exit(f"{backend} run failed:\n{done.stderr[-3000:]}")
        module = "tensorflow" if backend == "tensorflow" else "jax"
        version = subprocess.run(
            [sys.executable, "-c", f"import {module}; print({module}.__version__)"],
            capture_output=True, text=True).stdout.strip()
        versions.append(f"{module} {version}")
    import keras

    versions.append(f"keras {keras.__version__}")
    results = [json.loads(line) for line in
               pathlib.Path(args.raw).read_text().splitlines() if line]
    command = "python benchmarks/attention.py " + " ".join(
        a for a in sys.argv[1:] if a != "--report-only")
    text = report(results, command.strip(), ", ".join(versions))
    write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
