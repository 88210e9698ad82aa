"""Balanced batches: sequences per optimizer update, balanced vs not, on real lengths.

An unpacked recipe of 32 sequences x 4 accumulation steps = 128 sequences per
update becomes a packed one with `tfpack.training.for_packing` (the plan's
packing factor); the packs are then ordered as `PackingPlan.assign` orders
them (seeded shuffle) or with ``balance=True, batch_size=rule.packs_per_update``
(`tfpack.packing.balance`). For every full update we count its sequences and
report min, median and max, and the cost of balancing: packs added (none: it
only reorders) and the time of the assignment with and without it
(interleaved rounds, median and spread).

Lengths:

- ``stdlib``: tokens of every top-level function and class of the Python
  standard library (`benchmarks/lengths.py`), split into windows of ``L``.
- ``wikipedia``: the bundled PackedBERT Wikipedia histogram (16,279,552
  sequences of at most 512 tokens), in a seeded random order.

Replicas balanced by attention cost (issue 36, `tfpack.packing.replicas`):
each balanced batch (a step) is split among ``R`` replicas so that the
costliest replica, ``sum(l^2) + token_weight * tokens`` a pack, costs as
little as the packs allow; reported against the proven lower bound
(``max(ceil(total / R), largest + the cheapest others)``), step by step,
before (the balanced order as it was) and after. Lengths: the Wikipedia
histogram at L=512, and long documents at L=8,192 (the stdlib windows and
the corpora of `benchmarks/planners_corpora.py`, cut into windows of L).

    python benchmarks/balance.py            # writes benchmarks/results/balance.md
                                            # and balance_replicas.md
    python benchmarks/balance.py --replicas-only
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lengths import stdlib_lengths  # noqa: E402

import tfpack  # noqa: E402
from tfpack.training import for_packing  # noqa: E402
from results_file import write_results  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "balance.md"
REPLICA_RESULTS = RESULTS.with_name("balance_replicas.md")
# (lengths, L, K, packs a step, replicas, token_weight = 6 x a model's hidden
# size, planner: lpfhp for the 16M Wikipedia sequences, ffd at L=8,192)
REPLICA_CASES = [("wikipedia", 512, 3, 64, 8, 6 * 768, "lpfhp")] + [
    (name, 8192, 64, 32, 8, 6 * 4096, "ffd")
    for name in ("stdlib", "man_pages", "c_headers", "site_packages", "debian_docs")]
CASES = [(512, 3), (512, 16), (2048, 32)]
RECIPE = (32, 4)  # micro-batch, accumulation steps: 128 sequences per update
ALGORITHM = "lpfhp"


def windows(lengths, max_length: int) -> np.ndarray:
    """Each length cut into pieces of at most ``max_length``."""
    full, rest = np.divmod(np.asarray(lengths, np.int64), max_length)
    pieces = np.concatenate([np.repeat(max_length, full.sum()), rest[rest > 0]])
    return np.random.default_rng(0).permutation(pieces)


def wikipedia() -> np.ndarray:
    counts = tfpack.datasets.histogram("wikipedia_512")
    lengths = np.repeat(np.arange(1, counts.size + 1), counts)
    return np.random.default_rng(0).permutation(lengths)


def per_update(assignment, packs_per_update: int) -> np.ndarray:
    sequences = np.diff(assignment.splits)
    updates = sequences.size // packs_per_update
    return sequences[:updates * packs_per_update].reshape(updates, -1).sum(axis=1)


def measure(name, lengths, L, K, rounds):
    started = time.perf_counter()
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, L), L, K, algorithm=ALGORITHM)
    plan_seconds = time.perf_counter() - started
    micro, steps = RECIPE
    rule = for_packing(micro, steps, packing_factor=plan, cut="accumulation")
    times = {"plain": [], "balanced": []}
    results = {}
    for _ in range(rounds):  # interleaved: plain, balanced, plain, ...
        for kind in ("plain", "balanced"):
            extra = dict(balance=True, batch_size=rule.packs_per_update) \
                if kind == "balanced" else {}
            started = time.perf_counter()
            results[kind] = plan.assign(lengths, seed=0, **extra)
            times[kind].append(time.perf_counter() - started)
    plain, balanced = results["plain"], results["balanced"]
    assert plain.num_packs == balanced.num_packs  # balancing adds no pack
    rows = []
    for kind, assignment in (("no", plain), ("yes", balanced)):
        counts = per_update(assignment, rule.packs_per_update)
        t = times["plain" if kind == "no" else "balanced"]
        rows.append((name, L, K, kind, rule, counts, len(lengths), plan.metrics["packs"],
                     plan.metrics["efficiency"], plan_seconds, t))
    return rows, balanced.balance


def replica_rows(name, lengths, L, K, batch, replicas, token_weight, algorithm):
    """Table rows of one case: attention alone (weight 0), then with tokens."""
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, L), L, K,
                               algorithm=algorithm)
    rows = []
    for weight in (0, token_weight):
        started = time.perf_counter()
        report = plan.assign(lengths, seed=0, balance=True, batch_size=batch,
                             replicas=replicas, token_weight=weight).balance.replicas
        seconds = time.perf_counter() - started
        rows.append(
            f"| {name} | {L:,} | {K} | {len(lengths):,} | {plan.metrics['packs']:,} | "
            f"{report.steps:,} | {batch} / {replicas} | {weight:,} | "
            f"{report.total_before:.3f} ({report.worst_before:.2f}) | "
            f"{report.total_after:.3f} ({report.worst_after:.2f}) | "
            f"{report.total_bound:.3f} ({report.worst_bound:.2f}) | {seconds:.2f} |")
    return rows


def replicas_table(cases) -> list[str]:
    import planners_corpora

    stdlib = stdlib_lengths()
    lines = [
        "# Replicas balanced by attention cost",
        "",
        "Reproduce: `python benchmarks/balance.py --replicas-only` (writes this file).",
        "",
        "Plans by `lpfhp` (Wikipedia) and `ffd` (L=8,192); `assign(lengths, balance=True, batch_size=B, "
        "replicas=R, token_weight=w)`: the packs of each step (B packs, sequences "
        "balanced) split among R replicas by cost `sum(l^2) + w * tokens` a pack "
        "(`tfpack.packing.replicas`). A step costs its costliest replica. Columns: "
        "the run's total (sum over steps of the costliest replica / sum of the mean "
        "replica, 1.000 = nobody ever waits) and, in brackets, the worst step; "
        "`before`: the balanced order as it was (replica r takes packs r*B/R..); "
        "`after`: split by cost; `bound`: the proven lower bound of every step "
        "(max(ceil(total/R), largest pack + the B/R-1 cheapest others)): no split "
        "does better. w = 0: attention alone (the most uneven case); w = 6 x hidden "
        "(768 at L=512, 4,096 at L=8,192): attention plus the per-token rest. "
        "Long documents are cut into windows of L. `s`: the whole assignment.",
        "",
        "| lengths | L | K | sequences | packs | steps | B / R | w | before | after | "
        "bound | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, L, K, batch, replicas, weight, algorithm in cases:
        if name == "wikipedia":
            lengths = wikipedia()
        elif name == "stdlib":
            lengths = windows(stdlib, L)
        else:
            documents = planners_corpora.lengths(name)
            if documents is None:
                continue
            lengths = windows(documents[documents > 0], L)
        for row in replica_rows(name, lengths, L, K, batch, replicas, weight, algorithm):
            lines.append(row)
            print(row, flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-wikipedia", action="store_true")
    parser.add_argument("--replicas-only", action="store_true")
    args = parser.parse_args()
    cases = [case for case in REPLICA_CASES
             if not (args.no_wikipedia and case[0] == "wikipedia")]
    write_results(REPLICA_RESULTS, "\n".join(replicas_table(cases)) + "\n")
    if args.replicas_only:
        return
    stdlib = stdlib_lengths()
    sources = [("stdlib", lambda L: windows(stdlib, L))]
    if not args.no_wikipedia:
        wiki = wikipedia()
        sources.append(("wikipedia", lambda L: wiki))
    lines = [
        "# Balanced batches: sequences per update",
        "",
        "Reproduce: `python benchmarks/balance.py` (from the repository root; writes this "
        "file).",
        "",
        f"Recipe: {RECIPE[0]} sequences x {RECIPE[1]} accumulation steps = "
        f"{RECIPE[0] * RECIPE[1]} sequences per update, made packed by "
        "`for_packing(32, 4, packing_factor=plan)`; plans by "
        f"`{ALGORITHM}`. `balanced`: `assign(..., balance=True, "
        "batch_size=rule.packs_per_update)` (whole updates); otherwise the seeded shuffle "
        "of `assign`. "
        "Sequences per full update: min / median / max. Balancing only reorders packs: "
        "packs and efficiency are the same either way (checked). `assign s`: median of "
        f"{args.rounds} interleaved rounds (min-max), the whole assignment of every example "
        "with and without the balancing step.",
        "",
        "| lengths | L | K | sequences | packs | efficiency % | packs per update (batch x "
        "steps) | expected sequences per update | balanced | min | median | max | "
        "plan s | assign s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, make in sources:
        for L, K in CASES:
            lengths = make(L)
            rows, report = measure(name, lengths, L, K, args.rounds)
            for (name_, L_, K_, kind, rule, counts, n, packs, eff, plan_s, t) in rows:
                lines.append(
                    f"| {name_} | {L_:,} | {K_} | {n:,} | {packs:,} | {100 * eff:.3f} | "
                    f"{rule.packs_per_update} ({rule.global_batch_size} x "
                    f"{rule.accumulation_steps}) | {rule.sequences_per_update:.1f} | {kind} | "
                    f"{counts.min()} | {statistics.median(counts.tolist()):g} | "
                    f"{counts.max()} | {plan_s:.3f} | {statistics.median(t):.3f} "
                    f"({min(t):.3f}-{max(t):.3f}) |")
                print(lines[-1], flush=True)
            notes.append(
                f"- {name}, L={L:,}, K={K}: groups of {report.batch_size} packs hold "
                f"{report.low}-{report.high} sequences balanced (mean {report.mean:.2f}, "
                f"tolerance +-{report.tolerance:.2f}, "
                + ("within it" if report.within_tolerance else
                   f"{report.excess:.2f} beyond it") +
                f"; {report.rounds} swap rounds) vs {report.unbalanced_low}-"
                f"{report.unbalanced_high} in shuffled order; rule note: "
                f"{rule.note or 'none'}")
    lines += ["", "The balancing reports (a group = the packs of one update):", ""] + notes
    write_results(RESULTS, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
