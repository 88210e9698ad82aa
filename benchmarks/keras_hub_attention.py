"""keras-hub decoder adapters: dense vs segmented attention, one training step.

`from_keras_hub(backbone, attention_implementation=...)` on a small keras-hub
Llama, Mistral (sliding window of 128) and Gemma (attention-logit soft cap,
local layers with a window of 128), 2 layers, width 128, 4 query heads and 2
key/value heads, vocabulary 1,000. The same backbone (same variables) is
wrapped twice, dense and segmented; each gets a jit-compiled
(`tf.function(jit_compile=True)`) forward+backward step (next-token-style
cross-entropy through the adapter's own `logits`, gradients of every
weight), timed interleaved, alternating which goes first, on the packs of
`benchmarks/attention.py`'s `L=2048` case: real long-document lengths (the
Python standard library, windows of S=256 tokens) packed by `bfd` with
K=16, batch 2. Reported: median milliseconds per step (min-max) and the
speed-up dense/segmented per round.

Usage:
    python benchmarks/keras_hub_attention.py [--rounds 7]
        [--output benchmarks/results/keras_hub_attention.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from attention import CASES  # noqa: E402
from attention import _features  # noqa: E402
from attention import packed_batches  # noqa: E402

CASE = "L=2048"
WINDOW = 128
BACKBONE = dict(vocabulary_size=1000, num_layers=2, num_query_heads=4,
                num_key_value_heads=2, hidden_dim=128, intermediate_dim=512)


def make_backbone(family):
    import keras_hub

    models = keras_hub.models
    if family == "llama":
        return models.LlamaBackbone(**BACKBONE)
    if family == "mistral":
        return models.MistralBackbone(sliding_window=WINDOW, **BACKBONE)
    return models.GemmaBackbone(
        head_dim=32, attention_logit_soft_cap=50.0,
        use_sliding_window_attention=True, sliding_window_size=WINDOW,
        **BACKBONE)


def compiled_step(adapter):
    """A jit-compiled forward+backward step; returns a blocking callable."""
    import keras
    import tensorflow as tf

    variables = adapter.backbone.trainable_variables

    @tf.function(jit_compile=True)
    def step(features):
        weights = tf.cast(features["sequence_ids"] > 0, "float32")
        with tf.GradientTape() as tape:
            logits = adapter.logits(adapter(features)["sequence_output"])
            losses = keras.ops.sparse_categorical_crossentropy(
                features["input_ids"], logits, from_logits=True)
            loss = tf.reduce_sum(losses * weights) / tf.reduce_sum(weights)
        grads = tape.gradient(loss, variables)
        return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0
    return lambda features: step(features).numpy()


def run(family, batches, rounds):
    import keras

    from tfpack.models import from_keras_hub

    length, k, s = CASES[CASE][:3]
    keras.utils.set_random_seed(0)
    backbone = make_backbone(family)
    steps = {
        "dense": compiled_step(from_keras_hub(
            backbone, attention_implementation="dense")),
        "segmented": compiled_step(from_keras_hub(
            backbone, attention_implementation="segmented",
            max_sequences_per_pack=k, segment_length=s)),
    }
    for step in steps.values():  # compile, then warm up
        step(batches[0])
        step(batches[1])
    times = {name: [] for name in steps}
    for r in range(rounds):
        for name in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            start = time.perf_counter()
            steps[name](batches[r % len(batches)])
            times[name].append(time.perf_counter() - start)
    auto = from_keras_hub(backbone, max_sequences_per_pack=k,
                          segment_length=s).implementation(length)
    return times, [d / g for d, g in zip(times["dense"], times["segmented"])], auto


def _spread(values, scale=1.0, digits=0):
    values = [v * scale for v in values]
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def main():
    import keras
    import keras_hub
    import tensorflow as tf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--families", default="llama,mistral,gemma")
    parser.add_argument("--output", type=pathlib.Path, default=pathlib.Path(
        __file__).parent / "results" / "keras_hub_attention.md")
    args = parser.parse_args()
    length, k, s, batch = CASES[CASE][:4]
    rng = np.random.default_rng(1)
    batches = [{n: tf.constant(v) for n, v in _features(ids, rng).items()}
               for ids in packed_batches(CASE, 3)]
    sequences = np.mean([b["sequence_ids"].numpy().max(axis=1).mean()
                         for b in batches])
    rows = []
    for family in args.families.split(","):
        times, ratios, auto = run(family, batches, args.rounds)
        rows.append(f"| {family} | {_spread(times['dense'], 1e3)} | "
                    f"{_spread(times['segmented'], 1e3)} | "
                    f"{_spread(ratios, digits=2)}x | {auto} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = "\n".join([
        "# keras-hub decoder adapters: dense vs segmented "
        "(`benchmarks/keras_hub_attention.py`)", "",
        f"Command: `python benchmarks/keras_hub_attention.py --rounds "
        f"{args.rounds}`. Machine: {platform.machine()}, {os.cpu_count()} CPU "
        f"cores shared with other jobs (load average {load:.1f} at the end); "
        f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}. L={length}, K={k}, S={s}, batch {batch}, "
        f"{sequences:.1f} sequences per pack; 2 layers, width 128, 4 query "
        f"and 2 key/value heads; Mistral's and Gemma's windows {WINDOW} "
        "tokens, Gemma's soft cap 50. Forward+backward step under XLA, "
        "dense and segmented interleaved; milliseconds per step, median "
        "(min-max) over the rounds; speed-up = dense / segmented per round. "
        "GPU figures: pending (no accelerator in this task).", "",
        "| keras-hub backbone | dense ms | segmented ms | speed-up | auto |",
        "| --- | --- | --- | --- | --- |", *rows, ""])
    args.output.write_text(text)


if __name__ == "__main__":
    main()
