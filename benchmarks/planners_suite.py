"""`optimal` on a generated suite of histograms and on real corpora it was never tuned on (issue 23).

Each case is a length histogram (DESIGN.md layout, lengths 1..L) drawn from a
family, with its parameters, ``L``, the depth limit and the number of
sequences drawn from the case's seed (so no single histogram can be tuned to):

- ``lognormal``: log-normal lengths, median 2-50% of L, sigma 0.5-1.5, cut at L;
- ``bimodal``: a mix of a short and a long log-normal mode;
- ``zipf``: P(length) proportional to length^-a, a in 0.5-1.5;
- ``spikes``: a log-normal body with 5-50% of the sequences exactly L long and
  a smaller spike at L/2 or L/4;
- ``windows``: log-normal documents (median 0.3-3 L) cut into windows of L,
  as long-context pre-training does: a spike at L plus every remainder length;
- ``uniform``: every length 1..L equally likely.

L is 512, 2,048, 8,192, 32,768 or 65,536; the depth 2-32; the sequences
1e3-1e9 (drawn log-uniform; histograms hold counts, so 1e9 costs no more to
plan than 1e6). Real corpora (`planners_corpora.py`: KJV chapters and verses,
fortunes, WordNet glosses, Python stdlib files and docstrings, WordPiece
tokens) are planned as they are and stretched to long L by concatenating
documents.

Per case: `optimal`'s time (median of ``--rounds``), packs, `bfd`'s packs,
the proven lower bound and its kind (`metrics["lower_bound_kind"]` where the
planner reports it), the gap (packs above the bound, absolute and relative)
and whether it is within the target (0.2% or 2 packs). Then the median and the
**worst** case of each.

Run:

    .venv/bin/python benchmarks/planners_suite.py                  # ~40 cases
    .venv/bin/python benchmarks/planners_suite.py --seeds 3 --rounds 3
    .venv/bin/python benchmarks/planners_suite.py --isolate 60     # each plan in a child,
                                                                    # killed after 60 s
    .venv/bin/python benchmarks/planners_suite.py --unseen --isolate 60 \
        --output benchmarks/results/planners_unseen.md              # corpora never tuned on

Writes ``benchmarks/results/planners_suite.md`` (``--output``).
"""

from __future__ import annotations

import argparse
import inspect
import math
import multiprocessing
import os
import pathlib
import platform
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import planners_corpora  # noqa: E402  (benchmarks/planners_corpora.py)

from tfpack import packing  # noqa: E402
from results_file import write_results  # noqa: E402

FAMILIES = ("lognormal", "bimodal", "zipf", "spikes", "windows", "uniform")
MAX_LENGTHS = (512, 2048, 8192, 32768, 65536)
DEPTHS = (2, 3, 4, 6, 8, 12, 16, 24, 32)
TARGET_GAP = 0.002  # relative, or
TARGET_PACKS = 2  # packs above the bound


def _lognormal_p(max_length: int, median: float, sigma: float) -> np.ndarray:
    """P(length = 1..L) of a log-normal, by its CDF on [l - 0.5, l + 0.5), truncated at L."""
    from scipy.special import ndtr  # noqa: PLC0415

    edges = np.log(np.arange(max_length + 1) + 0.5)
    cdf = ndtr((edges - math.log(median)) / sigma)
    p = np.diff(cdf)
    return p / p.sum()


