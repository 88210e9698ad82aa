"""keras-hub adapters, dense vs segmented attention, on a generated suite of cases.

For each keras-hub family (`FAMILIES`: a small random backbone of each, 2
layers, width 64, 4 heads of 16; the families that ran dense before segmented
attention carried sinks, ALiBi, relative buckets and Gemma 4's layers, and
Llama as the reference) and each generated case, one process wraps the same
backbone twice, `from_keras_hub(..., attention_implementation="dense")` and
`"segmented"`, compiles a forward+backward step of each
(`tf.function(jit_compile=True)`: a loss on every real token's output,
gradients of every weight) and times them interleaved, alternating which
goes first. Reported per case: median milliseconds per step (min-max over
the rounds), the speed-up dense / segmented per round (median, min-max), the
`"auto"` choice, and per family the median and the **worst case** over the
suite.

The cases are generated, not chosen (`cases`): for every `L` of `--lengths`
and every seed of `--seeds`, the five length families below scaled to `L`
(or, with `--draw N`, `N` of them a seed, dealt in turn from a random
permutation per `L`, the same for every family of models), packed with `K = (16, 8, 12)[seed % 3]` sequences
at most a pack (so the sequences a pack vary with the seed as well as with
the lengths):

- `lognormal`: median `L/24`, sigma 1;
- `bimodal`: 70% around `L/48`, 30% around `L/6`;
- `zipf`: `8 * Zipf(1.8)` tokens, cut at `L` (so some fill a pack);
- `spikes`: 80% log-normal (median `L/32`), 20% exactly `L`;
- `windows`: documents log-normal around `L/2` cut into windows of
  `L / round(0.75 K)` (about `0.75 K` a pack: 12 at `K=16`); not in the
  drawn suite, `--shapes windows:N` cuts them into windows of `L / N`
  (`S = L / N`, `N` may be fractional), to probe the `"auto"` threshold
  (at `L=2048, K=16`: `N=2.5` gives the work ratio 1.17, `N=3` 1.41,
  `N=4` 1.77).

4,000 sequences each, packed by `bfd` with `K`; batches of `4096 / L`
packs drawn from the plan, `--batches` of them timed in each round (so the
batches whose packs the rows cannot hold, which run dense, count at their
rate). `S` (`segment_length`) is the window for `windows` and otherwise
the 99th percentile of the lengths rounded up to a power of two: where
sequences reach `L`, `S = L` and the segmented rows cost more than dense
attention, which `"auto"` knows from `L`, `K` and `S` alone.

Every family of `FAMILIES` has a segmented path; the first seven are the
ones that ran dense before (and Llama, the reference), then one family per
other adapter module (`tfpack/models/keras_hub/`), then every other
backbone those adapters take (28 in all: each registered adapter's
`backbone_names`).

Per family the report gives the median and the **worst** speed-up per `L`,
what `"auto"` gains (its choice's time against dense) and how often it
chose the slower path (by the median speed-up of the case: "auto slower").

Usage:
    python benchmarks/keras_hub_attention.py [--lengths 512,2048,4096]
        [--seeds 0,1,2] [--draw 1] [--families gpt_oss,gemma4,...]
        [--rounds 3] [--batches 2] [--append]
    python benchmarks/keras_hub_attention.py --report   # rewrite the .md
        from benchmarks/results/keras_hub_attention.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from lengths import position_ids  # noqa: E402
from lengths import sequence_ids_from_plan  # noqa: E402
from lengths import windowed_histogram  # noqa: E402
from results_file import write_results  # noqa: E402

HERE = pathlib.Path(__file__).parent
RAW = HERE / "results" / "keras_hub_attention.jsonl"
OUTPUT = HERE / "results" / "keras_hub_attention.md"
VOCAB = 1000
AUTO_NOISE = 0.1  # "auto slower" counts a choice slower by more than this
KS = (16, 8, 12)  # sequences a pack at most, by seed % 3
TOKENS_PER_BATCH = 4096
SEQUENCES = 4000
BATCHES = 4  # timed in each round
WINDOW = 128  # sliding windows of GPT-OSS's and Gemma 4's local layers
SHAPES = ("lognormal", "bimodal", "zipf", "spikes", "windows")
_SMALL = dict(num_layers=2, hidden_dim=64, intermediate_dim=128)
_GQA = dict(_SMALL, vocabulary_size=VOCAB, num_query_heads=4,
            num_key_value_heads=2)


def _families():
    import keras_hub

    m = keras_hub.models
    return {
        "gpt_oss": lambda: m.GptOssBackbone(
            num_experts=2, top_k=1, sliding_window=WINDOW, head_dim=16,
            **_GQA),
        "gemma4": lambda: m.Gemma4Backbone(
            image_size=16, head_dim=16, sliding_window_size=WINDOW,
            sliding_window_pattern=2, attention_logit_soft_cap=50.0, **_GQA),
        "bloom": lambda: m.BloomBackbone(vocabulary_size=VOCAB, num_heads=4,
                                         **_SMALL),
        "falcon": lambda: m.FalconBackbone(
            vocabulary_size=VOCAB, num_attention_heads=4, **_SMALL),
        "deberta_v3": lambda: m.DebertaV3Backbone(
            vocabulary_size=VOCAB, num_heads=4, max_sequence_length=512,
            bucket_size=256, **_SMALL),
        "xlnet": lambda: m.XLNetBackbone(vocabulary_size=VOCAB, num_heads=4,
                                         **_SMALL),
        "llama": lambda: m.LlamaBackbone(**_GQA),
        "bert": lambda: m.BertBackbone(vocabulary_size=VOCAB, num_heads=4,
                                       max_sequence_length=4096, **_SMALL),
        "gpt2": lambda: m.GPT2Backbone(vocabulary_size=VOCAB, num_heads=4,
                                       max_sequence_length=4096, **_SMALL),
        "gpt_neo_x": lambda: m.GPTNeoXBackbone(
            vocabulary_size=VOCAB, num_heads=4, max_sequence_length=4096,
            **_SMALL),
        "gemma": lambda: m.GemmaBackbone(
            head_dim=16, use_sliding_window_attention=True,
            sliding_window_size=WINDOW, **_GQA),
        "phi3": lambda: m.Phi3Backbone(**_GQA),
        "roformer_v2": lambda: m.RoformerV2Backbone(
            vocabulary_size=VOCAB, num_heads=4, head_size=16, **_SMALL),
        "esm": lambda: m.ESMBackbone(vocabulary_size=VOCAB, num_heads=4,
                                     **_SMALL),
        "smollm3": lambda: m.SmolLM3Backbone(
            vocabulary_size=VOCAB, num_attention_heads=4,
            num_key_value_heads=2, hidden_dim=64, intermediate_dim=128,
            num_layers=2, max_position_embeddings=4096,
            layer_norm_epsilon=1e-6, attention_bias=False,
            attention_dropout=0.0, rope_layer_enabled_list=[True, True],
            layer_types=["attention", "attention"], mlp_bias=False,
            rope_theta=10000.0, partial_rotary_factor=1.0),
        # The other backbones of the adapters above (one adapter each, the
        # same segmented path, each backbone's own layers and options).
        "electra": lambda: m.ElectraBackbone(
            vocab_size=VOCAB, embedding_dim=64, num_heads=4,
            max_sequence_length=4096, **_SMALL),
        "roberta": lambda: m.RobertaBackbone(
            vocabulary_size=VOCAB, num_heads=4, max_sequence_length=4096,
            **_SMALL),
        "xlm_roberta": lambda: m.XLMRobertaBackbone(
            vocabulary_size=VOCAB, num_heads=4, max_sequence_length=4096,
            **_SMALL),
        "distil_bert": lambda: m.DistilBertBackbone(
            vocabulary_size=VOCAB, num_heads=4, max_sequence_length=4096,
            **_SMALL),
        "albert": lambda: m.AlbertBackbone(
            vocabulary_size=VOCAB, embedding_dim=64, num_heads=4,
            max_sequence_length=4096, **_SMALL),
        "mistral": lambda: m.MistralBackbone(sliding_window=WINDOW, **_GQA),
        "qwen2": lambda: m.Qwen2Backbone(
            use_sliding_window_attention=True, sliding_window_size=WINDOW,
            tie_word_embeddings=False, **_GQA),
        "qwen3": lambda: m.Qwen3Backbone(
            head_dim=16, sliding_window_size=WINDOW,
            tie_word_embeddings=False, **_GQA),
        "mixtral": lambda: m.MixtralBackbone(
            num_experts=2, top_k=1, sliding_window=WINDOW, **_GQA),
        "qwen_moe": lambda: m.QwenMoeBackbone(
            moe_intermediate_dim=64, shared_expert_intermediate_dim=128,
            num_experts=2, top_k=1, **_GQA),
        "qwen3_moe": lambda: m.Qwen3MoeBackbone(
            head_dim=16, moe_intermediate_dim=64, num_experts=2, top_k=1,
            **_GQA),
        "gemma3": lambda: m.Gemma3Backbone(
            image_size=16, head_dim=16, use_sliding_window_attention=True,
            sliding_window_size=WINDOW, **_GQA),
        "opt": lambda: m.OPTBackbone(vocabulary_size=VOCAB, num_heads=4,
                                     max_sequence_length=4096, **_SMALL),
    }


FAMILIES = ("gpt_oss", "gemma4", "bloom", "falcon", "deberta_v3", "xlnet",
            "llama", "bert", "gpt2", "gpt_neo_x", "gemma", "phi3",
            "roformer_v2", "esm", "smollm3", "electra", "roberta",
            "xlm_roberta", "distil_bert", "albert", "mistral", "qwen2",
            "qwen3", "mixtral", "qwen_moe", "qwen3_moe", "gemma3", "opt")


def k_of(seed):
    """Sequences a pack at most (`K`) of the cases of `seed`."""
    return KS[seed % len(KS)]


def lengths_of(shape, length, seed):
    """`SEQUENCES` lengths (1..L) of one generated family, or for `windows`
    the documents' lengths before they are cut."""
    rng = np.random.default_rng([seed, SHAPES.index(shape), length])

    def lognormal(median, sigma, n):
        return rng.lognormal(np.log(median), sigma, n)

    n = SEQUENCES
    if shape == "lognormal":
        values = lognormal(length / 24, 1.0, n)
    elif shape == "bimodal":
        short = int(0.7 * n)
        values = np.r_[lognormal(length / 48, 0.3, short),
                       lognormal(length / 6, 0.3, n - short)]
    elif shape == "zipf":
        values = np.minimum(8 * rng.zipf(1.8, n), length)
    elif shape == "spikes":
        spikes = n // 5
        values = np.r_[lognormal(length / 32, 1.0, n - spikes),
                       np.full(spikes, length)]
    else:  # windows: documents, cut below
        values = lognormal(length / 2, 1.0, n // 4)
    return np.clip(np.rint(values), 1, None).astype(int)


def cases(lengths, seeds, shapes=SHAPES, draw=None):
    """Every generated case: `(shape, L, seed, K, S, histogram)`; with
    `draw`, that many shapes per `L` and seed, drawn from both."""
    for length in lengths:
        for seed in seeds:
            chosen = list(shapes)
            if draw:  # a permutation per L, dealt out to the seeds in turn
                order = np.random.default_rng([length, 7]).permutation(
                    len(chosen))
                chosen = [chosen[order[(seed * draw + j) % len(chosen)]]
                          for j in range(min(draw, len(chosen)))]
            k = k_of(seed)
            for shape in chosen:
                windows = shape.startswith("windows")
                values = lengths_of(shape.split(":")[0], length, seed)
                window = int(length // windows_a_pack(shape, k)) \
                    if windows else length
                histogram = windowed_histogram(values, length, window)
                cumulative = np.cumsum(histogram) / histogram.sum()
                p99 = int(np.searchsorted(cumulative, 0.99)) + 1
                s = window if windows else min(
                    length, 1 << (p99 - 1).bit_length())
                yield shape, length, seed, k, s, histogram


def windows_a_pack(shape, k):
    """Windows a pack of the `windows` shape (`round(0.75 K)`), or of
    `windows:N` (`N`, a number: probes of the `"auto"` rule's threshold,
    the window `L / N` and `S` with it).

    >>> windows_a_pack("windows", 16), windows_a_pack("windows:4", 16)
    (12, 4.0)
    >>> windows_a_pack("windows:2.5", 16)
    2.5
    """
    _, _, count = shape.partition(":")
    return float(count) if count else round(0.75 * k)


def batches_of(histogram, length, seed, k, count=BATCHES):
    """`count` batches of packed features drawn from `bfd`'s plan."""
    from tfpack.packing import plan

    packing = plan(histogram, length, k, algorithm="bfd")
    rng = np.random.default_rng(seed)
    result = []
    for _ in range(count):
        ids = sequence_ids_from_plan(packing, max(1, TOKENS_PER_BATCH // length),
                                     rng)
        real = ids > 0
        result.append({
            "input_ids": (rng.integers(1, VOCAB, ids.shape) * real
                          ).astype("int32"),
            "sequence_ids": ids, "position_ids": position_ids(ids)})
    return result


def compiled_step(adapter):
    """A jit-compiled forward+backward step; returns a blocking callable."""
    import tensorflow as tf

    variables = adapter.backbone.trainable_variables

    @tf.function(jit_compile=True)
    def step(features):
        weights = tf.cast(features["sequence_ids"] > 0, "float32")[..., None]
        with tf.GradientTape() as tape:
            out = adapter(features)["sequence_output"]
            loss = tf.reduce_sum(tf.square(out) * weights)
        grads = [g for g in tape.gradient(loss, variables) if g is not None]
        return loss + tf.add_n([tf.reduce_sum(g) for g in grads]) * 0.0

    def run(batches):
        for features in batches:
            step({k: tf.constant(v) for k, v in features.items()}).numpy()
    return run


def time_pair(steps, batches, rounds):
    """Interleaved timings (seconds per batch, all `batches` each round) of
    each step, alternating the order."""
    for step in steps.values():  # compile, then warm up
        step(batches[:1])
    times = {name: [] for name in steps}
    for r in range(rounds):
        for name in (list(steps) if r % 2 == 0 else list(steps)[::-1]):
            start = time.perf_counter()
            steps[name](batches)
            times[name].append((time.perf_counter() - start) / len(batches))
    return times


def fallback_fraction(batches, length, k, s):
    """Fraction of `batches` whose packs the segmented rows cannot hold."""
    from tfpack.layers.segmented_attention import segment_layout
    from tfpack.layers.segmented_attention import segment_tiers

    tiers = segment_tiers(length, k, s)
    return float(np.mean([not bool(segment_layout(b["sequence_ids"], tiers,
                                                  k)["fits"])
                          for b in batches]))


def measure(families, lengths, seeds, rounds, shapes=SHAPES, done=(),
            draw=None, batches=BATCHES):
    """Yields one result dict per (family, case), skipping the
    `(family, shape, L, seed)` in `done`."""
    import keras

    from tfpack.layers.attention_implementation import choose_implementation
    from tfpack.layers.segmented_attention import segment_work
    from tfpack.models import from_keras_hub

    builders = _families()
    suite = list(cases(lengths, seeds, shapes, draw))
    for family in families:
        if all((family, c[0], c[1], c[2]) in done for c in suite):
            continue
        keras.utils.set_random_seed(0)
        backbone = builders[family]()
        steps = {}  # compiled steps: dense per L, segmented per (L, K, S)
        for shape, length, seed, k, s, histogram in suite:
            if (family, shape, length, seed) in done:
                continue
            data = batches_of(histogram, length, seed, k, batches)
            if length not in steps:
                steps[length] = compiled_step(from_keras_hub(
                    backbone, attention_implementation="dense"))
            if (length, k, s) not in steps:
                steps[length, k, s] = compiled_step(from_keras_hub(
                    backbone, attention_implementation="segmented",
                    max_sequences_per_pack=k, segment_length=s))
            times = time_pair({"dense": steps[length],
                               "segmented": steps[length, k, s]}, data,
                              rounds)
            yield {
                "family": family, "shape": shape, "L": length, "seed": seed,
                "K": k, "S": s,
                "sequences_per_pack": float(np.mean(
                    [b["sequence_ids"].max(axis=1).mean() for b in data])),
                "work_ratio": length ** 2 / segment_work(length, k, s),
                "fallback": fallback_fraction(data, length, k, s),
                "auto": choose_implementation(
                    "auto", backend="tensorflow", length=length,
                    max_sequences_per_pack=k, segment_length=s),
                "dense": times["dense"], "segmented": times["segmented"],
                "batches": len(data),
            }


def _spread(values, scale=1.0, digits=0):
    values = [v * scale for v in values]
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}-{max(values):.{digits}f})")


def _speedups(result):
    return [d / s for d, s in zip(result["dense"], result["segmented"])]


def _with_current_auto(result):
    """`result` with `"auto"` as the current rule picks it (it depends on
    `L`, `K` and `S` only; rows measured under an older rule are re-judged)."""
    from tfpack.layers.attention_implementation import choose_implementation

    return dict(result, auto=choose_implementation(
        "auto", backend="tensorflow", length=result["L"],
        max_sequences_per_pack=result.get("K", 16),
        segment_length=result["S"]))


# The runs before each raw result carried its command (the first 48 results).
EARLIER_COMMANDS = (
    "`python benchmarks/keras_hub_attention.py --lengths 512,2048,4096 "
    "--seeds 0,1,2 --draw 1 --rounds 3 --batches 2` (GPT-OSS, its first 8 "
    "cases), then `... --batches 1 --append` for the rest (Gemma 4, BLOOM "
    "at L=512 and 2,048; Falcon, Llama, DeBERTa-v3, XLNet at L=512 and "
    "2,048), and `--lengths 2048 --shapes windows --seeds 0 --batches 1 "
    "--append` for all seven")


# Rows removed from the raw file and measured again (said in the report).
SUPERSEDED = (
    "The rows of BERT, ELECTRA, RoBERTa, XLM-R, DistilBERT, GPT-2, OPT and "
    "GPT-NeoX are measured after their adapters' dense attention took "
    "query-first scores, and those of ALBERT, ESM and RoFormer-v2 after "
    "theirs stopped calling keras's TensorFlow `dot_product_attention` "
    "(issue 23; `benchmarks/keras_hub_dense.py`: the dense step 1.0-1.7x "
    "faster at L=2,048, 1.2-2.5x at 4,096); the 48 rows measured before, "
    "against the slower dense steps, were removed (they are in git "
    "history: commits 2e331ab and 9896e00). With them, segmented looked "
    "1.46-2.24x faster at work ratio 0.98 (lognormal, K=8, S=1,024) for "
    "the first 8, where `\"auto\"` keeps dense (now 0.81-0.99x; "
    "RoFormer-v2's 1.19x there, spread 0.95-1.45x at load 11, was 0.92x "
    "alone), and 12-22x at L=4,096 for the last 3. The 28 target cases "
    "at L=4,096 were run a second time in one run (both rows kept): "
    "per family the speed-up moved by 0.4x-2.7x between the runs (ALBERT "
    "13.7x then 5.05x, OPT 17.5x then 10.8x, GPT-2 13.0x then 6.2x, "
    "Gemma 3 5.74x then 2.15x), dense steps at L=4,096 taking 1-3x as long "
    "from run to run: their 256 MB score tensors share the memory "
    "bandwidth with the machine's other jobs. Read one row at L=4,096 to "
    "within a factor of 2 or so; the worst case counts both runs.")


def _median_speedup(result):
    return statistics.median(_speedups(result))


def _auto_slower(result):
    """`"auto"` picked the slower path by more than `AUTO_NOISE`."""
    up = _median_speedup(result)
    return ((up < 1 - AUTO_NOISE and result["auto"] == "segmented")
            or (up > 1 + AUTO_NOISE and result["auto"] == "dense"))


def _target(result):
    """The issue's target case: `windows` at `K=16`, about 12 a pack."""
    return result["shape"] == "windows" and result.get("K", 16) == 16


def _case(result):
    return (f"{result['family']} {result['shape']} L={result['L']} "
            f"K={result.get('K', 16)} S={result['S']}")


def _count(n, noun):
    """`"1 case"`, `"2 cases"`, `"2 families"`."""
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def _commands(results):
    """Markdown lines: each command that produced `results`, with its
    families and number of cases."""
    lines = []
    earlier = [r for r in results if "command" not in r]
    if earlier:
        lines.append(f"- {_count(len(earlier), 'case')}: {EARLIER_COMMANDS}.")
    for command in dict.fromkeys(r["command"] for r in results
                                 if "command" in r):
        mine = [r for r in results if r.get("command") == command]
        lines.append(f"- {_count(len(mine), 'case')}: `{command}`.")
    return lines


def _gaps(results, families, lengths):
    """One sentence: the families without a windows case (~0.75 K
    sequences a pack) at one of `lengths` from 2,048 on."""
    missing = []
    for length in (n for n in lengths if n >= 2048):
        lack = [f for f in families
                if not any(r["family"] == f and r["L"] == length
                           and r["shape"] == "windows" for r in results)]
        if lack:
            missing.append(f"L={length}: {', '.join(lack)}")
    return ("Families without a windows case: " + "; ".join(missing) + "."
            if missing else "Every family has a windows case at L=2,048 "
            "and above.")


def report(results):
    """The markdown of `results` (dicts of `measure`, each with the
    command that produced it, or none for the earliest)."""
    import keras
    import keras_hub
    import tensorflow as tf

    results = [_with_current_auto(r) for r in results]

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    families = list(dict.fromkeys(r["family"] for r in results))
    lengths = sorted({r["L"] for r in results})
    summary = []
    for family in families:
        mine = [r for r in results if r["family"] == family]
        cells = [family]
        for length in lengths:
            ups = [_median_speedup(r) for r in mine if r["L"] == length]
            cells.append(f"{statistics.median(ups):.2f}x / {min(ups):.2f}x "
                         f"({len(ups)})" if ups else "-")
        # "auto": segmented where it picks segmented, dense (1.0) elsewhere.
        auto = [_median_speedup(r) if r["auto"] == "segmented" else 1.0
                for r in mine]
        cells.append(f"{statistics.median(auto):.2f}x / {min(auto):.2f}x")
        cells.append(f"{sum(map(_auto_slower, mine))} of {len(mine)}")
        for length in (2048, 4096):
            target = [_median_speedup(r) for r in mine
                      if r["L"] == length and _target(r)]
            cells.append(f"{min(target):.2f}x" if target else "-")
        bounded = [_median_speedup(r) for r in mine
                   if r["auto"] == "segmented"]
        cells.append(f"{min(bounded):.2f}x" if bounded else "-")
        summary.append("| " + " | ".join(cells) + " |")

    def worst(chosen, what):
        if not chosen:
            return f"{what}: not measured"
        low = min(chosen, key=_median_speedup)
        ups = sorted(_median_speedup(r) for r in chosen)
        return (f"{what} ({_count(len(chosen), 'case')}, "
                f"{_count(len({r['family'] for r in chosen}), 'family')}): "
                f"worst **{ups[0]:.2f}x** ({_case(low)}), median "
                f"{statistics.median(ups):.2f}x, best {ups[-1]:.2f}x")

    slower = [r for r in results if _auto_slower(r)]
    kept_dense = [r for r in results if r["auto"] == "dense"]
    auto_all = [_median_speedup(r) if r["auto"] == "segmented" else 1.0
                for r in results]
    closest = min(results, key=lambda r: abs(_median_speedup(r) - 1)
                  if r["auto"] == "dense" else float("inf"))
    rows = []
    for r in results:
        rows.append(
            f"| {r['family']} | {r['shape']} | {r['L']} | {r['seed']} | "
            f"{r.get('K', 16)} | {r['S']} | {r['sequences_per_pack']:.1f} | "
            f"{r['work_ratio']:.2f} | {r['fallback']:.2f} | "
            f"{_spread(r['dense'], 1e3)} | "
            f"{_spread(r['segmented'], 1e3)} | "
            f"{_spread(_speedups(r), digits=2)}x | {r['auto']} |")
    return "\n".join([
        "# keras-hub adapters: dense vs segmented on a generated suite "
        "(`benchmarks/keras_hub_attention.py`)", "",
        f"{len(results)} cases, {len(families)} families. Commands (one raw "
        "file, `results/keras_hub_attention.jsonl`, each run added with "
        "`--append`; `--report` rewrites this file from it):", "",
        *_commands(results), "", SUPERSEDED, "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores shared "
        f"with other jobs (load average {load:.1f} when this was written; "
        "2-11 during the runs); tensorflow "
        f"{tf.__version__}, keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}. Each family: a random backbone of 2 "
        "layers, width 64, 4 query heads of 16, vocabulary 1,000 (the "
        "grouped-query decoders, GPT-OSS, Gemma 4, Gemma, Gemma 3, Llama, "
        "Mistral, Mixtral, Qwen 2 and 3, the Qwen MoEs, Phi-3 and SmolLM3: "
        "2 key/value heads; GPT-OSS and Gemma 4: one local layer with a "
        f"window of {WINDOW} and one global; Gemma, Gemma 3, Mistral, "
        f"Mixtral, Qwen 2 and 3: windows of {WINDOW} (on their local "
        "layers); Gemma 4's soft cap 50; DeBERTa's 256 buckets; "
        "GPT-OSS, Mixtral and the Qwen MoEs: 2 experts, top 1). "
        "Forward+backward step under XLA (`tf.function(jit_compile=True)`), "
        "dense and segmented interleaved, alternating which goes first; "
        "milliseconds per batch (each round times `--batches` batches), "
        "median (min-max) over the rounds; speed-up = dense / segmented per "
        f"round. K = {KS} by seed; batches of {TOKENS_PER_BATCH} tokens "
        "(4096 / L packs); the cases are generated (see the script's "
        "docstring): `windows` at seed 0 is the target case, documents cut "
        "into windows of L/12 (S = 170 at L=2,048, 341 at 4,096), about 12 "
        "sequences a pack. CPU figures; GPU figures: pending (no GPU with "
        "TensorFlow was lent to these runs).", "",
        "## Worst cases", "",
        "- " + worst([r for r in results if r["L"] == 2048 and _target(r)],
                     "The target case, L=2,048, `windows`, K=16, about 12 "
                     "sequences a pack")
        + " (the target: >= 1.5x).",
        "- " + worst([r for r in results if r["L"] == 4096 and _target(r)],
                     "The same at L=4,096") + ".",
        "- " + worst([r for r in results if r["auto"] == "segmented"],
                     "Every case where `\"auto\"` picks segmented") + ".",
        f"- `\"auto\"` picked the slower path by more than "
        f"{AUTO_NOISE:.0%}: {len(slower)} of {len(results)} cases"
        + (" (" + "; ".join(f"{_case(r)}: {_median_speedup(r):.2f}x, "
                            f"{r['auto']}" for r in slower) + ")"
           if slower else "")
        + f"; its speed-up over dense, worst {min(auto_all):.2f}x; "
        + (f"where it keeps dense, segmented was at best "
           f"{max(_median_speedup(r) for r in kept_dense):.2f}x"
           if kept_dense else "it keeps dense on no case")
        + f" (closest to 1: {_case(closest)}, {_median_speedup(closest):.2f}x)"
        ".",
        f"- {_gaps(results, families, lengths)}", "",
        "## Per family: median / worst case of the speed-up", "",
        "Per `L`: over every generated case. `auto`: the speed-up of "
        "`\"auto\"` (segmented where it picks segmented, 1.0 where it "
        "picks dense), over all cases. `auto slower`: cases where the path "
        "`\"auto\"` picked was the slower one by more than "
        f"{AUTO_NOISE:.0%} (median speed-up below {1 - AUTO_NOISE:.1f} and "
        f"segmented picked, or above {1 + AUTO_NOISE:.1f} and dense picked); "
        "`\"auto\"` is judged by the current rule (`L`, `K`, `S`). Per `L`: "
        "median / worst (cases). `target`: the speed-up of the target case "
        "(`windows`, K=16, about 12 sequences a pack; >= 1.5x wanted at "
        "L=2,048). `auto segmented worst`: the worst speed-up over the "
        "cases where `\"auto\"` picks segmented.", "",
        "| family | " + " | ".join(f"L={n}" for n in lengths)
        + " | auto | auto slower | target L=2048 | target L=4096 "
        "| auto segmented worst |",
        "| --- | " + " | ".join("---" for _ in lengths)
        + " | --- | --- | --- | --- | --- |",
        *summary, "",
        "## Every case", "",
        "| family | lengths | L | seed | K | S | sequences a pack | L^2 / "
        "segment work | batches dense | dense ms | segmented ms | speed-up "
        "| auto |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |",
        *rows, ""])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,2048,4096")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=BATCHES,
                        help="batches timed in each round")
    parser.add_argument("--draw", type=int, default=0,
                        help="shapes drawn per L and seed (0: all)")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--raw", type=pathlib.Path, default=RAW)
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    parser.add_argument("--append", action="store_true",
                        help="add to --raw (skipping the cases it has) "
                             "instead of starting it over")
    parser.add_argument("--report", action="store_true",
                        help="only rewrite --output from --raw")
    args = parser.parse_args()
    command = ("python benchmarks/keras_hub_attention.py --lengths "
               f"{args.lengths} --seeds {args.seeds} --draw {args.draw} "
               f"--rounds {args.rounds} --batches {args.batches}")
    if args.shapes != ",".join(SHAPES):
        command += f" --shapes {args.shapes}"
    if args.families != ",".join(FAMILIES):
        command += f" --families {args.families}"
    if args.append:
        command += " --append"
    if not args.report:
        done = set()
        if args.append and args.raw.exists():
            done = {(r["family"], r["shape"], r["L"], r["seed"]) for r in (
                json.loads(line) for line in args.raw.read_text().splitlines()
                if line.strip())}
        with open(args.raw, "a" if args.append else "w") as raw:
            for result in measure(
                    args.families.split(","),
                    [int(n) for n in args.lengths.split(",")],
                    [int(n) for n in args.seeds.split(",")], args.rounds,
                    args.shapes.split(","), done, args.draw or None,
                    args.batches):
                raw.write(json.dumps(dict(result, command=command)) + "\n")
                raw.flush()
                print(result["family"], result["shape"], result["L"],
                      f"{statistics.median(_speedups(result)):.2f}x",
                      flush=True)
    results = [json.loads(line) for line in args.raw.read_text().splitlines()
               if line.strip()]
    write_results(args.output, report(results))


if __name__ == "__main__":
    main()
