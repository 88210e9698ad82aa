"""The two-length planner against its bound and against seqio's greedy packing (issue 35, item 4).

Each case is a joint histogram ``counts[i, j]`` of (input length i + 1, target
length j + 1) planned for packs of ``Le`` encoder and ``Ld`` decoder tokens and
at most ``K`` pairs:

- generated, 1e6 pairs, log-normal lengths (sigma 0.6) as fractions of the limits:
  ``lognormal`` (input median 0.15 Le, target 0.10 Ld, independent);
  ``correlated`` (0.15 Le and 0.12 Ld, correlation 0.8);
  ``bimodal`` (70% long inputs with short targets, 0.25 Le / 0.05 Ld; 30% short
  inputs with long targets, 0.05 Le / 0.30 Ld: a planner should pair them);
  ``balanced`` (0.2 Le and 0.2 Ld, correlation 0.5: both rows bind at once);
- real (`pair_corpora.py`): ``debian`` descriptions and synopses, stdlib
  ``docstrings`` bodies and first lines, and a generated ``squad_like``
  (paragraph + question, answer); as they are and repeated to about 1e6 pairs
  (``x N``); lengths past a limit are cut to it, as seqio trims.

Per case: packs of ``greedy`` (seqio's next fit in input order), ``ffd`` (first
fit decreasing; skipped past 20,000 non-empty cells, where it takes over 10 s),
``optimal``; the proven lower bound and its kind; the gap of ``optimal`` to it;
CPU seconds (`time.process_time`) of each. Then the worst case.

Run:
    cd benchmarks && python pair_planner.py [--quick] [--time-limit none] [--only docstrings,debian] [--seed 1]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tfpack.packing import plan  # noqa: E402

import pair_corpora  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results" / "pair_planner.md"
LIMITS = [(512, 128), (1024, 256), (2048, 512)]
DEPTHS = [4, 16]
FFD_CELLS = 20_000
TARGET = 0.005
FAMILIES = {  # (input median, target median) as fractions of (Le, Ld), correlation; mixtures as lists
    "lognormal": [(1.0, 0.15, 0.10, 0.0)],
    "correlated": [(1.0, 0.15, 0.12, 0.8)],
    "bimodal": [(0.7, 0.25, 0.05, 0.0), (0.3, 0.05, 0.30, 0.0)],
    "balanced": [(1.0, 0.20, 0.20, 0.5)],
}


def generated(family: str, limits, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parts = []
    for share, fe, fd, rho in FAMILIES[family]:
        z = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], int(n * share))
        parts.append(np.stack([np.exp(np.log(fe * limits[0]) + 0.6 * z[:, 0]),
                               np.exp(np.log(fd * limits[1]) + 0.6 * z[:, 1])], axis=1).astype(np.int64) + 1)
    return np.concatenate(parts)


def joint(pairs: np.ndarray, limits, repeat: int = 1) -> np.ndarray:
    a = np.minimum(pairs[:, 0], limits[0])
    b = np.minimum(pairs[:, 1], limits[1])
    counts = np.zeros(limits, dtype=np.int64)
    np.add.at(counts, (a - 1, b - 1), 1)
    return counts * repeat


def timed(counts, limits, depth, algorithm, time_limit=1.0):
    start = time.process_time()
    p = plan(counts, max_length=limits, max_sequences_per_pack=depth, algorithm=algorithm, time_limit=time_limit)
    return p, time.process_time() - start


def run_case(name, counts, limits, depth, time_limit):
    row = {"case": name, "Le/Ld": f"{limits[0]}/{limits[1]}", "K": depth, "pairs": int(counts.sum()),
           "cells": int(np.count_nonzero(counts))}
    greedy, row["greedy s"] = timed(counts, limits, depth, "greedy")
    if row["cells"] <= FFD_CELLS:
        ffd, row["ffd s"] = timed(counts, limits, depth, "ffd")
        row["ffd"] = ffd.metrics["packs"]
    optimal, row["optimal s"] = timed(counts, limits, depth, "optimal", time_limit)
    m = optimal.metrics
    row.update(greedy=greedy.metrics["packs"], optimal=m["packs"], bound=m["lower_bound_packs"],
               kind=m["lower_bound_kind"], gap=m["packs"] / m["lower_bound_packs"] - 1,
               saved=1 - m["packs"] / greedy.metrics["packs"],
               eff=(m["input_efficiency"], m["target_efficiency"]))
    return row


def cases(quick: bool, only: list[str], seed: int = 0):
    n = 100_000 if quick else 1_000_000
    for limits in LIMITS[:1] if quick else LIMITS:
        for family in FAMILIES:
            if only and family not in only:
                continue
            counts = joint(generated(family, limits, n, seed=sum(limits) + 1000 * seed), limits)
            for depth in DEPTHS:
                yield family, counts, limits, depth
    for corpus in ("debian", "docstrings", "squad_like"):
        if only and corpus not in only:
            continue
        pairs = pair_corpora.pairs(corpus)
        if pairs is None:
            print(f"{corpus}: source missing, skipped", file=sys.stderr)
            continue
        for limits in LIMITS[:1] if quick else LIMITS[:2]:
            for repeat in (1, max(1, n // len(pairs))):
                for depth in DEPTHS:
                    yield f"{corpus} x {repeat}", joint(pairs, limits, repeat), limits, depth


def table(rows) -> str:
    head = ("| case | Le/Ld | K | pairs | cells | greedy (seqio) | ffd | optimal | bound (kind) | gap | "
            "saved vs greedy | eff. in/out | CPU s greedy / ffd / optimal |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ffd = f"{r['ffd']:,}" if "ffd" in r else "—"
        ffd_s = f"{r['ffd s']:.2f}" if "ffd s" in r else "—"
        lines.append(
            f"| {r['case']} | {r['Le/Ld']} | {r['K']} | {r['pairs']:,} | {r['cells']:,} | {r['greedy']:,} | {ffd} | "
            f"{r['optimal']:,} | {r['bound']:,} ({r['kind']}) | {100 * r['gap']:.3f}% | {100 * r['saved']:.1f}% | "
            f"{100 * r['eff'][0]:.1f}% / {100 * r['eff'][1]:.1f}% | {r['greedy s']:.2f} / {ffd_s} / "
            f"{r['optimal s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1e5 pairs, 512/128 only")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--time-limit", default="1", help="optimal's time_limit in CPU seconds, or 'none'")
    parser.add_argument("--only", default="", help="comma-separated families/corpora (default: all)")
    parser.add_argument("--seed", type=int, default=0,
                        help="generated histograms' seed offset (0: the suite's; others: fresh ones)")
    args = parser.parse_args()
    time_limit = None if args.time_limit == "none" else float(args.time_limit)
    rows = []
    for name, counts, limits, depth in cases(args.quick, [x for x in args.only.split(",") if x], args.seed):
        rows.append(run_case(name, counts, limits, depth, time_limit))
        r = rows[-1]
        print(f"{name:18} {r['Le/Ld']:9} K={depth:<3} greedy {r['greedy']:>9,} ffd {r.get('ffd', 0):>9,} "
              f"optimal {r['optimal']:>9,} bound {r['bound']:>9,} gap {100 * r['gap']:6.3f}% "
              f"{r['optimal s']:.2f} s", flush=True)
    worst = max(rows, key=lambda r: r["gap"])
    slowest = max((r for r in rows if r["pairs"] >= 500_000), key=lambda r: r["optimal s"], default=None)
    within = sum(r["gap"] <= TARGET for r in rows)
    text = [
        "# Two-length planner (`plan(counts, max_length=(Le, Ld), ...)`) vs its bound and seqio's greedy",
        "",
        f"`cd benchmarks && python {' '.join(sys.argv)}` "
        f"({time.strftime('%Y-%m-%d')}, CPU seconds by `time.process_time`, `optimal` with "
        f"`time_limit={time_limit}`).",
        "",
        table(rows),
        "",
        f"Within {100 * TARGET:.1f}% of the bound: {within} of {len(rows)} cases. Worst gap: "
        f"{100 * worst['gap']:.3f}% ({worst['case']}, {worst['Le/Ld']}, K={worst['K']}).",
    ]
    if slowest:
        text.append(f"Slowest `optimal` on >= 5e5 pairs: {slowest['optimal s']:.2f} s CPU "
                    f"({slowest['case']}, {slowest['Le/Ld']}, K={slowest['K']}).")
    pathlib.Path(args.output).write_text("\n".join(text) + "\n")
    print("\n".join(text[-2:]))


if __name__ == "__main__":
    main()
