"""Packed vs unpacked BERT pre-training: realized speed-up and convergence.

Real English (Python standard-library docstrings) -> WordPiece -> BERT
pre-training examples (NSP + 15% MLM, L=256) -> optimal packing plan (K=3).
The same small BERT, from identical initial weights, is trained with
`tfpack.training.Trainer` twice on the same examples:

- unpacked: one sequence per row padded to L, ``micro`` rows x ``acc``
  accumulation steps per update;
- packed: ``micro`` packs per micro-step, accumulation cut by the packing
  factor (`tfpack.training.for_packing`), so each update sees the same number
  of sequences on average (seed 000, section 4.2) and the same LAMB settings.

Both use about the same M (masked-LM slots per row: 15% of L as in the BERT
recipe for unpacked rows, the most any pack needs for packs), so the MLM head
costs about the same per row. The two runs alternate in chunks of
``log_every`` updates so that load from other processes hits both alike.

Reported:

- realized speed-up = real tokens/s packed / real tokens/s unpacked: the
  median over the interleaved chunks after each run's first (compiling) one,
  with the spread; a median above the plan's upper bound is labelled as noise,
  not reported as a result (`tfpack.training.speed`); target >= 0.9 x the
  plan's packing factor;
- convergence: MLM loss against sequences seen, and the final MLM loss (mean
  of the last two log intervals) of both runs; target within 2%.

The vocabulary is compacted to the WordPiece ids that occur in the corpus
(same text and tokens, a smaller softmax) to keep the run to minutes on 2 CPU
cores.

Usage:
    python benchmarks/training.py [--epochs 2] [--quick] [--output benchmarks/results/training.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfpack import builders, data, datasets, models, packing, training  # noqa: E402
from tfpack.training.speed import SpeedupResult  # noqa: E402
from results_file import write_results  # noqa: E402


def examples(documents: int, L: int, M: int, seed: int):
    """BERT examples with a compacted vocabulary, and their lengths."""
    docs = datasets.stdlib_documents(max_documents=documents)
    tokenized, vocab = builders.compact_vocabulary(builders.tokenize_documents(docs), builders.load_vocab())
    raw = builders.examples_to_dataset(builders.create_bert_examples(
        tokenized, vocab, max_seq_length=L, max_predictions_per_seq=M, seed=seed)).cache()
    lengths = [len(row["input_ids"]) for row in raw.as_numpy_iterator()]
    return raw, np.array(lengths), len(vocab)


def build(vocab: int, L: int, seed: int, spec):
    keras.utils.set_random_seed(seed)
    encoder = models.BertEncoder(vocabulary_size=vocab, num_layers=2, hidden_dim=64,
                                 num_heads=2, intermediate_dim=256, max_sequence_length=L,
                                 dropout=0.0, attention_dropout=0.0)
    model = models.BertPretrainer(encoder)
    model({k: tf.zeros([1] + s.shape.as_list(), s.dtype) for k, s in spec.items()})
    return model


def steady_tokens_per_second(history: list[dict]) -> float:
    steady = history[1:]  # The first interval includes tracing and XLA compilation.
    return sum(r["real_tokens"] for r in steady) / sum(r["seconds"] for r in steady)


def final_mlm_loss(history: list[dict]) -> float:
    last = history[-2:]
    return float(np.mean([r["mlm_loss"] for r in last]))


def run(args) -> dict:
    L, K, M = args.max_length, 3, round(0.15 * args.max_length)
    raw, lengths, vocab = examples(args.documents, L, M, args.seed)
    plan = packing.plan(packing.histogram(lengths, L), max_length=L, max_sequences_per_pack=K,
                        algorithm="optimal", seed=args.seed)
    factor = plan.metrics["packing_factor"]
    # M of the packs: the most any pack needs (a few more than M, as the
    # paper's 79 vs 76 at L=512).
    packer = data.pack(max_length=L, max_sequences_per_pack=K, plan=plan, seed=args.seed,
                       truncate=True)
    packed = raw.apply(packer).cache()
    packed_M = int(packed.element_spec["masked_lm_positions"].shape[0])
    unpacked = raw.apply(data.pack(max_length=L, max_sequences_per_pack=1,
                                   max_predictions_per_pack=M, algorithm="none",
                                   seed=args.seed, truncate=True)).cache()
    rule = training.for_packing(args.micro, args.acc, factor)
    sequences_per_update = args.micro * args.acc
    updates = max(2 * args.log_every,
                  round(args.epochs * len(lengths) / sequences_per_update))
    updates -= updates % args.log_every
    packed_updates = updates  # Same sequences per update on average: same updates.

    models_ = {"unpacked": build(vocab, L, args.seed, unpacked.element_spec),
               "packed": build(vocab, L, args.seed, packed.element_spec)}
    models_["packed"].set_weights(models_["unpacked"].get_weights())
    trainers = {
        "unpacked": training.Trainer(models_["unpacked"], training.Lamb(args.learning_rate),
                                     micro_batch_size=args.micro, accumulation_steps=args.acc,
                                     log_every=args.log_every, progress=False),
        "packed": training.Trainer(models_["packed"], training.Lamb(args.learning_rate),
                                   micro_batch_size=rule.micro_batch_size,
                                   accumulation_steps=rule.accumulation_steps,
                                   log_every=args.log_every, progress=False),
    }
    streams = {"unpacked": unpacked.repeat(), "packed": packed.repeat()}
    histories = {"unpacked": [], "packed": []}
    start = time.perf_counter()
    for target in range(args.log_every, updates + 1, args.log_every):
        for name in ("unpacked", "packed"):
            histories[name] += trainers[name].fit(streams[name], target).history
            print(json.dumps({"run": name, **{k: round(v, 4) if isinstance(v, float) else v
                                              for k, v in histories[name][-1].items()}}),
                  file=sys.stderr, flush=True)
    for history in histories.values():
        seen = 0.0
        for record in history:
            seen += record["sequences"]
            record["sequences_seen"] = seen
    # One ratio per interleaved chunk after the first (compiling) one: the median
    # with its spread; above the plan's upper bound it is labelled as noise.
    rounds = [p["real_tokens_per_second"] / u["real_tokens_per_second"]
              for u, p in zip(histories["unpacked"][1:], histories["packed"][1:])]
    measured = SpeedupResult(tuple(rounds) or (float("nan"),),
                             plan.metrics["speedup_upper_bound"])
    speedup = measured.median
    loss = {name: final_mlm_loss(h) for name, h in histories.items()}
    return {
        "examples": int(len(lengths)), "max_length": L, "max_sequences_per_pack": K,
        "max_predictions": M, "max_predictions_packed": packed_M, "vocabulary": int(vocab),
        "efficiency": plan.metrics["efficiency"], "packing_factor": factor,
        "unpadded_efficiency": float(lengths.sum() / (len(lengths) * L)),
        "unpacked": {"micro_batch": args.micro, "accumulation": args.acc,
                     "updates": updates,
                     "tokens_per_second": steady_tokens_per_second(histories["unpacked"])},
        "packed": {"micro_batch": rule.micro_batch_size,
                   "accumulation": rule.accumulation_steps, "updates": packed_updates,
                   "expected_sequences_per_update": rule.sequences_per_update,
                   "tokens_per_second": steady_tokens_per_second(histories["packed"])},
        "realized_speedup": speedup, "speedup_over_packing_factor": speedup / factor,
        "realized_speedup_spread": list(measured.spread), "realized_speedup_rounds": rounds,
        "realized_speedup_is_noise": measured.is_noise,
        "realized_speedup_label": measured.label,
        "speedup_upper_bound": plan.metrics["speedup_upper_bound"],
        "final_mlm_loss_unpacked": loss["unpacked"], "final_mlm_loss_packed": loss["packed"],
        "final_loss_relative_difference": abs(loss["packed"] / loss["unpacked"] - 1.0),
        "curves": {name: [[round(r["sequences_seen"]), round(r["mlm_loss"], 4)] for r in h]
                   for name, h in histories.items()},
        "seconds": round(time.perf_counter() - start, 1),
    }


def markdown(result: dict, command: str) -> str:
    u, p = result["unpacked"], result["packed"]
    curve = lambda name: ", ".join(f"{s}: {l:.3f}" for s, l in result["curves"][name])
    return f"""# Training: packed vs unpacked BERT (benchmarks/training.py)

