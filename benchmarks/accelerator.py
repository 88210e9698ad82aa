"""Realized packing speed-up on an accelerator: Keras JAX backend, no TF.

Trains (forward, backward, no optimizer: the step whose cost packing changes)
in bfloat16 mixed precision, jit-compiled, on batches built with numpy from
real length histograms, and reports real (non-padding) tokens per second:

- padded: one sequence per row, padded to L (the baseline);
- packed, dense attention: packs from a `tfpack.packing` plan, block-diagonal
  mask over all L x L scores;
- packed, segmented attention: the same packs, each sequence attended in its
  own row (`attention_implementation="segmented"`).

Models: BERT-base (12 layers, width 768, 12 heads) at L=512 on the
Wikipedia histogram (K=3, `spfhp`), and a ~100M-parameter decoder
(12 layers, width 768, 12 heads, vocabulary 32,000, rotary, causal) on
Python standard library definitions split into windows of S=512 tokens
(`bfd`), at L=4,096 (K=32, 4 rows a batch) and L=8,192 (K=64, 1 row: dense
attention over 2 rows of 8,192 needs 114 GiB). The decoders' padded baseline
has as many rows as their packed batch (padding each window to L), since
matching the packed batch's tokens would need 19x the rows. `--toy` shrinks
all three (width 32, L=64, 256 and 512, one layer) so the script runs in CI
on a CPU; the figures of a toy run say nothing about speed. Timings interleave the three variants, median of
the rounds with the min-max spread; the output records the device and the
versions. This script must never import TensorFlow (checked at the end):
it is what runs where only JAX is installed.

Usage:
    python benchmarks/accelerator.py [--toy] [--rounds N]
        [--models BERT-base,decoder-100M,decoder-100M-8k]
        [--output benchmarks/results/accelerator.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
from lengths import position_ids  # noqa: E402
from lengths import sequence_ids_from_plan  # noqa: E402
from lengths import stdlib_lengths  # noqa: E402
from lengths import windowed_histogram  # noqa: E402

from tfpack.datasets import histogram  # noqa: E402
from tfpack.layers import PackedTransformerBlock  # noqa: E402
from tfpack.packing import plan  # noqa: E402

# name: (layers, width, heads, vocabulary, L, K, S, decoder, packed batch,
#        padded batch: None = as many rows as the packed batch holds sequences)
# The decoders' padded batch is their packed batch's rows: matching the tokens
# of 4 packs of 4,096 would take 75 rows, whose dense attention scores alone
# are ~30 GB a layer in bfloat16. Tokens/s compares the two either way.
MODELS = {
    "BERT-base": (12, 768, 12, 30522, 512, 3, None, False, 32, None),
    "decoder-100M": (12, 768, 12, 32000, 4096, 32, 512, True, 4, 4),
    "decoder-100M-8k": (12, 768, 12, 32000, 8192, 64, 512, True, 1, 1),
}
TOY = {
    "BERT-base": (1, 32, 2, 100, 64, 3, None, False, 4, None),
    "decoder-100M": (1, 32, 2, 100, 256, 8, 32, True, 2, 2),
    "decoder-100M-8k": (1, 32, 2, 100, 512, 16, 32, True, 2, 2),
}


def _lengths(name, length, window):
    if name == "BERT-base":
        wiki = histogram("wikipedia_512")
        if length == 512:
            return wiki
        # Toy: the Wikipedia distribution shrunk to `length`.
        sizes = np.repeat(np.arange(1, 513), wiki)
        sizes = np.maximum(1, sizes * length // 512)
        return np.bincount(sizes, minlength=length + 1)[1:]
    return windowed_histogram(stdlib_lengths(), length, window)


def build(config, implementation, policy):
    layers, width, heads, vocabulary, length, k, s, decoder, _, _ = config
    inputs = {name: keras.Input((length,), dtype="int32", name=name)
              for name in ("input_ids", "sequence_ids", "position_ids")}
    x = keras.layers.Embedding(vocabulary, width, dtype=policy)(
        inputs["input_ids"])
    for _ in range(layers):
        x = PackedTransformerBlock(
            heads, width, 4 * width, norm_first=decoder, rotary=decoder,
            causal=decoder, attention_implementation=implementation,
            max_sequences_per_pack=k, segment_length=s, dtype=policy)(
                x, None, inputs["position_ids"], inputs["sequence_ids"])
    logits = keras.layers.Dense(vocabulary, dtype=policy)(x)
    return keras.Model(inputs, logits)


def step_fn(model):
    def loss(weights, features):
        logits, _ = model.stateless_call(weights, [], features)
        real = keras.ops.cast(features["sequence_ids"] > 0, "float32")
        losses = keras.ops.sparse_categorical_crossentropy(
            features["input_ids"], keras.ops.cast(logits, "float32"),
            from_logits=True)
        return keras.ops.sum(losses * real) / keras.ops.sum(real)

    step = jax.jit(jax.value_and_grad(loss))
    weights = [v.value for v in model.trainable_variables]
    return lambda features: jax.block_until_ready(step(weights, features))


def batches(name, config, rng, count):
    """Packed and padded batches of the same real-length distribution."""
    _, _, _, vocabulary, length, k, s, _, packed_batch, padded_rows = config
    counts = _lengths(name, length, s)
    packing = plan(counts, length, k, algorithm="spfhp" if k <= 3 else "bfd")
    # Padded rows hold one sequence each; as many rows as the packed batch
    # holds sequences on average, so both steps see similar token counts,
    # unless the model names its padded rows (see MODELS).
    per_pack = packing.metrics["packing_factor"]
    padded_batch = padded_rows or max(1, round(packed_batch * per_pack))
    sizes = np.repeat(np.arange(1, length + 1), counts)

    def features(sequence_ids):
        real = sequence_ids > 0
        return {"input_ids": (rng.integers(1, vocabulary, sequence_ids.shape)
                              * real).astype("int32"),
                "sequence_ids": sequence_ids,
                "position_ids": position_ids(sequence_ids)}

    packed = [features(sequence_ids_from_plan(packing, packed_batch, rng))
              for _ in range(count)]
    padded = []
    for _ in range(count):
        chosen = rng.choice(sizes, padded_batch)
        padded.append(features((np.arange(length) < chosen[:, None]
                                ).astype("int32")))
    return packed, padded


def run(name, config, rounds, policy, seed=0):
    # Seeded here, not with keras.utils.set_random_seed: that one imports
    # TensorFlow to seed it too.
    rng = np.random.default_rng(seed)
    packed, padded = batches(name, config, rng, 3)
    models = {"padded": build(config, "dense", policy),
              "packed, dense": build(config, "dense", policy),
              "packed, segmented": build(config, "segmented", policy)}
    weights = [rng.normal(0.0, 0.02, w.shape).astype(w.dtype)
               for w in models["padded"].get_weights()]
    for model in models.values():
        model.set_weights(weights)
    data = {"padded": padded, "packed, dense": packed,
            "packed, segmented": packed}
    steps = {key: step_fn(model) for key, model in models.items()}
    for key, step in steps.items():
        step(data[key][0])
    seconds = {key: [] for key in steps}
    for r in range(rounds):
        for key in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            batch = data[key][r % len(data[key])]
            start = time.perf_counter()
            steps[key](batch)
            seconds[key].append((time.perf_counter() - start,
                                 int((batch["sequence_ids"] > 0).sum())))
    parameters = models["padded"].count_params()
    rows = []
    baseline = statistics.median(t / s for s, t in seconds["padded"])
    for key, values in seconds.items():
        rates = [tokens / s for s, tokens in values]
        rows.append((name, parameters, config[4], key,
                     data[key][0]["sequence_ids"].shape[0], rates,
                     statistics.median(rates) / baseline))
    return rows


def report(rows, command, toy):
    device = jax.devices()[0]
    versions = (f"jax {jax.__version__}, keras {keras.__version__}, "
                f"Python {platform.python_version()}")
    lines = [
        "# Packed vs padded on an accelerator (`benchmarks/accelerator.py`)",
        "",
        f"Command: `{command}`. Device: {device.platform} "
        f"({getattr(device, 'device_kind', '?')}), {len(jax.devices())} "
        f"device(s); {versions}; Keras JAX backend, TensorFlow not imported; "
        "bfloat16 mixed precision; jit-compiled forward+backward; real tokens "
        "per second, median (min-max) of the rounds; speed-up = median "
        "tokens/s over the padded baseline's.",
        "",
    ]
    if toy:
        lines += ["Toy sizes (`--toy`): a smoke run of the script, not a "
                  "measurement.", ""]
    if device.platform == "cpu":
        lines += ["GPU figures: pending (no accelerator was available when "
                  "this file was written; run the command above on one).", ""]
    lines += ["| model | parameters | L | variant | rows a batch | tokens/s | speed-up |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, parameters, length, key, batch, rates, speedup in rows:
        lines.append(
            f"| {name} | {parameters:,} | {length} | {key} | {batch} | "
            f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-"
            f"{max(rates):,.0f}) | {speedup:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true",
                        help="tiny models: a CPU smoke run for CI")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--output", default="benchmarks/results/accelerator.md")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"--models must name models of {sorted(MODELS)}. "
                     f"Received: {','.join(unknown)}")
    configs = {name: (TOY if args.toy else MODELS)[name] for name in names}
    rounds = args.rounds or (2 if args.toy else 10)
    rows = []
    for name, config in configs.items():
        rows += run(name, config, rounds, "mixed_bfloat16")
    if "tensorflow" in sys.modules:
        sys.exit("benchmarks/accelerator.py imported TensorFlow; it must run "
                 "where only JAX is installed")
    command = "python benchmarks/accelerator.py " + " ".join(argv or sys.argv[1:])
    text = report(rows, command.strip(), args.toy)
    pathlib.Path(args.output).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
