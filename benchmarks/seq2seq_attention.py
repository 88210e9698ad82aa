"""Pair packs: dense vs segmented attention in one encoder-decoder training step.

A keras-hub `T5Backbone` (2 layers, hidden 64, 4 heads) through
`tfpack.models.from_keras_hub` trains as `tfpack.models.Seq2SeqLM` on the same
pair packs (`pack_pairs`, first fit, `K` pairs a row) with
`attention_implementation="dense"` (the `[Ld, Le]` cross mask, `[Le, Le]` and
`[Ld, Ld]` self masks), `"segmented"` (every kind in rows: encoder and
decoder self-attention per sequence, cross-attention pairing target k with
input k, `tfpack.layers.pair_segmented_attention`) and `"auto"` (each kind
as the rule picks it), each one compiled `tf.function` step, with
`segment_length=(Se, Sd)`. Inputs are `Se / 2` to `Se` tokens, targets 4 to
`Sd`. After a warm-up, timed rounds alternate; the result is the median step
time per implementation and the medians of the per-round ratios dense /
segmented and dense / auto (above 1: faster than dense), with their spread,
and the work ratios (dense scores over the segmented rows' scores) that
`"auto"` decides by.

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
from results_file import write_results  # noqa: E402

# (Le, Ld, K, Se, Sd): rows of Le and Ld tokens, K pairs a row, inputs of Se
# and targets of Sd tokens at most.
SHAPES = ((512, 128, 6, 128, 32), (1024, 256, 12, 128, 32), (2048, 512, 24, 128, 32),
          (2048, 512, 8, 384, 96), (1024, 512, 8, 192, 96),
          # Near break-even: work ratios 1.0-1.4 (few long pairs a row).
          (512, 512, 4, 256, 256), (1024, 256, 4, 512, 128))
IMPLEMENTATIONS = ("dense", "segmented", "auto")


def _model(implementation: str, k: int, s: tuple, seed: int):
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


def shape_result(le: int, ld: int, k: int, se: int, sd: int, args) -> dict:
    rng = np.random.default_rng(args.seed)
    n = args.rows * k
    found = np.stack([rng.integers(se // 2, se + 1, n), rng.integers(4, sd + 1, n)], 1)
    pairs = pairs_of(found, se, sd, args.seed)
    packs = pack_pairs(pairs, max_pairs_per_pack=k, max_encoder_length=le,
                       max_decoder_length=ld)
    batches = _batches(packs, args.micro)
    runs = {}
    for implementation in IMPLEMENTATIONS:
        adapter, step = _model(implementation, k, (se, sd), args.seed)
        _seconds(step, batches, 0, 2)  # Tracing happens here.
        runs[implementation] = (adapter, step)
    times = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (_, step) in runs.items():
            times[name].append(_seconds(step, batches, r * args.steps, args.steps))
    ratios = {name: [d / g for d, g in zip(times["dense"], times[name])]
              for name in ("segmented", "auto")}
    work = {"encoder": le ** 2 / segment_work(le, k, se),
            "decoder": ld ** 2 / segment_work(ld, k, sd),
            "cross": le * ld / pair_work(ld, le, k, sd, se)}
    return {"shape": (le, ld, k, se, sd), "pairs_per_row": float(np.mean(
        np.sum(packs["example_ids"] >= 0, axis=1))),
            "times": {name: statistics.median(t) for name, t in times.items()},
            "ratios": {name: (statistics.median(r), min(r), max(r))
                       for name, r in ratios.items()},
            "work": work, "auto": runs["auto"][0].implementations(le, ld)}


def markdown(results, args, command, seconds) -> str:
    lines = [
        "# Pair packs: dense vs segmented attention (benchmarks/seq2seq_attention.py)", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), TensorFlow "
        f"{tf.__version__}, Keras {keras.__version__}, keras-hub {keras_hub.__version__}. "
        f"Wall time {seconds:.0f} s.", "",
        "Model: keras-hub `T5Backbone` (2 layers, hidden 64, 4 heads), `Seq2SeqLM`, SGD, one "
        f"`tf.function` step of {args.micro} pair packs (first fit, K pairs a row), "
        "`segment_length=(Se, Sd)`; inputs Se/2..Se tokens, targets 4..Sd. Step time: median "
        f"of {args.rounds} interleaved rounds of {args.steps} steps after a warm-up; dense / "
        "segmented and dense / auto: medians of the per-round ratios (above 1: faster than "
        "dense), with the spread. Work ratios: dense scores / segmented rows' scores "
        "(encoder, decoder, cross); auto: what `\"auto\"` picks per kind (s = segmented, "
        "d = dense).", "",
        "| Le / Ld / K / Se / Sd | pairs per row | dense / segmented / auto step | "
        "dense / segmented (spread) | dense / auto (spread) | work ratio enc / dec / cross | "
        "auto enc / dec / cross |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        w, a, t = r["work"], r["auto"], r["times"]
        ratio = {name: f"{m:.2f}x ({lo:.2f}-{hi:.2f})" for name, (m, lo, hi) in
                 r["ratios"].items()}
        lines.append(
            f"| {' / '.join(map(str, r['shape']))} | {r['pairs_per_row']:.1f} | "
            + " / ".join(f"{t[name] * 1e3:.0f}" for name in IMPLEMENTATIONS) + " ms | "
            f"{ratio['segmented']} | {ratio['auto']} | {w['encoder']:.2f} / "
            f"{w['decoder']:.2f} / {w['cross']:.2f} | "
            + " / ".join(a[kind][0] for kind in ("encoder", "decoder", "cross")) + " |")
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
    write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
