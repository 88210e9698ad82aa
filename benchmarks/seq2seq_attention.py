"""Pair packs: dense vs segmented attention in one encoder-decoder training step.

A keras-hub `T5Backbone` (2 layers, hidden 64, 4 heads) through
`tfpack.models.from_keras_hub` trains as `tfpack.models.Seq2SeqLM` on the same
pair packs (`pack_pairs`, first fit, `K` pairs a row) with
`attention_implementation="dense"` (the `[Ld, Le]` cross mask, `[Le, Le]` and
`[Ld, Ld]` self masks) and `"segmented"` (every kind in rows: encoder and
decoder self-attention per sequence, cross-attention pairing target k with
input k, `tfpack.layers.pair_segmented_attention`), each one compiled
`tf.function` step. Inputs are 1/2 to 1 of `S` tokens, targets 4 to `S / 4`,
so rows are cut to `S` on both sides. After a warm-up, timed rounds alternate;
the result is the median step time per implementation, the median of the
per-round ratios dense / segmented (above 1: segmented is faster), with the
spread, and what `"auto"` picks per kind at that shape (the work ratios are
the dense scores over the segmented rows' scores).

Usage:
    python benchmarks/seq2seq_attention.py [--quick] [--output benchmarks/results/seq2seq_attention.md]
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

from seq2seq import VOCAB, _batches, _step, pairs_of  # noqa: E402
from tfpack.builders import pack_pairs  # noqa: E402
from tfpack.layers.pair_segmented_attention import pair_work  # noqa: E402
from tfpack.layers.segmented_attention import segment_work  # noqa: E402
from tfpack.models import Seq2SeqLM, from_keras_hub  # noqa: E402

# (Le, Ld, K, S): rows of Le and Ld tokens, K pairs a row, sequences of S tokens at most.
SHAPES = ((512, 128, 6, 128), (1024, 256, 12, 128), (2048, 512, 24, 128),
          (2048, 512, 8, 384))


def _model(implementation: str, k: int, s: int, seed: int):
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.T5Backbone(
        vocabulary_size=VOCAB, num_layers=2, num_heads=4, hidden_dim=64, intermediate_dim=128,
        dropout=0.0)
    adapter = from_keras_hub(backbone, attention_implementation=implementation,
                             max_sequences_per_pack=k, segment_length=s, check_exact=False)
    return adapter, _step(Seq2SeqLM(adapter), keras.optimizers.SGD(1e-3))


def _seconds(step, batches, cursor, steps):
    start = time.perf_counter()
    for i in range(steps):
        step(batches[(cursor + i) % len(batches)][0]).numpy()
    return (time.perf_counter() - start) / steps


def shape_result(le: int, ld: int, k: int, s: int, args) -> dict:
    rng = np.random.default_rng(args.seed)
    n = args.rows * k
    found = np.stack([rng.integers(s // 2, s + 1, n), rng.integers(4, max(5, s // 4), n)], 1)
    pairs = pairs_of(found, s, s, args.seed)
    packs = pack_pairs(pairs, max_pairs_per_pack=k, max_encoder_length=le,
                       max_decoder_length=ld)
    batches = _batches(packs, args.micro)
    runs = {}
    for implementation in ("dense", "segmented"):
        adapter, step = _model(implementation, k, s, args.seed)
        _seconds(step, batches, 0, 2)  # Tracing happens here.
        runs[implementation] = step
    times = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, step in runs.items():
            times[name].append(_seconds(step, batches, r * args.steps, args.steps))
    ratios = [d / g for d, g in zip(times["dense"], times["segmented"])]
    work = {"encoder": le ** 2 / segment_work(le, k, s), "decoder": ld ** 2 / segment_work(ld, k, s),
            "cross": le * ld / pair_work(ld, le, k, s, s)}
    auto = from_keras_hub(adapter.backbone, max_sequences_per_pack=k, segment_length=s,
                          check_exact=False).implementations(le, ld)
    return {"shape": (le, ld, k, s), "pairs_per_row": float(np.mean(
        np.sum(packs["example_ids"] >= 0, axis=1))),
            "dense": statistics.median(times["dense"]),
            "segmented": statistics.median(times["segmented"]),
            "ratio": statistics.median(ratios), "spread": (min(ratios), max(ratios)),
            "work": work, "auto": auto}


def markdown(results, args, command, seconds) -> str:
    lines = [
        "# Pair packs: dense vs segmented attention (benchmarks/seq2seq_attention.py)", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), TensorFlow "
        f"{tf.__version__}, Keras {keras.__version__}, keras-hub {keras_hub.__version__}. "
        f"Wall time {seconds:.0f} s.", "",
        "Model: keras-hub `T5Backbone` (2 layers, hidden 64, 4 heads), `Seq2SeqLM`, SGD, one "
        f"`tf.function` step of {args.micro} pair packs (first fit, K pairs a row); inputs "
        "S/2..S tokens, targets 4..S/4. Step time: median of "
        f"{args.rounds} interleaved rounds of {args.steps} steps after a warm-up; dense / "
        "segmented: median of the per-round ratios (above 1: segmented faster), with the "
        "spread. Work ratios: dense scores / segmented rows' scores (encoder, decoder, "
        "cross); auto: what `\"auto\"` picks per kind.", "",
        "| Le / Ld / K / S | pairs per row | dense step | segmented step | dense / segmented "
        "(spread) | work ratio enc / dec / cross | auto enc / dec / cross |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        w, a = r["work"], r["auto"]
        lines.append(
            f"| {' / '.join(map(str, r['shape']))} | {r['pairs_per_row']:.1f} | "
            f"{r['dense'] * 1e3:.0f} ms | {r['segmented'] * 1e3:.0f} ms | {r['ratio']:.2f}x "
            f"({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | {w['encoder']:.2f} / "
            f"{w['decoder']:.2f} / {w['cross']:.2f} | {a['encoder']} / {a['decoder']} / "
            f"{a['cross']} |")
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 shape, 1 round")
    parser.add_argument("--rows", type=int, default=8, help="pair packs per shape, about")
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="benchmarks/results/seq2seq_attention.md")
    args = parser.parse_args()
    shapes = SHAPES[:1] if args.quick else SHAPES
    if args.quick:
        args.rounds = 1
    start = time.perf_counter()
    results = [shape_result(*shape, args) for shape in shapes]
    command = ("python benchmarks/seq2seq_attention.py " + " ".join(sys.argv[1:])).strip()
    text = markdown(results, args, command, time.perf_counter() - start)
    with open(args.output, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
