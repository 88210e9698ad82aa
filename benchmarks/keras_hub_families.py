"""keras-hub families: packed vs padded causal-LM training tokens/s.

Two families adapted by `from_keras_hub`: a mixture of experts (Mixtral:
4 experts, top-2, sliding window 128) and Gemma 4 (text: local and global
layers, soft caps), both small (2 layers, width 64, 4 query heads and 2
key/value heads, vocabulary 1,000) on real lengths: `--sequences` lengths
drawn from the bundled BERT Wikipedia histogram (`wikipedia_512`, mean
length 256) at L=512, random token ids. Each model trains a
`tfpack.models.CausalLM` with `fit`-style XLA steps (`train_on_batch` of a
model compiled with `jit_compile=True`) twice from the same weights:

- padded: one sequence per row, padded to L;
- packed: the sequences packed by the `optimal` planner (K=8).

The two alternate in chunks of `--steps` batches (which goes first
alternates too), after one warm-up chunk each (compilation). Reported: real
tokens/s of each (median over rounds) and the speed-up packed/padded per
round: median and spread (min-max), against the plan's packing factor; a
median above the plan's upper bound is labelled noise
(`tfpack.training.speed.SpeedupResult`).

Usage:
    python benchmarks/keras_hub_families.py [--rounds 5] [--steps 3]
        [--output benchmarks/results/keras_hub_families.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpack import datasets, models, packing  # noqa: E402
from tfpack.testing import next_token_labels, pack_examples  # noqa: E402
from tfpack.training.speed import SpeedupResult  # noqa: E402
from results_file import write_results  # noqa: E402

L, K, BATCH, VOCAB = 512, 8, 4, 1000
_SMALL = dict(vocabulary_size=VOCAB, num_layers=2, num_query_heads=4,
              num_key_value_heads=2, hidden_dim=64, intermediate_dim=128)
FAMILIES = {
    "Mixtral (4 experts, top-2, window 128)":
        lambda: keras_hub.models.MixtralBackbone(
            num_experts=4, top_k=2, sliding_window=128, **_SMALL),
    "Gemma 4 (text, local + global layers, soft caps)":
        lambda: keras_hub.models.Gemma4Backbone(
            image_size=16, head_dim=16, global_head_dim=32,
            sliding_window_size=128, sliding_window_pattern=2,
            attention_logit_soft_cap=50.0, final_logit_soft_cap=30.0,
            **_SMALL),
}


def sequences(count: int, seed: int):
    """`count` random-token causal-LM examples of Wikipedia lengths."""
    rng = np.random.default_rng(seed)
    counts = datasets.histogram("wikipedia_512")
    lengths = rng.choice(np.arange(1, L + 1), size=count,
                         p=counts / counts.sum())
    return [{"input_ids": ids, "labels": next_token_labels(ids)}
            for ids in (rng.integers(1, VOCAB, n) for n in lengths)], lengths


def batches(examples, lengths, seed):
    """Padded and packed batches of `examples` (numpy dicts), and the plan."""
    plan = packing.plan(packing.histogram(lengths, L), max_length=L,
                        max_sequences_per_pack=K, algorithm="optimal",
                        seed=seed)
    assignment = plan.assign(lengths, seed=seed)
    packs = [list(assignment.pack(p)) for p in range(assignment.num_packs)]
    result = {}
    for name, rows in (("padded", [[i] for i in range(len(examples))]),
                       ("packed", packs)):
        full = pack_examples(examples, L, packs=rows,
                             max_sequences_per_pack=1 if name == "padded"
                             else K)
        result[name] = [{k: v[i:i + BATCH] for k, v in full.items()}
                        for i in range(0, len(rows) - BATCH + 1, BATCH)]
    return result, plan


def build(family, seed):
    keras.utils.set_random_seed(seed)
    model = models.CausalLM(models.from_keras_hub(FAMILIES[family]()))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=True)
    return model


def chunk(model, batches, start, steps):
    """Real tokens/s of `steps` training steps from batch `start`."""
    tokens, began = 0, time.perf_counter()
    for i in range(start, start + steps):
        batch = batches[i % len(batches)]
        model.train_on_batch(batch)
        tokens += int((batch["sequence_ids"] > 0).sum())
    return tokens / (time.perf_counter() - began)


def measure(family, examples, lengths, args):
    data, plan = batches(examples, lengths, args.seed)
    runs = {name: build(family, args.seed) for name in data}
    runs["packed"].set_weights(runs["padded"].get_weights())
    for name, model in runs.items():  # Warm-up: tracing and XLA.
        chunk(model, data[name], 0, 1)
    speed = {name: [] for name in runs}
    for r in range(args.rounds):
        order = ("padded", "packed") if r % 2 == 0 else ("packed", "padded")
        for name in order:
            speed[name].append(chunk(runs[name], data[name],
                                     1 + r * args.steps, args.steps))
    ratios = [p / u for p, u in zip(speed["packed"], speed["padded"])]
    return {"plan": plan.metrics, "padded_batches": len(data["padded"]),
            "packed_batches": len(data["packed"]),
            "tokens_per_second": {n: statistics.median(v)
                                  for n, v in speed.items()},
            "ratios": ratios}


def report(results, args, seconds) -> str:
    lines = [
        "# keras-hub families: packed vs padded training "
        "(benchmarks/keras_hub_families.py)", "",
        f"Command: `python benchmarks/keras_hub_families.py --rounds "
        f"{args.rounds} --steps {args.steps}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores "
        f"(shared), TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"keras-hub {keras_hub.__version__}. One process; padded and packed "
        "alternate in chunks of "
        f"{args.steps} steps (which goes first alternates), after one "
        "warm-up step each.", "",
        f"Data: {args.sequences} sequences with lengths drawn from the "
        "bundled Wikipedia histogram (`wikipedia_512`), random token ids, "
        f"L={L}, batch {BATCH} rows; packed by the `optimal` planner with "
        f"K={K}. Model: `CausalLM(from_keras_hub(backbone))`, 2 layers, "
        "width 64, 4 query / 2 key-value heads, vocabulary 1,000; Adam; "
        "`jit_compile=True`; identical initial weights.", "",
        "| family | packing factor (upper bound) | padded tokens/s | "
        "packed tokens/s | speed-up (median of rounds, min-max) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for family, r in results.items():
        speedup = SpeedupResult(tuple(r["ratios"]),
                                r["plan"]["speedup_upper_bound"])
        lo, hi = speedup.spread
        noise = " (above the bound: noise)" if speedup.is_noise else ""
        lines.append(
            f"| {family} | {r['plan']['packing_factor']:.3f} "
            f"({speedup.upper_bound:.3f}) | "
            f"{r['tokens_per_second']['padded']:.0f} | "
            f"{r['tokens_per_second']['packed']:.0f} | "
            f"{speedup.median:.2f} ({lo:.2f}-{hi:.2f}){noise} |")
    lines += ["", "Packed outputs equal padded ones for these families (the "
              "conformance suite, tests/models/keras_hub/test_conformance.py);"
              " the speed-up is the padding no longer computed.", "",
              f"Wall time: {seconds:.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--sequences", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES))
    parser.add_argument("--output", default=str(
        pathlib.Path(__file__).parent / "results" / "keras_hub_families.md"))
    args = parser.parse_args()
    examples, lengths = sequences(args.sequences, args.seed)
    began = time.perf_counter()
    results = {family: measure(family, examples, lengths, args)
               for family in args.families}
    text = report(results, args, time.perf_counter() - began)
    write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