Command: `{command}`

Machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), TensorFlow {tf.__version__},
Keras {keras.__version__}. One run; both trainings alternate in chunks so load hits both alike.

Data: {result['examples']} BERT pre-training examples from Python standard-library
docstrings, L={result['max_length']}, M={result['max_predictions']} masked-LM slots per unpacked row
({result['max_predictions_packed']} per pack: the most any pack needs),
vocabulary compacted to the {result['vocabulary']} ids that occur. Unpadded efficiency
{result['unpadded_efficiency']:.3f}; optimal plan with K={result['max_sequences_per_pack']}:
efficiency {result['efficiency']:.4f}, packing factor {result['packing_factor']:.3f}.

Model: BertPretrainer, 2 layers, hidden 64, 2 heads, feed-forward 256; LAMB; XLA per-replica
step; identical initial weights.

| run | micro-batch (rows) | accumulation | updates | real tokens/s |
| --- | --- | --- | --- | --- |
| unpacked | {u['micro_batch']} sequences | {u['accumulation']} | {u['updates']} | {u['tokens_per_second']:.0f} |
| packed | {p['micro_batch']} packs | {p['accumulation']} (cut by the packing factor) | {p['updates']} | {p['tokens_per_second']:.0f} |

| metric | value | target |
| --- | --- | --- |
| realized speed-up (tokens/s packed / unpacked, median of {len(result['realized_speedup_rounds'])} interleaved chunks after warm-up) | {'NOISE (above the upper bound ' + format(result['speedup_upper_bound'], '.3f') + '), not a result: ' if result['realized_speedup_is_noise'] else ''}{result['realized_speedup']:.3f} (spread {result['realized_speedup_spread'][0]:.3f}-{result['realized_speedup_spread'][1]:.3f}) | >= 0.9 x packing factor = {0.9 * result['packing_factor']:.3f} |
| realized speed-up / packing factor | {result['speedup_over_packing_factor']:.3f} | >= 0.9 |
| final MLM loss, unpacked | {result['final_mlm_loss_unpacked']:.4f} | |
| final MLM loss, packed | {result['final_mlm_loss_packed']:.4f} | |
| relative difference | {100 * result['final_loss_relative_difference']:.2f}% | <= 2% |

MLM loss against sequences seen (sequences: loss, one point per log interval):

- unpacked: {curve('unpacked')}
- packed: {curve('packed')}

Wall time of both trainings: {result['seconds']} s.
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--micro", type=int, default=8, help="rows per micro-step")
    parser.add_argument("--acc", type=int, default=8, help="unpacked accumulation steps")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    parser.add_argument("--log-every", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: few documents/updates")
    parser.add_argument("--output", default=os.path.join("benchmarks", "results", "training.md"))
    args = parser.parse_args()
    if args.quick:
        args.documents, args.epochs, args.log_every = 40, 0.5, 2
    result = run(args)
    command = "python benchmarks/training.py " + " ".join(sys.argv[1:])
    if args.output:
        write_results(args.output, markdown(result, command.strip()))
    print(json.dumps({k: v for k, v in result.items() if k != "curves"}))


if __name__ == "__main__":
    main()
