"""Realized packing speed-up on an accelerator: Keras JAX backend, no TF.

Trains (forward, backward, no optimizer: the step whose cost packing changes)
in bfloat16 mixed precision, jit-compiled, on batches built with numpy from
real length histograms, and reports real (non-padding) tokens per second:

- padded: one sequence per row, padded to L (the baseline);
- packed, dense attention: packs from a `tfpack.packing` plan, block-diagonal
  mask over all L x L scores;
- packed, segmented attention: the same packs, each sequence attended in its
  own row (`attention_implementation="segmented"`);
- packed, flash attention: the same packs through the fused Pallas kernel
  that visits only the key blocks of each query block's sequences
  (`attention_implementation="flash"`, issue 36).

A second table (`--attention`) times attention alone, forward+backward of
pre-scaled bfloat16 queries, keys and values of the model's width and heads
on the same packs: dense, segmented and flash. Both tables give the compiled
step's memory (`memory_analysis()`: arguments + outputs + temporaries,
GiB), and a variant that does not fit (out of memory when compiled or run)
is a row saying so instead of a failure.

Models: BERT-base (12 layers, width 768, 12 heads) at L=512 on the
Wikipedia histogram (K=3, `spfhp`), and a ~100M-parameter decoder
(12 layers, width 768, 12 heads, vocabulary 32,000, rotary, causal) on
Python standard library definitions split into windows of S=512 tokens
(`bfd`), at L=4,096 (K=32, 4 rows a batch), L=8,192 (K=64, 1 row: dense
attention over 2 rows of 8,192 needs 114 GiB) and L=32,768 (K=256, 1 row;
dense attention is not expected to fit). The decoders' padded baseline
has as many rows as their packed batch (padding each window to L), since
matching the packed batch's tokens would need 19x the rows. `--toy` shrinks
all three (width 32, L=64, 256 and 512, one layer) so the script runs in CI
on a CPU; the figures of a toy run say nothing about speed. Timings interleave the three variants, median of
the rounds with the min-max spread; the output records the device and the
versions. This script must never import TensorFlow (checked at the end):
it is what runs where only JAX is installed.

Usage:
    python benchmarks/accelerator.py [--toy] [--rounds N] [--attention]
        [--models BERT-base,decoder-100M,decoder-100M-8k,decoder-100M-32k]
        [--variants "padded,packed, dense,packed, segmented,packed, flash"]
        [--output benchmarks/results/accelerator.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
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
from results_file import write_results  # noqa: E402

# name: (layers, width, heads, vocabulary, L, K, S, decoder, packed batch,
#        padded batch: None = as many rows as the packed batch holds sequences)
# The decoders' padded batch is their packed batch's rows: matching the tokens
# of 4 packs of 4,096 would take 75 rows, whose dense attention scores alone
# are ~30 GB a layer in bfloat16. Tokens/s compares the two either way.
MODELS = {
    "BERT-base": (12, 768, 12, 30522, 512, 3, None, False, 32, None),
    "decoder-100M": (12, 768, 12, 32000, 4096, 32, 512, True, 4, 4),
    "decoder-100M-8k": (12, 768, 12, 32000, 8192, 64, 512, True, 1, 1),
    "decoder-100M-32k": (12, 768, 12, 32000, 32768, 256, 512, True, 1, 1),
}
TOY = {
    "BERT-base": (1, 32, 2, 100, 64, 3, None, False, 4, None),
    "decoder-100M": (1, 32, 2, 100, 256, 8, 32, True, 2, 2),
    "decoder-100M-8k": (1, 32, 2, 100, 512, 16, 32, True, 2, 2),
    "decoder-100M-32k": (1, 32, 2, 100, 1024, 32, 32, True, 1, 1),
}
VARIANTS = ("padded", "packed, dense", "packed, segmented", "packed, flash")
IMPLEMENTATION = {"padded": "dense", "packed, dense": "dense",
                  "packed, segmented": "segmented", "packed, flash": "flash"}


def _lengths(name, length, window):
    if name == "BERT-base":
        wiki = histogram("wikipedia_512")
        if length == 512:
            return wiki
        # Toy: the Wikipedia distribution shrunk to `length`, each of the 512
        # lengths' counts moved to its shrunk length (not one entry per
        # sequence: 16 million of them cost ~0.9 CPU s a call).
        shrunk = np.maximum(1, np.arange(1, 513) * length // 512)
        counts = np.bincount(shrunk, weights=wiki, minlength=length + 1)[1:]
        return counts.round().astype(wiki.dtype)  # exact: float64 holds counts to 2**53
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


def compiled(function, *args):
    """`(run, GiB)`: `function` compiled for `args`, and its memory."""
    executable = jax.jit(function).lower(*args).compile()
    memory = executable.memory_analysis()
    gib = None if memory is None else (
        memory.argument_size_in_bytes + memory.output_size_in_bytes
        + memory.temp_size_in_bytes) / 2 ** 30
    return (lambda *a: jax.block_until_ready(executable(*a))), gib


def step_fn(model, features):
    def loss(weights, features):
        logits, _ = model.stateless_call(weights, [], features)
        real = keras.ops.cast(features["sequence_ids"] > 0, "float32")
        losses = keras.ops.sparse_categorical_crossentropy(
            features["input_ids"], keras.ops.cast(logits, "float32"),
            from_logits=True)
        return keras.ops.sum(losses * real) / keras.ops.sum(real)

    weights = [v.value for v in model.trainable_variables]
    step, gib = compiled(jax.value_and_grad(loss), weights, features)
    return (lambda features: step(weights, features)), gib


def attention_fn(implementation, causal, k, s, features):
    """Forward+backward of attention alone on bf16 `[rows, L, heads, d]`."""
    from tfpack.layers.attention_mask import PackedAttentionMask
    from tfpack.layers.packed_attention import packed_attention

    mask = PackedAttentionMask(causal=causal, mask_type="additive",
                               dtype="bfloat16")

    def loss(q, key, v, sequence_ids):
        out = packed_attention(
            q, key, v, implementation=implementation,
            dense_bias=lambda: mask(sequence_ids), sequence_ids=sequence_ids,
            causal=causal, max_sequences_per_pack=k, segment_length=s)
        return keras.ops.sum(keras.ops.cast(out, "float32"))

    args = (features["q"], features["k"], features["v"], features["sequence_ids"])
    step, gib = compiled(jax.value_and_grad(loss, argnums=(0, 1, 2)), *args)
    return (lambda f: step(f["q"], f["k"], f["v"], f["sequence_ids"])), gib


def out_of_memory(error):
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def timed(steps, data, rounds):
    """Seconds and real tokens of each round, variants interleaved."""
    seconds = {key: [] for key in steps}
    for r in range(rounds):
        for key in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            batch = data[key][r % len(data[key])]
            start = time.perf_counter()
            steps[key](batch)
            seconds[key].append((time.perf_counter() - start,
                                 int((batch["sequence_ids"] > 0).sum())))
    return seconds


# A variant further from the dense variant than this (largest difference
# over the loss and every gradient, relative to the dense one's largest
# entry, on the first batch) is a failure: bfloat16 rounding stays far below.
AGREEMENT = 0.1


def prepared(makers, data):
    """`(steps, memory, failures, agreement)`: each variant compiled and run
    once. One that does not fit, or does not compile or run on this device,
    is a failure row, not an exception (the run goes on; `main` exits
    non-zero for the second kind). `agreement[key]`: how far its first
    batch's loss and gradients are from the dense variant's."""
    steps, memory, failures, results = {}, {}, {}, {}
    for key, make in makers.items():
        try:
            steps[key], memory[key] = make()
            results[key] = steps[key](data[key][0])
        except Exception as error:  # noqa: BLE001 - reported as a row
            steps.pop(key, None)
            failures[key] = ("does not fit (out of memory)" if out_of_memory(error)
                             else "failed: " + _first_line(error))
    agreement = {}
    if "packed, dense" in results:
        for key, result in results.items():
            if key.startswith("packed, ") and key != "packed, dense":
                agreement[key] = _difference(result, results["packed, dense"])
    return steps, memory, failures, agreement


def _first_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}"


def _difference(got, want):
    """Largest `|got - want|` over the leaves (the loss, each gradient),
    relative to the largest `|want|` of all of them: a leaf that is zero in
    exact arithmetic (the key bias's gradient) holds rounding noise only."""
    pairs = [(np.asarray(a, np.float32), np.asarray(b, np.float32))
             for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want))]
    scale = max(float(np.abs(b).max()) for _, b in pairs) or 1.0
    return max(float(np.abs(a - b).max()) for a, b in pairs) / scale


