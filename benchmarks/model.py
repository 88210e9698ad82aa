"""Cost of the packing adjustments in the model, at equal tensor shapes.

Times a forward pass and a training step (forward, `compute_loss`, backward,
Adam update, in one `tf.function`) of `BertPretrainer` twice on batches of
the same shape `[batch, length]`:

- packed: positions looked up by `position_ids`, block-diagonal mask built on
  the device from `sequence_ids`, per-sequence NSP over K=3 slots;
- unpacked: the same model with the adjustments off (`reset_positions=False`,
  `block_diagonal_mask=False`: positions 0..L-1 and a padding-only mask, as
  vanilla BERT) on one sequence per row, K=1.

Measurements alternate packed and unpacked steps so that load from other
processes hits both alike; the reported numbers are medians.

Usage:
    python benchmarks/model.py [--configs small,base] [--steps N] [--xla]
        [--output benchmarks/results/model.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpack.models import BertEncoder, BertPretrainer  # noqa: E402
from tfpack.testing import pack_examples  # noqa: E402
from results_file import write_results  # noqa: E402

CONFIGS = {
    # name: (encoder kwargs, batch, length, max predictions)
    "small": (dict(num_layers=4, hidden_dim=256, num_heads=4,
                   intermediate_dim=1024), 8, 128, 20),
    "base": (dict(num_layers=12, hidden_dim=768, num_heads=12,
                  intermediate_dim=3072), 2, 128, 20),
}
VOCAB = 30522


def _examples(rng, count, length, max_predictions, packed):
    """Random BERT examples; packed rows hold up to 3 sequences."""
    examples, packs = [], []
    for _ in range(count):
        if packed:
            lengths = rng.multinomial(length - 3, [1 / 3] * 3) + 1
        else:
            lengths = [int(rng.integers(length // 2, length + 1))]
        pack = []
        for n in lengths:
            m = max(1, min(int(0.15 * n), max_predictions // len(lengths)))
            examples.append({
                "input_ids": rng.integers(1000, VOCAB, n),
                "token_type_ids": (np.arange(n) > n // 2).astype(int),
                "masked_lm_positions": np.sort(rng.choice(n, m, replace=False)),
                "masked_lm_ids": rng.integers(1000, VOCAB, m),
                "next_sentence_labels": int(rng.integers(0, 2)),
            })
            pack.append(len(examples) - 1)
        packs.append(pack)
    return pack_examples(examples, length, packs=packs,
                         max_sequences_per_pack=3 if packed else 1,
                         max_predictions=max_predictions)


def _model(encoder_kwargs, packed):
    encoder = BertEncoder(vocabulary_size=VOCAB, dropout=0.0,
                          attention_dropout=0.0, reset_positions=packed,
                          block_diagonal_mask=packed, **encoder_kwargs)
    return BertPretrainer(encoder)


def _functions(model, xla):
    optimizer = keras.optimizers.Adam(1e-4)

    @tf.function(jit_compile=xla)
    def forward(x):
        return model(x, training=False)

    @tf.function(jit_compile=xla)
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=x, training=True)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)
        return loss

    return forward, train_step


def _time(fn, x):
    """(wall seconds, process CPU seconds) of one call.

    CPU time is reported too because the benchmark machine is shared: wall
    time includes waiting for cores, CPU time counts the work done.
    """
    start, start_cpu = time.perf_counter(), time.process_time()
    result = fn(x)
    tf.nest.map_structure(lambda t: t.numpy(), result)
    return time.perf_counter() - start, time.process_time() - start_cpu


def run(name, steps, xla, seed=0):
    encoder_kwargs, batch, length, predictions = CONFIGS[name]
    rng = np.random.default_rng(seed)
    data = {}
    functions = {}
    for packed in (True, False):
        features = _examples(rng, batch, length, predictions, packed)
        data[packed] = {k: tf.constant(v) for k, v in features.items()}
        model = _model(encoder_kwargs, packed)
        model(data[packed])
        functions[packed] = _functions(model, xla)
        for fn in functions[packed]:
            fn(data[packed])  # trace / compile
    times = {(p, kind): [] for p in (True, False) for kind in (0, 1)}
    for _ in range(steps):
        for kind in (0, 1):
            for packed in (True, False):
                times[(packed, kind)].append(
                    _time(functions[packed][kind], data[packed]))
    median = {key: statistics.median(t[0] for t in v)
              for key, v in times.items()}
    cpu = {key: statistics.median(t[1] for t in v) for key, v in times.items()}
    shapes = {k: tuple(v.shape) for k, v in data[True].items()
              if k in ("input_ids", "masked_lm_positions", "cls_positions")}
    return {
        "config": name, "batch": batch, "length": length, "shapes": shapes,
        "forward_packed": median[(True, 0)],
        "forward_unpacked": median[(False, 0)],
        "step_packed": median[(True, 1)],
        "step_unpacked": median[(False, 1)],
        "cpu": cpu,
        "tokens_packed": int((data[True]["sequence_ids"].numpy() > 0).sum()),
        "tokens_unpacked": int(
            (data[False]["sequence_ids"].numpy() > 0).sum()),
    }


def _markdown(results, command, xla, steps):
    lines = [
        "# Model benchmark: packing adjustments vs unpacked BERT",
        "",
        f"Command: `{command}`",
        "",
        f"Device: {platform.processor() or platform.machine()} CPU, "
        f"{os.cpu_count()} cores visible (shared with other jobs), "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"XLA {'on' if xla else 'off'}, {steps} timed repetitions "
        "(median), packed and unpacked interleaved.",
        "",
        "| config | batch x length | forward packed (ms) | forward unpacked (ms)"
        " | forward overhead | train step packed (ms) | train step unpacked (ms)"
        " | train step overhead | real tokens packed / unpacked |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['config']} | {r['batch']} x {r['length']} "
            f"| {1e3 * r['forward_packed']:.1f} "
            f"| {1e3 * r['forward_unpacked']:.1f} "
            f"| {100 * (r['forward_packed'] / r['forward_unpacked'] - 1):+.1f}% "
            f"| {1e3 * r['step_packed']:.1f} "
            f"| {1e3 * r['step_unpacked']:.1f} "
            f"| {100 * (r['step_packed'] / r['step_unpacked'] - 1):+.1f}% "
            f"| {r['tokens_packed']} / {r['tokens_unpacked']} |")
    lines += [
        "",
        "Process CPU-time medians (less sensitive to other jobs on the "
        "machine):",
        "",
        "| config | forward packed (ms) | forward unpacked (ms) "
        "| forward overhead | train step packed (ms) "
        "| train step unpacked (ms) | train step overhead |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        c = r["cpu"]
        lines.append(
            f"| {r['config']} | {1e3 * c[(True, 0)]:.0f} "
            f"| {1e3 * c[(False, 0)]:.0f} "
            f"| {100 * (c[(True, 0)] / c[(False, 0)] - 1):+.1f}% "
            f"| {1e3 * c[(True, 1)]:.0f} | {1e3 * c[(False, 1)]:.0f} "
            f"| {100 * (c[(True, 1)] / c[(False, 1)] - 1):+.1f}% |")
    lines += [
        "",
        "Configs: small = 4 layers, hidden 256, 4 heads, FFN 1024; base = "
        "BERT-base (12 layers, hidden 768, 12 heads, FFN 3072); vocabulary "
        "30522, M = 20 masked-LM slots. Packed rows hold 3 sequences (K = 3); "
        "unpacked rows one sequence (K = 1) with a padding-only mask and "
        "positions 0..L-1. Both train steps run forward, `compute_loss` "
        "(per-sequence statistics), backward and an Adam update inside one "
        "`tf.function`.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="small,base")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    results = [run(name, args.steps, args.xla)
               for name in args.configs.split(",")]
    command = "python benchmarks/model.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = _markdown(results, command.strip(), args.xla, args.steps)
    print(text)
    if args.output:
        write_results(args.output, text)


if __name__ == "__main__":
    main()
