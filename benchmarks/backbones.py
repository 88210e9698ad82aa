"""keras-hub backbones trained on packed vs padded rows: real tokens per second.

Lengths are drawn from the paper's Wikipedia histogram (the bundled
`wikipedia_512`, L=512); tokens are random ids (speed does not depend on
them). Two small keras-hub backbones are trained, each three ways, on batches
of the same number of rows:

- `keras-hub padded`: the keras-hub backbone as users run it today, one
  sequence per row, `padding_mask`;
- `adapter padded`: `tfpack.models.from_keras_hub(backbone)` on the same rows
  (a pack of one sequence): the adapter's own overhead;
- `adapter packed`: the adapter on packs of the `optimal` plan (K=3).

Every step is one XLA-compiled training step of the same objective: the
backbone's tied output projection and a cross-entropy over real tokens only
(next token for the decoder, the token itself for the encoder), Adam. The
variants alternate step by step within each round, so load from other
processes hits all of them alike; reported are the median real tokens/s over
rounds, the spread (min-max), and the median per-round ratio to
`keras-hub padded`.

Usage:
    python benchmarks/backbones.py [--rounds 7] [--steps 3] [--quick] [--output benchmarks/results/backbones.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpack import datasets, models, packing, testing  # noqa: E402
from results_file import write_results  # noqa: E402

VOCABULARY = 4096
BACKBONES = {
    "BERT (keras-hub BertBackbone)": lambda L: keras_hub.models.BertBackbone(
        vocabulary_size=VOCABULARY, num_layers=2, num_heads=2, hidden_dim=128,
        intermediate_dim=512, dropout=0.0, max_sequence_length=L),
    "Llama (keras-hub LlamaBackbone)": lambda L: keras_hub.models.LlamaBackbone(
        vocabulary_size=VOCABULARY, num_layers=2, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=128, intermediate_dim=512,
        tie_word_embeddings=True),
}


def real_lengths(n: int, L: int, seed: int) -> np.ndarray:
    """`n` lengths drawn from the Wikipedia-512 histogram (cut to `L`)."""
    counts = datasets.histogram("wikipedia_512").astype(np.float64)
    lengths = np.random.default_rng(seed).choice(
        np.arange(1, len(counts) + 1), size=n, p=counts / counts.sum())
    return np.minimum(lengths, L)


def batches(lengths, L, K, rows, seed):
    """Padded and packed batches of `rows` rows over the same sequences."""
    rng = np.random.default_rng(seed)
    examples = [{"input_ids": rng.integers(1, VOCABULARY, n)} for n in lengths]
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal")
    assignment = plan.assign(lengths, seed=seed)
    packs = [assignment.pack(p).tolist() for p in range(assignment.num_packs)]
    padded = [[i] for i in range(len(lengths))]
    cut = lambda groups: [groups[i:i + rows]
                          for i in range(0, len(groups) - rows + 1, rows)]
    make = lambda groups, k: [testing.pack_examples(
        examples, L, packs=g, max_sequences_per_pack=k) for g in cut(groups)]
    return make(padded, 1), make(packs, K), plan


def objective(backbone, causal):
    """Cross-entropy of the tied output projection over real tokens."""
    def loss(sequence_output, input_ids, real):
        logits = backbone.token_embedding(sequence_output, reverse=True)
        targets, weights = input_ids, real
        if causal:  # Next token, inside the same sequence only.
            logits, targets = logits[:, :-1], input_ids[:, 1:]
            weights = real[:, :-1] * real[:, 1:]
        per_token = keras.losses.sparse_categorical_crossentropy(
            targets, tf.cast(logits, "float32"), from_logits=True)
        return tf.reduce_sum(per_token * weights) / tf.maximum(
            tf.reduce_sum(weights), 1.0)
    return loss


def train_steps(backbone, adapter, causal):
    """XLA training steps: keras-hub on a padding mask, adapter on features."""
    loss = objective(backbone, causal)
    optimizer = keras.optimizers.Adam(1e-4)
    variables = backbone.trainable_variables
    optimizer.build(variables)

    def step(forward, batch):
        real = tf.cast(batch["sequence_ids"] > 0, "float32")
        if causal:  # The next token must belong to the same sequence.
            same = tf.cast(batch["sequence_ids"][:, 1:]
                           == batch["sequence_ids"][:, :-1], "float32")
            real = real * tf.pad(same, [[0, 0], [0, 1]])
        with tf.GradientTape() as tape:
            value = loss(forward(batch), batch["input_ids"], real)
        optimizer.apply(tape.gradient(value, variables), variables)
        return value

    def native(batch):
        inputs = {"token_ids": batch["input_ids"],
                  "padding_mask": tf.cast(batch["sequence_ids"] > 0, "int32")}
        if "segment_ids" in backbone.input:
            inputs["segment_ids"] = tf.zeros_like(batch["input_ids"])
        outputs = backbone(inputs, training=True)
        return outputs["sequence_output"] if isinstance(outputs, dict) else outputs

    def packed(batch):
        return adapter(batch, training=True)["sequence_output"]

    compile_ = lambda f: tf.function(lambda b: step(f, b), jit_compile=True)
    return {"keras-hub padded": compile_(native),
            "adapter padded": compile_(packed),
            "adapter packed": compile_(packed)}


def measure(name, build, args):
    keras.utils.set_random_seed(args.seed)
    backbone = build(args.max_length)
    adapter = models.from_keras_hub(backbone)
    causal = adapter.causal
    lengths = real_lengths(args.sequences, args.max_length, args.seed)
    padded, packed, plan = batches(lengths, args.max_length, 3, args.rows,
                                   args.seed)
    data = {"keras-hub padded": padded, "adapter padded": padded,
            "adapter packed": packed}
    steps = train_steps(backbone, adapter, causal)
    keys = ("input_ids", "sequence_ids", "position_ids")
    tensors = {v: [{k: tf.constant(b[k]) for k in keys} for b in batches_]
               for v, batches_ in data.items()}
    for variant, step in steps.items():  # Trace and compile, untimed.
        step(tensors[variant][0]).numpy()
    speeds = {v: [] for v in steps}
    cursor = {v: 0 for v in steps}
    for _ in range(args.rounds):
        seconds = {v: 0.0 for v in steps}
        tokens = {v: 0 for v in steps}
        for _ in range(args.steps):
            for variant, step in steps.items():
                batch_list = tensors[variant]
                batch = batch_list[cursor[variant] % len(batch_list)]
                cursor[variant] += 1
                start = time.perf_counter()
                step(batch).numpy()
                seconds[variant] += time.perf_counter() - start
                tokens[variant] += int(np.sum(batch["sequence_ids"].numpy() > 0))
        for variant in steps:
            speeds[variant].append(tokens[variant] / seconds[variant])
    base = np.array(speeds["keras-hub padded"])
    return {
        "backbone": name, "causal": bool(causal),
        "parameters": int(sum(np.prod(v.shape) for v in backbone.weights)),
        "packing_factor": plan.metrics["packing_factor"],
        "efficiency": plan.metrics["efficiency"],
        "padded_efficiency": float(lengths.sum() / (len(lengths)
                                                    * args.max_length)),
        "variants": {v: {"median": float(np.median(s)), "min": float(min(s)),
                         "max": float(max(s)),
                         "ratio": float(np.median(np.array(s) / base)),
                         "ratio_min": float(min(np.array(s) / base)),
                         "ratio_max": float(max(np.array(s) / base))}
                     for v, s in speeds.items()},
    }


def markdown(results, args, command):
    lines = [
        "# keras-hub backbones: packed vs padded training (benchmarks/backbones.py)",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared; load "
        f"average at the end of the run {', '.join(f'{x:.1f}' for x in os.getloadavg())}), "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}.",
        "",
        f"Data: {args.sequences} lengths drawn from the Wikipedia-512 histogram, "
        f"L={args.max_length}, random token ids (vocabulary {VOCABULARY}); "
        f"{args.rows} rows per step in every variant. One XLA training step: "
        "backbone, tied output projection, cross-entropy over real tokens, "
        f"Adam. {args.rounds} rounds of {args.steps} steps per variant, the "
        "variants alternating step by step; tokens/s counts real tokens only.",
        "",
    ]
    for r in results:
        lines += [
            f"## {r['backbone']}",
            "",
            f"2 layers, hidden 128, {r['parameters']:,} parameters"
            f"{', causal' if r['causal'] else ''}. Padded efficiency "
            f"{r['padded_efficiency']:.3f}; optimal plan (K=3) efficiency "
            f"{r['efficiency']:.4f}, packing factor {r['packing_factor']:.3f}.",
            "",
            "| variant | real tokens/s, median (min-max) | vs keras-hub padded, "
            "median (min-max) |",
            "| --- | --- | --- |",
        ]
        for name, v in r["variants"].items():
            lines.append(
                f"| {name} | {v['median']:,.0f} ({v['min']:,.0f}-{v['max']:,.0f})"
                f" | {v['ratio']:.2f}x ({v['ratio_min']:.2f}-"
                f"{v['ratio_max']:.2f}) |")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--sequences", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=8, help="rows per step")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="steps per round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: L=128, 2 rounds of 1 step")
    parser.add_argument("--output", default=os.path.join(
        "benchmarks", "results", "backbones.md"))
    args = parser.parse_args()
    # BERT's pooler is not on the path of `sequence_output`: no gradient.
    warnings.filterwarnings("ignore", message="Gradients do not exist")
    if args.quick:
        args.max_length, args.sequences, args.rounds, args.steps = 128, 256, 2, 1
    results = [measure(name, build, args) for name, build in BACKBONES.items()]
    command = ("python benchmarks/backbones.py " + " ".join(sys.argv[1:])).strip()
    if args.output:
        write_results(args.output, markdown(results, args, command))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
