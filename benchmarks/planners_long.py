"""`optimal` with a depth limit at max length 8,192 on long-document histograms (issue 17).

Target: under a second, no further from the proven lower bound than before.

Histograms (DESIGN.md layout, lengths 1..8,192):

- ``stdlib``: real long documents, the Python tokens of every top-level
  function and class of the standard library (`benchmarks/lengths.py`),
  split into windows of at most 8,192; a few hundred distinct lengths.
- ``docs``: a corpus of 300,000 synthetic documents of log-normal(7.5, 1.5)
  tokens, cut into windows of 8,192 as a long-context pipeline does: a spike
  of full windows plus every remainder length, 8,192 distinct lengths.
- ``lognormal``: 1,000,000 synthetic lengths, log-normal(7, 1.2) + 1, cut at
  8,192 (as in ``benchmarks/results/optimal.md``): almost every length
  present, the hardest case for the LP (one row per length).

Each case is planned ``--rounds`` times, the cases interleaved round after
round (the machine is shared); reported: `metrics["solve_seconds"]` median
(min-max), packs, the proven lower bound and the gap between them.

Run:

    .venv/bin/python benchmarks/planners_long.py             # ~5 minutes on a loaded machine
    .venv/bin/python benchmarks/planners_long.py --cases stdlib --rounds 2

Writes ``benchmarks/results/planners_long.md``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import lengths  # noqa: E402  (benchmarks/lengths.py)

from tfpack import packing  # noqa: E402
from results_file import write_results  # noqa: E402

L = 8192
TARGET_SECONDS = 1.0
CASES = {"stdlib": (4, 8, 16, 32), "docs": (8, 16, 32), "lognormal": (4, 8, 16)}


def histogram(name: str) -> np.ndarray:
    if name == "stdlib":
        return lengths.windowed_histogram(lengths.stdlib_lengths(), L)
    if name == "docs":
        rng = np.random.default_rng(3)
        documents = np.exp(rng.normal(7.5, 1.5, 300_000)).astype(np.int64) + 1
        return lengths.windowed_histogram(documents, L)
    rng = np.random.default_rng(0)
    x = np.minimum(np.exp(rng.normal(7.0, 1.2, 1_000_000)).astype(np.int64) + 1, L)
    return np.bincount(x, minlength=L + 1)[1:]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: stdlib,docs,lognormal")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=str(HERE / "results" / "planners_long.md"))
    args = parser.parse_args(argv)
    names = [n for n in args.cases.split(",") if n]
    hists = {n: histogram(n) for n in names}
    cases = [(n, d) for n in names for d in CASES[n]]
    seconds = {c: [] for c in cases}
    metrics = {}
    for _ in range(args.rounds):
        for name, depth in cases:  # interleaved: the machine is shared
            m = packing.plan(hists[name], L, depth, algorithm="optimal").metrics
            seconds[(name, depth)].append(m["solve_seconds"])
            metrics[(name, depth)] = m
            print(name, depth, m["packs"], m["lower_bound_packs"], f"{m['solve_seconds']:.2f}",
                  flush=True)
    command = " ".join([".venv/bin/python", "benchmarks/planners_long.py", *sys.argv[1:]])
    lines = ["# `optimal` at max length 8,192 with a depth limit (`benchmarks/planners_long.py`)",
             "", f"Command: `{command}`",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other jobs "
             f"(load average {os.getloadavg()[0]:.1f} at the end).", "",
             f"{args.rounds} interleaved rounds; seconds = `metrics[\"solve_seconds\"]`, median "
             "(min-max). Gap = packs above the proven lower bound.", "",
             "| histogram | sequences | distinct lengths | max per pack | packs | lower bound | gap "
             "(packs) | seconds | under 1 s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, depth in cases:
        m, s = metrics[(name, depth)], seconds[(name, depth)]
        med = float(np.median(s))
        lines.append(f"| {name} | {int(hists[name].sum()):,} | {int((hists[name] > 0).sum()):,} | "
                     f"{depth} | {m['packs']:,} | {m['lower_bound_packs']:,} | "
                     f"{m['packs'] - m['lower_bound_packs']:,} | {med:.2f} ({min(s):.2f}-"
                     f"{max(s):.2f}) | {'yes' if med < TARGET_SECONDS else 'no'} |")
    text = "\n".join(lines + [""])
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_results(args.output, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