def rows_of(name, parameters, length, seconds, memory, failures, agreement,
            data, baseline_key):
    rows = []
    baseline = (statistics.median(t / s for s, t in seconds[baseline_key])
                if baseline_key in seconds else None)
    for key in list(seconds) + list(failures):
        rows_a_batch = data[key][0]["sequence_ids"].shape[0]
        if key in failures:
            rows.append((name, parameters, length, key, rows_a_batch, None,
                         None, failures[key], None))
            continue
        rates = [tokens / s for s, tokens in seconds[key]]
        speedup = None if baseline is None else statistics.median(rates) / baseline
        rows.append((name, parameters, length, key, rows_a_batch, rates,
                     speedup, memory.get(key), agreement.get(key)))
    return rows


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


def run(name, config, rounds, policy, variants=VARIANTS, seed=0):
    # Seeded here, not with keras.utils.set_random_seed: that one imports
    # TensorFlow to seed it too.
    rng = np.random.default_rng(seed)
    packed, padded = batches(name, config, rng, 3)
    models = {key: build(config, IMPLEMENTATION[key], policy) for key in variants}
    weights = [rng.normal(0.0, 0.02, w.shape).astype(w.dtype)
               for w in models[variants[0]].get_weights()]
    for model in models.values():
        model.set_weights(weights)
    data = {key: padded if key == "padded" else packed for key in variants}
    makers = {key: (lambda m=model, key=key: step_fn(m, data[key][0]))
              for key, model in models.items()}
    steps, memory, failures, agreement = prepared(makers, data)
    seconds = timed(steps, data, rounds)
    parameters = models[variants[0]].count_params()
    return rows_of(name, parameters, config[4], seconds, memory, failures,
                   agreement, data,
                   "padded" if "padded" in seconds else "packed, dense")


