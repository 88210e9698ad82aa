"""Packed vs padded preference pairs: training tokens/s, and prompt sharing on long prompts.

A generated suite of prompt/response length families (seeded) is turned into
pair items (`tfpack.builders.preference_examples`: one item a pair, so a pair
never splits) and trained with `tfpack.models.PreferenceModel` (SimPO:
reference-free, so the packs carry nothing else) on a small `DecoderBackbone`
with `tfpack.training.Trainer` (XLA, fixed shapes):

- padded: one pair per row of ``L`` tokens (the layout of trainers that pad
  each pair), ``max_sequences_per_pack=1``;
- packed: the `optimal` plan, up to ``K`` pairs per row of the same ``L``.

Both trainers run the same rows per step; after one warm-up (compiling) fit
each, timed rounds alternate (`tfpack.training.speed.measure_speedup`), and
the realized speed-up is the median ratio of real (pair) tokens per second,
with its spread. Target: at least 0.9 x the packing factor (pairs per packed
row / 1) on every family; the worst family is reported.

Prompt sharing (``share_prompt=True``: the prompt stored once) against plain
packing, both packed, on a long-prompt family: pairs per second, median of
interleaved rounds.

Usage:
    python benchmarks/preference.py [--quick] [--output benchmarks/results/preference.md]
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

from tfpack import builders, data, models, training  # noqa: E402
from tfpack.training.speed import measure_speedup  # noqa: E402
from results_file import write_results  # noqa: E402

VOCAB = 256
# name: (prompt, chosen, rejected) length samplers, each (rng, n) -> int array.
FAMILIES = {
    "short chat": lambda rng, n: (rng.integers(4, 40, n), rng.integers(4, 48, n),
                                  rng.integers(4, 48, n)),
    "log-normal chat": lambda rng, n: tuple(np.clip(rng.lognormal(m, 0.6, n), 2, 200).astype(int)
                                            for m in (3.6, 3.9, 3.9)),
    # Pairs of about a third to a half of L: two or three to a row at best.
    "long prompts": lambda rng, n: (rng.integers(60, 100, n), rng.integers(8, 40, n),
                                    rng.integers(8, 40, n)),
    "long responses": lambda rng, n: (rng.integers(8, 30, n), rng.integers(50, 100, n),
                                      rng.integers(50, 100, n)),
    "uneven responses": lambda rng, n: (rng.integers(8, 80, n), rng.integers(2, 20, n),
                                        rng.integers(60, 180, n)),
}


def make_pairs(family: str, count: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    prompts, chosen, rejected = FAMILIES[family](rng, count)
    return [{"prompt": rng.integers(1, VOCAB, p).tolist(), "chosen": rng.integers(1, VOCAB, c)
             .tolist(), "rejected": rng.integers(1, VOCAB, r).tolist()}
            for p, c, r in zip(prompts, chosen, rejected)]


def make_trainer(spec, micro: int, seed: int, share_prompt: bool = False):
    keras.utils.set_random_seed(seed)
    policy = models.CausalLM(models.DecoderBackbone(
        vocabulary_size=VOCAB, num_layers=2, hidden_dim=64, num_heads=2, intermediate_dim=256,
        attention_implementation="dense"))
    model = models.PreferenceModel(policy, loss="simpo", beta=2.0, share_prompt=share_prompt)
    model({k: tf.zeros([1] + s.shape.as_list(), s.dtype) for k, s in spec.items()})
    return training.Trainer(model, keras.optimizers.SGD(1e-3), micro_batch_size=micro,
                            log_every=1, progress=False)


def packed(pairs, L, K, seed, share_prompt=False):
    examples = builders.preference_examples(pairs, max_length=L, share_prompt=share_prompt)
    packer = data.pack(max_length=L, max_sequences_per_pack=K,
                       algorithm="optimal" if K > 1 else "none", seed=seed)
    packs = list(examples.apply(packer).as_numpy_iterator())
    # In memory: the timed rounds measure training, not the packing pipeline.
    columns = {name: np.stack([p[name] for p in packs]) for name in packs[0]}
    return tf.data.Dataset.from_tensor_slices(columns), packer.report


def warm(trainer, dataset, steps):
    trainer.fit(dataset, steps)  # Tracing and XLA compilation happen here.


def family_result(family, args) -> dict:
    pairs = make_pairs(family, args.pairs, args.seed)
    packs, report = packed(pairs, args.max_length, args.max_pairs, args.seed)
    rows, _ = packed(pairs, args.max_length, 1, args.seed)
    streams = {"packed": packs.repeat(), "unpacked": rows.repeat()}
    trainers = {"packed": make_trainer(packs.element_spec, args.micro, args.seed),
                "unpacked": make_trainer(rows.element_spec, args.micro, args.seed)}
    for name in ("unpacked", "packed"):
        warm(trainers[name], streams[name], 2)
    measured = measure_speedup(trainers["packed"], trainers["unpacked"], streams,
                               rounds=args.rounds, steps_per_round=args.steps,
                               upper_bound=report.plan.metrics["speedup_upper_bound"])
    lengths = np.array([2 * len(p["prompt"]) + len(p["chosen"]) + len(p["rejected"])
                        for p in pairs])
    factor = report.packing_factor
    return {"family": family, "pairs": len(pairs), "mean_pair_tokens": float(lengths.mean()),
            "packing_factor": factor, "efficiency": report.efficiency,
            "speedup": measured.median, "spread": measured.spread,
            "rounds": measured.ratios, "noise": measured.is_noise,
            "upper_bound": report.plan.metrics["speedup_upper_bound"],
            "ratio": measured.median / factor}


def _pairs_per_second(trainer, dataset, steps):
    start = int(trainer.step.numpy())
    history = trainer.fit(dataset, start + steps).history
    return sum(r["sequences"] for r in history) / max(sum(r["seconds"] for r in history), 1e-9)


def sharing_result(args) -> dict:
    rng = np.random.default_rng(args.seed + 1)
    count = args.pairs
    pairs = [{"prompt": rng.integers(1, VOCAB, int(p)).tolist(),
              "chosen": rng.integers(1, VOCAB, int(c)).tolist(),
              "rejected": rng.integers(1, VOCAB, int(r)).tolist()}
             for p, c, r in zip(rng.integers(300, 400, count), rng.integers(16, 64, count),
                                rng.integers(16, 64, count))]
    L = 2 * args.max_length
    runs = {}
    for share in (False, True):
        packs, report = packed(pairs, L, args.max_pairs, args.seed, share_prompt=share)
        trainer = make_trainer(packs.element_spec, args.micro, args.seed, share_prompt=share)
        runs[share] = (trainer, packs.repeat(), report)
        warm(trainer, runs[share][1], 2)
    ratios = []
    for _ in range(args.rounds):
        plain = _pairs_per_second(runs[False][0], runs[False][1], args.steps)
        shared = _pairs_per_second(runs[True][0], runs[True][1], args.steps)
        ratios.append(shared / plain)
    return {"pairs": count, "max_length": L,
            "pairs_per_pack": {"plain": runs[False][2].packing_factor,
                               "shared": runs[True][2].packing_factor},
            "speedup": statistics.median(ratios), "spread": (min(ratios), max(ratios)),
            "rounds": ratios}


def markdown(results, sharing, args, command, seconds) -> str:
    worst = min(results, key=lambda r: r["ratio"])
    lines = [
        "# Preference pairs: packed vs padded training (benchmarks/preference.py)", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), TensorFlow "
        f"{tf.__version__}, Keras {keras.__version__}. Wall time {seconds:.0f} s.", "",
        f"Model: `PreferenceModel(loss=\"simpo\")` on a `DecoderBackbone` (2 layers, hidden 64, "
        f"dense attention), `Trainer` with XLA, {args.micro} rows per step for both runs. "
        f"Rows of L={args.max_length} tokens: padded = one pair per row; packed = the "
        f"`optimal` plan, at most K={args.max_pairs} pairs per row. {args.pairs} generated pairs "
        f"per family (seed {args.seed}); a pair's item is 2 x prompt + chosen + rejected tokens. "
        f"Speed-up: real tokens/s packed / padded, median of {args.rounds} interleaved rounds "
        f"of {args.steps} updates each after a warm-up fit, with the spread.", "",
        "| family | mean pair tokens | packing factor (pairs per row) | realized speed-up "
        "(spread) | speed-up / packing factor | target >= 0.9 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        label = "NOISE (above the upper bound) " if r["noise"] else ""
        lines.append(
            f"| {r['family']} | {r['mean_pair_tokens']:.0f} | {r['packing_factor']:.2f} | "
            f"{label}{r['speedup']:.2f}x ({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | "
            f"{r['ratio']:.3f} | {'yes' if r['ratio'] >= 0.9 else 'no'} |")
    lines += ["", f"Worst family: **{worst['family']}**, speed-up {worst['speedup']:.2f}x = "
              f"{worst['ratio']:.3f} x its packing factor {worst['packing_factor']:.2f} "
              f"(target >= 0.9: {'met' if worst['ratio'] >= 0.9 else 'not met'}).", ""]
    if sharing:
        s = sharing
        lines += [
            "## Prompt sharing on long prompts", "",
            f"{s['pairs']} pairs, prompts of 300-399 tokens, responses of 16-63, rows of "
            f"L={s['max_length']}, both packed (`optimal`, K={args.max_pairs}); plain packing "
            "stores the prompt twice, `share_prompt=True` once. Pairs per second, shared / "
            f"plain, median of {len(s['rounds'])} interleaved rounds.", "",
            "| layout | pairs per row |", "| --- | --- |",
            f"| plain packing | {s['pairs_per_pack']['plain']:.2f} |",
            f"| prompt sharing | {s['pairs_per_pack']['shared']:.2f} |", "",
            f"Prompt sharing trains **{s['speedup']:.2f}x** the pairs per second of plain "
            f"packing (spread {s['spread'][0]:.2f}-{s['spread'][1]:.2f}); the per-pair "
            "results are the same numbers (tests/models/test_preference.py).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 families")
    parser.add_argument("--pairs", type=int, default=240)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--max-pairs", type=int, default=16)
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-sharing", action="store_true")
    parser.add_argument("--output", default=None)
    args = parser.parse_args()
    families = list(FAMILIES)[:2] if args.quick else list(FAMILIES)
    if args.quick:
        args.pairs, args.rounds = min(args.pairs, 80), 3
    start = time.perf_counter()
    results = []
    for family in families:
        results.append(family_result(family, args))
        print(results[-1], file=sys.stderr, flush=True)
    sharing = None if args.no_sharing else sharing_result(args)
    command = "python benchmarks/preference.py " + " ".join(sys.argv[1:])
    text = markdown(results, sharing, args, command.strip(), time.perf_counter() - start)
    if args.output:
        write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
