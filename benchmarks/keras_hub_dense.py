"""keras-hub adapters' dense attention: tfpack's query-first scores vs the
layer's own attention call.

The adapters of keras `MultiHeadAttention` (BERT, ELECTRA, RoBERTa, XLM-R,
DistilBERT, ALBERT, GPT-2, OPT), of GPT-NeoX and of RoFormer-v2 and ESM
compute dense attention with query-first scores (`bquh,bkuh->buqk`,
`tfpack.models.keras_hub.encoders.dense_attention` and the others) instead
of calling the layer's own attention: keras's key-first `aecd,abcd->acbe`
(with dropout) compiles under XLA on CPU to a slower batched matmul, and
keras's TensorFlow `dot_product_attention` (ALBERT without dropout,
RoFormer-v2, ESM) was slower too, most at L=4,096 (issue 23). This script
times both in one process: the same backbone wrapped by `from_keras_hub(...,
attention_implementation="dense")`, once as shipped and once with the
layer's own call patched back in (`keras` below), each a jit-compiled
forward+backward step of `keras_hub_attention.compiled_step`, interleaved,
alternating which goes first, on the batches of one generated case of
`keras_hub_attention` (lognormal lengths at `L`, seed 1, `K = 8`).
Reported: median ms per step (min-max) and the speed-up keras / tfpack per
round (median, min-max).

Usage:
    python benchmarks/keras_hub_dense.py [--families bert,gpt2,gpt_neo_x]
        [--lengths 2048,4096] [--rounds 5] [--output results/keras_hub_dense.md]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_hub_attention as suite  # noqa: E402
from results_file import write_results  # noqa: E402

OUTPUT = pathlib.Path(__file__).parent / "results" / "keras_hub_dense.md"


def _keras_calls():
    """The adapters' dense attention as the layers' own calls (before)."""
    def encoder(mha, x, mask, training):
        return mha(query=x, value=x, attention_mask=mask, training=training)

    def neox(attention, query, key, value, mask, training):
        return attention._compute_attention(query, key, value, mask,
                                            training=training)

    def roformer(query, key, value, mask):  # RoFormer-v2 and ESM
        from keras import ops

        return ops.dot_product_attention(query, key, value,
                                         mask=ops.expand_dims(mask, 1))
    return encoder, neox, roformer


def measure(families, lengths, rounds):
    """Yields `(family, L, {"keras": seconds, "tfpack": seconds})` per
    family and `L`."""
    import keras

    from tfpack.models import from_keras_hub
    from tfpack.models.keras_hub import encoders
    from tfpack.models.keras_hub import gpt_neo_x
    from tfpack.models.keras_hub import roformer

    modules = (encoders, gpt_neo_x, roformer)
    shipped = tuple(module.dense_attention for module in modules)
    builders = suite._families()
    for family, length in ((f, n) for f in families for n in lengths):
        _, _, seed, k, _, histogram = next(iter(suite.cases(
            [length], [1], ("lognormal",))))
        data = suite.batches_of(histogram, length, seed, k, 1)
        keras.utils.set_random_seed(0)
        backbone = builders[family]()
        steps = {}
        for name, functions in (("keras", _keras_calls()),
                                ("tfpack", shipped)):
            for module, function in zip(modules, functions):
                module.dense_attention = function
            try:
                steps[name] = suite.compiled_step(from_keras_hub(
                    backbone, attention_implementation="dense"))
                steps[name](data)  # traced under this choice
            finally:
                for module, function in zip(modules, shipped):
                    module.dense_attention = function
        yield family, length, suite.time_pair(steps, data, rounds)


def report(rows, command):
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
        "0.1 for the MultiHeadAttention families but ALBERT, 0 for ALBERT "
        "and GPT-NeoX); one batch of {suite.TOKENS_PER_BATCH} tokens "
        "(lognormal lengths at L, seed 1, K=8); forward+backward "
        "under XLA, interleaved. `keras`: the layer's own attention call "
        "(the adapters before issue 23); `tfpack`: query-first scores.", "",
        "| family | L | keras ms | tfpack ms | keras / tfpack |",
        "| --- | --- | --- | --- | --- |"]
    for family, length, times in rows:
        ratios = [a / b for a, b in zip(times["keras"], times["tfpack"])]
        lines.append(
            f"| {family} | {length} | {suite._spread(times['keras'], 1e3)} | "
            f"{suite._spread(times['tfpack'], 1e3)} | "
            f"{suite._spread(ratios, digits=2)}x |")
    return "\n".join(lines + [""])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="bert,gpt2,gpt_neo_x")
    parser.add_argument("--lengths", default="2048")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    args = parser.parse_args()
    command = (f"python benchmarks/keras_hub_dense.py --families "
               f"{args.families} --lengths {args.lengths} --rounds "
               f"{args.rounds}")
    rows = []
    for family, length, times in measure(
            args.families.split(","),
            [int(n) for n in args.lengths.split(",")], args.rounds):
        rows.append((family, length, times))
        print(family, length,
              f"{statistics.median(times['keras']) * 1e3:.0f} ms",
              f"{statistics.median(times['tfpack']) * 1e3:.0f} ms",
              flush=True)
    write_results(args.output, report(rows, command))


if __name__ == "__main__":
    main()