def generated(family: str, max_length: int, sequences: int, rng) -> np.ndarray:
    """int64 ``[L]`` histogram of ``sequences`` lengths of ``family`` (module notes)."""
    L = max_length
    if family == "lognormal":
        p = _lognormal_p(L, L * rng.uniform(0.02, 0.5), rng.uniform(0.5, 1.5))
    elif family == "bimodal":
        w = rng.uniform(0.2, 0.8)
        p = w * _lognormal_p(L, L * rng.uniform(0.01, 0.1), rng.uniform(0.3, 1.0)) + \
            (1 - w) * _lognormal_p(L, L * rng.uniform(0.3, 0.9), rng.uniform(0.1, 0.4))
    elif family == "zipf":
        p = np.arange(1, L + 1, dtype=np.float64) ** -rng.uniform(0.5, 1.5)
        p /= p.sum()
    elif family == "spikes":
        p = _lognormal_p(L, L * rng.uniform(0.02, 0.3), rng.uniform(0.5, 1.5))
        at_l, other = rng.uniform(0.05, 0.5), rng.uniform(0.0, 0.1)
        p = p * (1 - at_l - other)
        p[L - 1] += at_l
        p[L // int(rng.choice([2, 4])) - 1] += other
    elif family == "windows":
        # Documents up to 64 L; each gives d // L full windows and one of d % L.
        cap = 64 * L
        doc = _lognormal_p(cap, L * rng.uniform(0.3, 3.0), rng.uniform(1.0, 2.0))
        d = np.arange(1, cap + 1)
        per_doc = float(doc @ (d // L + (d % L > 0)))
        counts = rng.multinomial(max(1, round(sequences / per_doc)), doc)
        histogram = np.bincount(d % L, weights=counts, minlength=L)[:L].astype(np.int64)
        full = int(counts @ (d // L))
        histogram = np.roll(histogram, -1)  # index i: length i + 1; length 0 (index L-1) is none
        histogram[L - 1] = full
        return histogram
    elif family == "uniform":
        p = np.full(L, 1.0 / L)
    else:
        raise ValueError(f"unknown family {family!r}")
    return rng.multinomial(sequences, p).astype(np.int64)


def generated_cases(seeds: int) -> list[dict]:
    """One case per family, L and seed: its depth and sequences drawn from the seed."""
    cases = []
    for seed in range(seeds):
        for f, family in enumerate(FAMILIES):
            for m, max_length in enumerate(MAX_LENGTHS):
                rng = np.random.default_rng([seed, f, m])
                depth = int(rng.choice(DEPTHS))
                sequences = int(10 ** rng.uniform(3, 9))
                cases.append(dict(name=f"{family}-s{seed}", family=family, max_length=max_length,
                                  depth=depth, sequences=sequences, seed=seed))
    return cases


# Real corpora: (corpus, L, depth, documents per run when stretched or None: as they are).
REAL = [
    ("kjv_chapters", 8192, 4, None), ("kjv_chapters", 32768, 16, 8),
    ("kjv_verses", 2048, 32, 20), ("kjv_verses", 512, 8, None),
    ("fortunes", 512, 4, None), ("fortunes", 16384, 32, 400),
    ("wordnet", 512, 16, 10), ("wordnet", 65536, 32, 3000),
    ("stdlib_files", 8192, 8, None), ("stdlib_files", 65536, 4, None),
    ("stdlib_docstrings", 2048, 8, None), ("stdlib_docstrings", 32768, 24, 60),
]


# Corpora `optimal` was never tuned on (branch planner5; `--unseen` runs these alone): C
# headers, man pages, installed Python packages, as they are (windows of L) at L=8,192 and
# in runs of 4 and 16 documents at L=16,384 and 32,768, each at a shallow and a deep depth.
UNSEEN = [(corpus, max_length, depth, runs)
          for corpus in ("c_headers", "man_pages", "site_packages")
          for max_length, depth, runs in ((8192, 4, None), (8192, 16, None), (16384, 8, 4),
                                          (16384, 24, 4), (32768, 12, 16), (32768, 32, 16))]
# Two more (branch planner6), on another mix of L and depth (L=4,096 and 65,536 too): Debian's
# package docs and the venv's stubs, READMEs, licenses and configs.
UNSEEN += [(corpus, max_length, depth, runs)
           for corpus in ("debian_docs", "venv_docs")
           for max_length, depth, runs in ((4096, 3, None), (8192, 6, None), (16384, 12, 4),
                                           (65536, 32, 32))]


def real_cases(table=REAL) -> list[dict]:
    cases = []
    for corpus, max_length, depth, runs in table:
        name = corpus if runs is None else f"{corpus}x{runs}"
        cases.append(dict(name=name, family="real", corpus=corpus, runs=runs,
                          max_length=max_length, depth=depth, seed=0))
    return cases


def histogram_of(case: dict) -> np.ndarray | None:
    if case["family"] != "real":
        rng = np.random.default_rng([case["seed"], FAMILIES.index(case["family"]),
                                     MAX_LENGTHS.index(case["max_length"]), 1])
        return generated(case["family"], case["max_length"], case["sequences"], rng)
    documents = planners_corpora.lengths(case["corpus"])
    if documents is None:
        return None
    L = case["max_length"]
    if case["runs"] is None:  # as they are, longer documents cut into windows
        return planners_corpora.stretched(documents, L, 1, seed=0)
    return planners_corpora.stretched(documents, L, case["runs"], seed=case["seed"])


def _plan(histogram, max_length, depth, algorithm, time_limit):
    kwargs = {}
    if algorithm == "optimal" and time_limit != "default" and \
            "time_limit" in inspect.signature(packing.plan).parameters:
        kwargs["time_limit"] = time_limit
    cpu = time.process_time()
    metrics = packing.plan(histogram, max_length, depth, algorithm=algorithm, **kwargs).metrics
    metrics["cpu_seconds"] = time.process_time() - cpu
    return metrics


def _child(queue, *args):
    queue.put(_plan(*args))


def run_plan(histogram, max_length, depth, algorithm, time_limit, isolate):
    """Metrics of one plan; with ``isolate`` seconds, in a child killed after them (None)."""
    if not isolate:
        return _plan(histogram, max_length, depth, algorithm, time_limit)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue, histogram, max_length, depth, algorithm,
                                                 time_limit))
    child.start()
    try:
        return queue.get(timeout=isolate)
    except Exception:  # noqa: BLE001  (queue.Empty: it ran past the limit)
        return None
    finally:
        if child.is_alive():
            child.kill()
        child.join()


def _within(packs, bound) -> bool:
    return packs - bound <= max(TARGET_GAP * bound, TARGET_PACKS)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1, help="generated cases per family and L")
    parser.add_argument("--rounds", type=int, default=1, help="timed plans per case (median)")
    parser.add_argument("--no-real", action="store_true", help="skip the real corpora")
    parser.add_argument("--only", default="", help="comma-separated case names/families to run")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="optimal's time_limit (default: the planner's own)")
    parser.add_argument("--no-time-limit", action="store_true",
                        help="optimal with time_limit=None (bound the run with --isolate)")
    parser.add_argument("--isolate", type=float, default=0.0,
                        help="plan in a child process killed after this many seconds")
    parser.add_argument("--unseen", action="store_true",
                        help="only the corpora it was never tuned on (UNSEEN)")
    parser.add_argument("--label", default="", help="a title note (e.g. the commit)")
    parser.add_argument("--output", default=str(HERE / "results" / "planners_suite.md"))
    args = parser.parse_args(argv)
    time_limit = "default" if args.time_limit is None else args.time_limit
    if args.no_time_limit:
        time_limit = None
    cases = generated_cases(args.seeds) + ([] if args.no_real else real_cases())
    if args.unseen:
        cases = real_cases(UNSEEN)
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c["name"] in keep or c["family"] in keep
                 or f"{c['name']}-{c['max_length']}" in keep]
    rows = []
    for case in cases:
        histogram = histogram_of(case)
        if histogram is None:
            print(f"skipped {case['name']}: its corpus is not on this machine", flush=True)
            continue
        L, depth = case["max_length"], case["depth"]
        base = {a: _plan(histogram, L, depth, a, None) for a in ("bfd", "ffd")}
        seconds, metrics = [], None
        for _ in range(args.rounds):
            metrics = run_plan(histogram, L, depth, "optimal", time_limit, args.isolate)
            if metrics is None:
                break
            seconds.append(metrics["cpu_seconds"])
        row = dict(case=case, sequences=int(histogram.sum()),
                   distinct=int((histogram > 0).sum()), bfd=base["bfd"]["packs"],
                   ffd=base["ffd"]["packs"], bfd_seconds=base["bfd"]["solve_seconds"],
                   metrics=metrics, seconds=seconds,
                   wall=None if metrics is None else metrics["solve_seconds"])
        rows.append(row)
        m = metrics
        print(f"{case['name']:<24} L={L:<6} K={depth:<3} n={row['sequences']:<11,} "
              f"lengths={row['distinct']:<6} bfd={row['bfd']:<10,} "
              + ("optimal: TIMEOUT" if m is None else
                 f"optimal={m['packs']:<10,} bound={m['lower_bound_packs']:<10,} "
                 f"({m.get('lower_bound_kind', '-')}) cpu {np.median(seconds):.2f} s "
                 f"wall {m['solve_seconds']:.2f} s"), flush=True)
    write(report(rows, args), args.output)
    return 0


