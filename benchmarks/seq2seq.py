"""Packed vs padded encoder-decoder training: real tokens/s against the two-sided packing factor.

Pairs of (input, target) lengths, real and generated:

- ``docstrings``: every standard-library docstring with a body, the body (input)
  and its first line (target), in WordPiece tokens (`pair_corpora.pairs`,
  cached in ``benchmarks/data/pairs_docstrings.txt``);
- a small generated suite (seeded): short pairs, log-normal inputs with short
  targets, long inputs, inputs about ``Le / Ld`` times their targets (both
  rows bind), and targets as long as their inputs (the decoder row binds).

Each pair gets random token ids of its lengths (cut to ``Le``/``Ld``), and a
keras-hub `T5Backbone` (2 layers, hidden 64) adapted by
`tfpack.models.from_keras_hub` trains as `tfpack.models.Seq2SeqLM`:

- padded: one pair per row (an encoder row of ``Le`` and a decoder row of
  ``Ld`` tokens, the layout of keras-hub's ``Seq2SeqLMPreprocessor``);
- packed: `tfpack.builders.pack_pairs` (first fit on both rows, at most ``K``
  pairs a row) into rows of the same ``Le`` and ``Ld``.

Both train the same rows per update (one compiled `tf.function` step each).
After a warm-up, timed rounds alternate; the realized speed-up is the median
ratio of real (encoder + decoder) tokens per second, with the spread. The
two-sided packing factor is pairs per packed row (padded rows hold one).
Target: at least 0.9 x the packing factor, on the worst case.

Usage:
    python benchmarks/seq2seq.py [--quick] [--output benchmarks/results/seq2seq.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpack.builders import pack_pairs  # noqa: E402
from tfpack.models import Seq2SeqLM, from_keras_hub  # noqa: E402
from results_file import write_results  # noqa: E402

VOCAB = 512


def _lognormal(rng, n, median, sigma, low=1):
    return np.maximum(low, np.exp(rng.normal(np.log(median), sigma, n))).astype(np.int64)


# name: rng, n -> int64 [n, 2] (input, target) lengths.
GENERATED = {
    "short pairs": lambda rng, n: np.stack([rng.integers(4, 40, n), rng.integers(2, 12, n)], 1),
    "log-normal inputs, short targets": lambda rng, n: np.stack(
        [_lognormal(rng, n, 60, 0.8), _lognormal(rng, n, 10, 0.4)], 1),
    "long inputs": lambda rng, n: np.stack([rng.integers(80, 180, n), rng.integers(4, 30, n)], 1),
    # Le / Ld = 3 at the defaults: both rows fill at about the same rate.
    "both rows bind": lambda rng, n: np.stack([rng.integers(20, 100, n), rng.integers(6, 34, n)], 1),
    "targets as long as inputs": lambda rng, n: np.stack(
        [rng.integers(8, 32, n), rng.integers(8, 32, n)], 1),
}


def lengths(name: str, count: int, seed: int) -> np.ndarray | None:
    """``[count, 2]`` (input, target) lengths of case ``name``, or None (no corpus)."""
    rng = np.random.default_rng(seed)
    if name in GENERATED:
        return GENERATED[name](rng, count)
    import pair_corpora

    real = pair_corpora.pairs(name)
    if real is None:
        return None
    return real[rng.permutation(len(real))[:count]]


def pairs_of(lengths_: np.ndarray, le: int, ld: int, seed: int) -> list:
    """Random ids of those lengths, each side cut to its row (the decoder's
    first token a start token)."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(2, VOCAB, min(int(n), le)).tolist(),
             [0] + rng.integers(2, VOCAB, max(1, min(int(m), ld) - 1)).tolist())
            for n, m in lengths_]


def _step(model, optimizer):
    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x=batch)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss
    return step


def _trainer(seed: int):
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.T5Backbone(
        vocabulary_size=VOCAB, num_layers=2, num_heads=4, hidden_dim=64, intermediate_dim=128,
        dropout=0.0)
    model = Seq2SeqLM(from_keras_hub(backbone))
    return _step(model, keras.optimizers.SGD(1e-3))


def _batches(packs: dict, micro: int) -> list:
    """Whole batches of ``micro`` rows, as tensors, and their real tokens."""
    rows = len(packs["example_ids"]) // micro * micro
    out = []
    for start in range(0, rows, micro):
        batch = {k: tf.constant(v[start:start + micro]) for k, v in packs.items()
                 if k != "example_ids"}
        real = int(np.sum(packs["encoder_sequence_ids"][start:start + micro] > 0)
                   + np.sum(packs["decoder_sequence_ids"][start:start + micro] > 0))
        out.append((batch, real))
    return out


def _tokens_per_second(step, batches, cursor, steps):
    """Real tokens per second of wall time and of process CPU time (all
    threads; steadier than wall time on a shared machine)."""
    tokens, wall, cpu = 0, time.perf_counter(), time.process_time()
    for i in range(steps):
        batch, real = batches[(cursor + i) % len(batches)]
        step(batch).numpy()
        tokens += real
    return np.array([tokens / (time.perf_counter() - wall), tokens / (time.process_time() - cpu)])


