"""keras-hub adapters' dense attention: tfpack's query-first scores vs the
layer's own attention call.

The adapters of keras `MultiHeadAttention` with dropout (BERT, ELECTRA,
RoBERTa, XLM-R, DistilBERT, GPT-2, OPT) and of GPT-NeoX compute dense
attention with query-first scores (`bquh,bkuh->buqk`,
`tfpack.models.keras_hub.encoders.dense_attention`) instead of calling the
layer's own attention, whose key-first `aecd,abcd->acbe` compiles under XLA
on CPU to a slower batched matmul (issue 23). This script times both in one
process: the same backbone wrapped by `from_keras_hub(...,
attention_implementation="dense")`, once as shipped and once with the
layer's own call patched back in (`keras` below), each a jit-compiled
forward+backward step of `keras_hub_attention.compiled_step`, interleaved,
alternating which goes first, on the batches of one generated case of
`keras_hub_attention` (lognormal lengths at `L`, seed 1, `K = 8`).
Reported: median ms per step (min-max) and the speed-up keras / tfpack per
round (median, min-max).

Usage:
    python benchmarks/keras_hub_dense.py [--families bert,gpt2,gpt_neo_x]
        [--length 2048] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_hub_attention as suite  # noqa: E402

OUTPUT = pathlib.Path(__file__).parent / "results" / "keras_hub_dense.md"


def _keras_calls():
    """The adapters' dense attention as the layers' own calls (before)."""
    def encoder(mha, x, mask, training):
        return mha(query=x, value=x, attention_mask=mask, training=training)

    def neox(attention, query, key, value, mask, training):
        return attention._compute_attention(query, key, value, mask,
                                            training=training)
    return encoder, neox


def measure(families, length, rounds):
    """Yields `(family, {"keras": seconds, "tfpack": seconds})` per family."""
    import keras

    from tfpack.models import from_keras_hub
    from tfpack.models.keras_hub import encoders
    from tfpack.models.keras_hub import gpt_neo_x

    shape, _, seed, k, _, histogram = next(iter(suite.cases([length], [1],
                                                            ("lognormal",))))
    data = suite.batches_of(histogram, length, seed, k, 1)
    shipped = encoders.dense_attention, gpt_neo_x.dense_attention
    builders = suite._families()
    for family in families:
        keras.utils.set_random_seed(0)
        backbone = builders[family]()
        steps = {}
        for name, (encoder, neox) in (("keras", _keras_calls()),
                                      ("tfpack", shipped)):
            encoders.dense_attention, gpt_neo_x.dense_attention = encoder, neox
            try:
                steps[name] = suite.compiled_step(from_keras_hub(
                    backbone, attention_implementation="dense"))
                steps[name](data)  # traced under this choice
            finally:
                encoders.dense_attention, gpt_neo_x.dense_attention = shipped
        yield family, suite.time_pair(steps, data, rounds)


def report(rows, command, length):
    import keras
    import keras_hub
    import tensorflow as tf

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# keras-hub adapters: query-first dense attention vs the layer's "
        "own call (`benchmarks/keras_hub_dense.py`)", "",
        f"Command: `{command}`.", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared "
        f"with other jobs (load average {load:.1f} when this was written); "
        f"tensorflow {tf.__version__}, keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}. Backbones of `keras_hub_attention.py` "
        "(2 layers, width 64, 4 heads of 16, keras-hub's default dropout: "
        "0.1 for the MultiHeadAttention families, 0 for GPT-NeoX, whose "
        "TensorFlow path is key-first either way); one batch of {suite.TOKENS_PER_BATCH} tokens "
        f"(L={length}, lognormal lengths, seed 1, K=8); forward+backward "
        "under XLA, interleaved. `keras`: the layer's own attention call "
        "(the adapters before issue 23); `tfpack`: query-first scores.", "",
        "| family | keras ms | tfpack ms | keras / tfpack |",
        "| --- | --- | --- | --- |"]
    for family, times in rows:
        ratios = [a / b for a, b in zip(times["keras"], times["tfpack"])]
        lines.append(
            f"| {family} | {suite._spread(times['keras'], 1e3)} | "
            f"{suite._spread(times['tfpack'], 1e3)} | "
            f"{suite._spread(ratios, digits=2)}x |")
    return "\n".join(lines + [""])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="bert,gpt2,gpt_neo_x")
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    args = parser.parse_args()
    command = (f"python benchmarks/keras_hub_dense.py --families "
               f"{args.families} --length {args.length} --rounds "
               f"{args.rounds}")
    rows = []
    for family, times in measure(args.families.split(","), args.length,
                                 args.rounds):
        rows.append((family, times))
        print(family, f"{statistics.median(times['keras']) * 1e3:.0f} ms",
              f"{statistics.median(times['tfpack']) * 1e3:.0f} ms",
              flush=True)
    args.output.write_text(report(rows, command, args.length))


if __name__ == "__main__":
    main()