def write(text: str, output: str) -> None:
    """Write a report to ``output`` (its folder made if missing) and print it."""
    pathlib.Path(output).parent.mkdir(parents=True, exist_ok=True)
    write_results(output, text)
    print(text)


def report(rows, args) -> str:
    command = " ".join([".venv/bin/python", "benchmarks/planners_suite.py", *sys.argv[1:]])
    lines = [f"# `optimal` on a generated suite and real corpora (`benchmarks/planners_suite.py`)"
             + (f": {args.label}" if args.label else ""), "",
             f"Command: `{command}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other jobs "
             f"(load average {os.getloadavg()[0]:.1f} at the end). Seconds: CPU time of the "
             f"planning process (the budget's clock; on an idle machine about the wall time), "
             f"median of {args.rounds}; wall: `metrics[\"solve_seconds\"]` of the last round, "
             f"inflated by the load. Gap: packs above the proven "
             f"lower bound. Target: gap <= max({TARGET_GAP:.1%} of the bound, {TARGET_PACKS} "
             "packs), never more packs than `bfd`.", ""]
    done = [r for r in rows if r["metrics"] is not None]
    timed_out = [r for r in rows if r["metrics"] is None]
    if done:
        secs = np.array([np.median(r["seconds"]) for r in done])
        gaps = np.array([(r["metrics"]["packs"] - r["metrics"]["lower_bound_packs"])
                         / r["metrics"]["lower_bound_packs"] for r in done])
        worst_t, worst_g = done[int(np.argmax(secs))], done[int(np.argmax(gaps))]
        within = sum(_within(r["metrics"]["packs"], r["metrics"]["lower_bound_packs"]) for r in done)
        behind = sum(r["metrics"]["packs"] > r["bfd"] for r in done)

        def name(r):
            c = r["case"]
            return f"{c['name']} L={c['max_length']} K={c['depth']}"

        lines += ["## Summary", "",
                  "| cases | seconds: median | seconds: worst | gap: median | gap: worst | "
                  "within target | more packs than bfd | ran past the isolation limit |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |",
                  f"| {len(rows)} | {np.median(secs):.2f} | **{secs.max():.2f}** ({name(worst_t)}) | "
                  f"{np.median(gaps):.4%} | **{gaps.max():.3%}** ({name(worst_g)}) | "
                  f"{within} of {len(done)} | {behind} | {len(timed_out)} |", ""]
    lines += ["## Cases", "",
              "| case | L | depth | sequences | lengths | bfd packs | packs | bound | bound kind "
              "| gap (packs) | gap | within | seconds | wall | bfd seconds |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
              "| --- |"]
    for r in rows:
        c, m = r["case"], r["metrics"]
        head = (f"| {c['name']} | {c['max_length']:,} | {c['depth']} | {r['sequences']:,} | "
                f"{r['distinct']:,} | {r['bfd']:,} | ")
        if m is None:
            lines.append(head + f"timeout | | | | | no | | > {args.isolate:.0f} | "
                         f"{r['bfd_seconds']:.2f} |")
            continue
        gap = m["packs"] - m["lower_bound_packs"]
        s = r["seconds"]
        spread = f" ({min(s):.2f}-{max(s):.2f})" if len(s) > 1 else ""
        lines.append(head + f"{m['packs']:,} | {m['lower_bound_packs']:,} | "
                     f"{m.get('lower_bound_kind', '-')} | {gap:,} | "
                     f"{gap / m['lower_bound_packs']:.3%} | "
                     f"{'yes' if _within(m['packs'], m['lower_bound_packs']) else 'no'} | "
                     f"{np.median(s):.2f}{spread} | {r['wall']:.2f} | {r['bfd_seconds']:.2f} |")
    return "\n".join(lines + [""])


if __name__ == "__main__":
    sys.exit(main())