def case_result(name: str, args) -> dict | None:
    found = lengths(name, args.pairs, args.seed)
    if found is None:
        return None
    pairs = pairs_of(found, args.max_encoder_length, args.max_decoder_length, args.seed)
    shape = dict(max_encoder_length=args.max_encoder_length,
                 max_decoder_length=args.max_decoder_length)
    packed = pack_pairs(pairs, max_pairs_per_pack=args.max_pairs, **shape)
    padded = pack_pairs(pairs, max_pairs_per_pack=1, **shape)
    factor = len(padded["example_ids"]) / len(packed["example_ids"])
    runs = {"packed": (_trainer(args.seed), _batches(packed, args.micro)),
            "padded": (_trainer(args.seed), _batches(padded, args.micro))}
    for step, batches in runs.values():
        _tokens_per_second(step, batches, 0, 2)  # Tracing happens here.
    ratios = []  # Per round: (wall, CPU) ratios.
    for r in range(args.rounds):
        slow = _tokens_per_second(*runs["padded"], r * args.steps, args.steps)
        fast = _tokens_per_second(*runs["packed"], r * args.steps, args.steps)
        ratios.append(fast / slow)
    real = {side: float(np.mean(packed[f"{side}_sequence_ids"] > 0))
            for side in ("encoder", "decoder")}
    wall, cpu = ([float(r[i]) for r in ratios] for i in (0, 1))
    median = statistics.median(wall)
    return {"case": name, "pairs": len(pairs), "mean_input": float(found[:, 0].mean()),
            "mean_target": float(found[:, 1].mean()), "packing_factor": factor,
            "fill": real, "speedup": median, "spread": (min(wall), max(wall)),
            "ratio": median / factor, "cpu_speedup": statistics.median(cpu),
            "cpu_spread": (min(cpu), max(cpu)),
            "cpu_ratio": statistics.median(cpu) / factor}


def _met(ratio: float) -> str:
    return "yes" if ratio >= 0.9 else "no"


def markdown(results, args, command, seconds) -> str:
    worst = min(results, key=lambda r: r["ratio"])
    lines = [
        "# Encoder-decoders: packed vs padded training (benchmarks/seq2seq.py)", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), TensorFlow "
        f"{tf.__version__}, Keras {keras.__version__}, keras-hub {keras_hub.__version__}. "
        f"Wall time {seconds:.0f} s.", "",
        "Model: keras-hub `T5Backbone` (2 layers, hidden 64, 4 heads) through "
        "`from_keras_hub`, `Seq2SeqLM`, SGD, one `tf.function` step, "
        f"{args.micro} rows per update for both. Rows: Le={args.max_encoder_length} encoder and "
        f"Ld={args.max_decoder_length} decoder tokens; padded = one pair per row; packed = "
        f"`pack_pairs` (first fit on both rows, K={args.max_pairs}). {args.pairs} pairs per "
        f"case (seed {args.seed}), random ids of the pairs' lengths cut to the rows. Speed-up: "
        "real (encoder + decoder) tokens/s packed / padded, median of "
        f"{args.rounds} interleaved rounds of {args.steps} updates after a warm-up, with "
        "the spread; the same on process CPU time (all threads), steadier on a shared "
        "machine. Packing factor: pairs per packed row (padded rows hold one).", "",
        "| case | mean input / target tokens | packing factor (pairs per row) | encoder / "
        "decoder rows filled | realized speed-up, wall (spread) | wall / packing factor | "
        "CPU-time speed-up (spread) | CPU / packing factor | target >= 0.9 (wall, CPU) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['mean_input']:.0f} / {r['mean_target']:.0f} | "
            f"{r['packing_factor']:.2f} | {r['fill']['encoder']:.0%} / "
            f"{r['fill']['decoder']:.0%} | {r['speedup']:.2f}x ({r['spread'][0]:.2f}-"
            f"{r['spread'][1]:.2f}) | {r['ratio']:.3f} | {r['cpu_speedup']:.2f}x "
            f"({r['cpu_spread'][0]:.2f}-{r['cpu_spread'][1]:.2f}) | {r['cpu_ratio']:.3f} | "
            f"{_met(r['ratio'])}, {_met(r['cpu_ratio'])} |")
    cpu_worst = min(results, key=lambda r: r["cpu_ratio"])
    lines += ["", f"Worst case on wall time: **{worst['case']}**, speed-up "
              f"{worst['speedup']:.2f}x = {worst['ratio']:.3f} x its packing factor "
              f"{worst['packing_factor']:.2f} (target >= 0.9: {_met(worst['ratio'])}). "
              f"On CPU time: **{cpu_worst['case']}**, {cpu_worst['cpu_speedup']:.2f}x = "
              f"{cpu_worst['cpu_ratio']:.3f} x {cpu_worst['packing_factor']:.2f} "
              f"({_met(cpu_worst['cpu_ratio'])}).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 cases, 1 round")
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--max-encoder-length", type=int, default=192)
    parser.add_argument("--max-decoder-length", type=int, default=64)
    parser.add_argument("--max-pairs", type=int, default=16)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/seq2seq.md")
    args = parser.parse_args()
    cases = ["docstrings", *GENERATED]
    if args.quick:
        cases, args.rounds, args.pairs = cases[:2], 1, 64
    start = time.perf_counter()
    results = [r for r in (case_result(c, args) for c in cases) if r is not None]
    command = ("python benchmarks/seq2seq.py " + " ".join(sys.argv[1:])).strip()
    text = markdown(results, args, command, time.perf_counter() - start)
    write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