def run_attention(name, config, rounds, variants=VARIANTS, seed=0):
    """Attention alone (forward+backward) on the packs of `config`."""
    _, width, heads, _, length, k, s, decoder, _, _ = config
    rng = np.random.default_rng(seed)
    packed, _ = batches(name, config, rng, 3)
    data = []
    for batch in packed:
        shape = batch["sequence_ids"].shape + (heads, width // heads)
        data.append(dict(batch, **{
            x: jax.numpy.asarray(rng.normal(0, 1, shape) / (width // heads) ** 0.25,
                                 "bfloat16") for x in ("q", "k", "v")}))
    packed_variants = [v for v in variants if v != "padded"]
    data = {key: data for key in packed_variants}
    makers = {key: (lambda key=key: attention_fn(IMPLEMENTATION[key], decoder, k, s,
                                                 data[key][0]))
              for key in packed_variants}
    steps, memory, failures, agreement = prepared(makers, data)
    seconds = timed(steps, data, rounds)
    return rows_of(name, 0, length, seconds, memory, failures, agreement, data,
                   "packed, dense")


def table(rows, with_parameters=True):
    head = ("| model | parameters | L | variant | rows a batch | tokens/s | speed-up "
            "| memory GiB | vs dense |") if with_parameters else (
            "| model | L | variant | rows a batch | tokens/s | speed-up over dense "
            "| memory GiB | vs dense |")
    lines = [head, "|" + " --- |" * (9 if with_parameters else 8)]
    for (name, parameters, length, key, batch, rates, speedup, memory,
         agreement) in rows:
        cells = [name] + ([f"{parameters:,}"] if with_parameters else []) + [
            str(length), key, str(batch)]
        if rates is None:
            cells += [memory, "-", "-", "-"]
        else:
            cells += [f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-"
                      f"{max(rates):,.0f})",
                      "-" if speedup is None else f"{speedup:.2f}x",
                      "?" if memory is None else f"{memory:.2f}",
                      "-" if agreement is None else f"{agreement:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def report(rows, command, toy, attention_rows=()):
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
        "tokens/s over the padded baseline's; vs dense = largest difference "
        "of the first batch's loss and gradients from the packed dense "
        "variant's, relative to their largest entry.",
        "",
    ]
    if toy:
        lines += ["Toy sizes (`--toy`): a smoke run of the script, not a "
                  "measurement.", ""]
    if device.platform == "cpu":
        lines += ["GPU figures: pending (no accelerator was available when "
                  "this file was written; run the command above on one).", ""]
    lines += table(rows)
    if attention_rows:
        lines += ["", "Attention alone, forward+backward (`--attention`):", ""]
        lines += table(attention_rows, with_parameters=False)
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true",
                        help="tiny models: a CPU smoke run for CI")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of: " + ", ".join(MODELS))
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated subset of: " + ", ".join(VARIANTS)
                        + " (split at ',' not followed by a space)")
    parser.add_argument("--attention", action="store_true",
                        help="also time attention alone (forward+backward)")
    parser.add_argument("--output", default="benchmarks/results/accelerator.md")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"--models must name models of {sorted(MODELS)}. "
                     f"Received: {','.join(unknown)}")
    variants = tuple(v.strip() for v in re.split(r",(?! )", args.variants))
    if set(variants) - set(VARIANTS) or not variants:
        parser.error(f"--variants must name variants of {list(VARIANTS)}. "
                     f"Received: {args.variants}")
    configs = {name: (TOY if args.toy else MODELS)[name] for name in names}
    rounds = args.rounds or (2 if args.toy else 10)
    rows, attention_rows = [], []
    for name, config in configs.items():
        rows += run(name, config, rounds, "mixed_bfloat16", variants)
        if args.attention:
            attention_rows += run_attention(name, config, rounds, variants)
        # Written after each model: a run stopped later keeps its figures.
        command = "python benchmarks/accelerator.py " + " ".join(argv or sys.argv[1:])
        text = report(rows, command.strip(), args.toy, attention_rows)
        write_results(args.output, text)
    print(text)
    if sys.modules.get("tensorflow") is not None:  # None: blocked (tests/jax_env.py)
        sys.exit("benchmarks/accelerator.py imported TensorFlow; it must run "
                 "where only JAX is installed")
    bad = [f"{row[0]} {row[3]}: {row[7] if row[5] is None else row[8]}"
           for row in rows + attention_rows
           if (row[5] is None and not str(row[7]).startswith("does not fit"))
           or (row[8] is not None and row[8] > AGREEMENT)]
    if bad:
        sys.exit("variants that failed or disagree with dense (> "
                 f"{AGREEMENT}): " + "; ".join(bad))


if __name__ == "__main__":
    main()
