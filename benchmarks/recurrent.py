"""Recurrent families packed: Qwen3.5 and RWKV-7 training, and the recurrence alone.

What a reset inside the recurrence costs (issue 34, item 4). Two parts, one
process, interleaved rounds:

1. A small Qwen3.5 (one gated DeltaNet layer and one full-attention layer)
   and a small RWKV-7 (2 layers), width 64, vocabulary 1,000, train a
   `tfpack.models.CausalLM` under XLA (`train_on_batch`, `jit_compile=True`)
   on `--sequences` random-token sequences whose lengths are drawn from the
   bundled Wikipedia histogram (`wikipedia_512`) at L=512: padded (one
   sequence a row) and packed (the `optimal` planner, K=8), from the same
   weights. Reported: real tokens/s of each, the speed-up packed/padded per
   round (median, min-max) and that speed-up over the packing factor of
   the batches timed
   (target >= 0.9: the packed step costs what the padded one costs, so the
   gain is the padding no longer computed).
2. The recurrences alone (forward and backward, XLA): keras-hub Qwen3.5's
   chunked gated delta rule with resets (`tfpack.layers.recurrence`, 4
   heads of 16) on the packed rows, against the same function on the same
   rows as one sequence a row (the reset's own cost: target ratio ~1.0) and
   on the padded rows (tokens/s, against the packing factor); likewise
   RWKV-7's generalized delta rule.

Usage:
    python benchmarks/recurrent.py [--rounds 3] [--sequences 32]
        [--output benchmarks/results/recurrent.md]
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

from keras_hub_families import BATCH, K, L, VOCAB  # noqa: E402
from keras_hub_families import batches, chunk, sequences  # noqa: E402
from tfpack import models  # noqa: E402
from tfpack.layers import recurrence  # noqa: E402
from tfpack.training.speed import SpeedupResult  # noqa: E402
from results_file import write_results  # noqa: E402

HEADS, HEAD_DIM = 4, 16
FAMILIES = {
    "Qwen3.5 (gated DeltaNet + full attention)":
        lambda: keras_hub.models.Qwen3_5Backbone(
            vocabulary_size=VOCAB, num_layers=2, num_query_heads=4,
            num_key_value_heads=2, head_dim=16, hidden_dim=64,
            intermediate_dim=128, linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=16,
            linear_value_head_dim=16,
            layer_types=["linear_attention", "full_attention"]),
    "RWKV-7": lambda: keras_hub.models.RWKV7Backbone(
        hidden_size=64, head_size=16, num_layers=2, vocabulary_size=VOCAB,
        intermediate_dim=128, gate_lora=16, mv_lora=16, aaa_lora=16,
        decay_lora=16),
}


def build(family, seed):
    keras.utils.set_random_seed(seed)
    model = models.CausalLM(models.from_keras_hub(FAMILIES[family]()))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=True)
    return model


def interleave(runs, rounds):
    """`{name: [per-round value]}` of `runs` (`{name: round -> value}`),
    alternating which goes first."""
    values = {name: [] for name in runs}
    for r in range(rounds):
        names = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for name in names:
            values[name].append(runs[name](r))
    return values


def train(family, data, args):
    """Training tokens/s, padded and packed, per round."""
    runs = {name: build(family, args.seed) for name in data}
    runs["packed"].set_weights(runs["padded"].get_weights())
    for name, model in runs.items():  # Warm-up: tracing and XLA.
        chunk(model, data[name], 0, 1)
    # Every round runs every batch: the ratio of their real tokens is the
    # set's (`measured_factor`); a few batches would compare the lengths
    # those happen to hold.
    return interleave({name: (lambda r, name=name: chunk(
        runs[name], data[name], 0, len(data[name])))
        for name in runs}, args.rounds)


def _rule_inputs(kind, batch, seed):
    """Random inputs of the gated delta rule (`"gdn"`) or RWKV-7's (`"rwkv"`)
    for `batch` rows of L tokens."""
    rng = np.random.default_rng(seed)
    shape = (len(batch["sequence_ids"]), L, HEADS, HEAD_DIM)
    normal = [tf.constant(rng.normal(size=shape), tf.float32)
              for _ in range(4)]
    if kind == "gdn":
        g = tf.constant(-rng.uniform(0, 0.5, shape[:3]), tf.float32)
        beta = tf.constant(rng.uniform(size=shape[:3]), tf.float32)
        return normal[:3] + [g, beta]
    return normal + [tf.constant(-rng.uniform(0.5, 3, shape), tf.float32),
                     tf.constant(rng.uniform(size=shape), tf.float32)]


def _rule_step(kind):
    """An XLA forward+backward of the recurrence on its inputs and segments."""
    rule = (recurrence.chunked_gated_delta_rule if kind == "gdn"
            else recurrence.generalized_delta_rule)

    @tf.function(jit_compile=True)
    def step(inputs, segments):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = rule(*inputs, segments)
            loss = tf.reduce_sum(tf.sin(out))
        return tape.gradient(loss, inputs)

    return step


def recurrences(data, args):
    """Real tokens/s of each recurrence: packed, packed as one sequence a
    row (no resets), padded; per round."""
    results = {}
    for kind in ("gdn", "rwkv"):
        step = _rule_step(kind)
        cases = {}
        for name, segments_of in (
                ("packed", recurrence.segments_of),
                ("packed, no resets", lambda ids: tf.ones_like(ids)),
                ("padded", recurrence.segments_of)):
            rows = data["padded" if name == "padded" else "packed"]
            prepared = [(_rule_inputs(kind, b, i), segments_of(
                tf.constant(b["sequence_ids"])),
                int((b["sequence_ids"] > 0).sum()))
                for i, b in enumerate(rows)]
            step(*prepared[0][:2])  # Warm-up: XLA.

            def run(r, prepared=prepared):  # Every batch, as `train`.
                began, tokens = time.perf_counter(), 0
                for inputs, segments, real in prepared:
                    tf.nest.map_structure(np.asarray, step(inputs, segments))
                    tokens += real
                return tokens / (time.perf_counter() - began)

            cases[name] = run
        results[kind] = interleave(cases, args.rounds)
    return results


def _speedup(ratios, bound=None):
    result = SpeedupResult(tuple(ratios), bound)
    lo, hi = result.spread
    return result, f"{result.median:.2f} ({lo:.2f}-{hi:.2f})"


def measured_factor(data):
    """Real tokens a row, packed over padded, of the batches timed (whole
    batches only: the plan's last packs may not fill one)."""
    per_row = {name: sum(int((b["sequence_ids"] > 0).sum()) for b in rows)
               / sum(len(b["sequence_ids"]) for b in rows)
               for name, rows in data.items()}
    return per_row["packed"] / per_row["padded"]


def report(trained, rules, plan, data, args, seconds) -> str:
    factor = measured_factor(data)
    bound = plan.metrics["speedup_upper_bound"]
    lines = [
        "# Recurrent families packed (benchmarks/recurrent.py)", "",
        f"Command: `python benchmarks/recurrent.py --rounds {args.rounds} "
        f"--sequences {args.sequences}`", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores "
        f"(shared), TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"keras-hub {keras_hub.__version__}. One process; the cases of each "
        "table alternate by rounds (which goes first alternates), after a "
        "warm-up (XLA compilation); a round runs every whole batch of the "
        "set, padded and packed.", "",
        f"Data: {args.sequences} sequences with lengths drawn from the "
        "bundled Wikipedia histogram (`wikipedia_512`), random token ids, "
        f"L={L}, batches of {BATCH} rows; packed by `optimal` with K={K}: "
        f"the plan's packing factor {plan.metrics['packing_factor']:.3f} "
        f"(speed-up upper bound {bound:.3f}); the batches timed (whole "
        f"batches of {BATCH} rows) hold **{factor:.3f}x** the real tokens a "
        "row padded ones hold: the packing factor the speed-ups are read "
        "against.", "",
        "## Training step: packed vs padded", "",
        "`CausalLM(from_keras_hub(backbone))`, width 64, vocabulary 1,000, "
        "Adam, `jit_compile=True`, identical initial weights.", "",
        "| family | padded tokens/s | packed tokens/s | speed-up (median, "
        "min-max) | speed-up / packing factor (target >= 0.9) |",
        "| --- | --- | --- | --- | --- |",
    ]
    worst = []
    for family, speed in trained.items():
        ratios = [p / u for p, u in zip(speed["packed"], speed["padded"])]
        result, text = _speedup(ratios, bound)
        worst.append((result.median / factor, family))
        lines.append(
            f"| {family} | {statistics.median(speed['padded']):.0f} | "
            f"{statistics.median(speed['packed']):.0f} | {text}"
            f"{' (above the bound: noise)' if result.is_noise else ''} | "
            f"{result.median / factor:.2f} |")
    lines += [
        "", "## The recurrence alone (forward and backward, XLA)", "",
        f"`[rows, {L}, {HEADS} heads, {HEAD_DIM}]` random inputs; the same "
        "packed rows with their resets and as one sequence a row (no "
        "resets: what the reset itself costs), and the padded rows.", "",
        "| recurrence | packed tokens/s | packed / packed without resets "
        "(median, min-max; ~1.0 = a reset is free) | packed / padded "
        "(median, min-max) | packed / padded over the packing factor |",
        "| --- | --- | --- | --- | --- |",
    ]
    names = {"gdn": "gated delta rule, chunks of 64 (Qwen3.5)",
             "rwkv": "generalized delta rule, per token (RWKV-7)"}
    for kind, speed in rules.items():
        _, reset = _speedup([a / b for a, b in zip(
            speed["packed"], speed["packed, no resets"])])
        result, padded = _speedup([a / b for a, b in zip(
            speed["packed"], speed["padded"])], bound)
        worst.append((result.median / factor, names[kind]))
        lines.append(f"| {names[kind]} | "
                     f"{statistics.median(speed['packed']):.0f} | {reset} | "
                     f"{padded} | {result.median / factor:.2f} |")
    low, name = min(worst)
    lines += ["", f"Worst case of the suite: **{low:.2f}x** of the packing "
              f"factor ({name}).", "",
              "Packed outputs and gradients equal each sequence alone "
              "(tests/layers/test_recurrence.py, "
              "tests/models/keras_hub/test_keras_hub_recurrent.py).", "",
              f"Wall time: {seconds:.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sequences", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=str(
        pathlib.Path(__file__).parent / "results" / "recurrent.md"))
    args = parser.parse_args()
    examples, lengths = sequences(args.sequences, args.seed)
    data, plan = batches(examples, lengths, args.seed)
    began = time.perf_counter()
    trained = {family: train(family, data, args) for family in FAMILIES}
    rules = recurrences(data, args)
    text = report(trained, rules, plan, data, args,
                  time.perf_counter() - began)
    write_results(args.output, text)
    print(text)


if __name__ == "__main__":
    main()
