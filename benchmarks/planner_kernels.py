"""The planner's compiled kernels against the Python loops they replaced, on real planner inputs.

`tfpack/packing/_kernels.c` runs four loops of the `optimal` planner:
pricing (`_knapsack.price`), best fit decreasing on groups
(`_fit_decreasing`), the real lengths in a grouped plan's slots
(`_groups.real_packs`) and full packs first's greedy (`_exact_fill.fill`).
The Python loops they replaced live on as plain references in tests/packing/
(`knapsack_reference`, `fit_reference`, `groups_reference`,
`exact_fill_reference`), which the tests compare against for equal results. This
script times both on the inputs `optimal` really gives them: it plans a few
cases of `benchmarks/planners_suite.py` with ``time_limit=1.0``, records the
kernels' arguments, then times reference and compiled call for call,
interleaved, ``--rounds`` times, and reports the ratio (reference / compiled
CPU time of the whole set of calls): median and spread, and whether every
result was equal.

Run:

    .venv/bin/python benchmarks/planner_kernels.py --rounds 5

Writes ``benchmarks/results/planner_kernels.md`` (``--output``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "packing"))
import exact_fill_reference  # noqa: E402  (tests/packing/exact_fill_reference.py)
import fit_reference  # noqa: E402  (tests/packing/fit_reference.py)
import groups_reference  # noqa: E402
import knapsack_reference  # noqa: E402
import planners_suite  # noqa: E402

from tfpack.packing.algorithms import (  # noqa: E402
    _exact_fill, _fit_decreasing, _groups, _knapsack, optimal)
from results_file import write_results  # noqa: E402

# (family, L): pricing-heavy (L=2,048 depth 16; L=8,192), grouped plans at L=65,536.
CASES = [("bimodal", 2048), ("spikes", 8192), ("lognormal", 8192), ("spikes", 65536),
         ("zipf", 65536)]
PRICING_CALLS = 12  # per case, spread over the plan


def _case(family: str, max_length: int):
    for case in planners_suite.generated_cases(1):
        if case["family"] == family and case["max_length"] == max_length:
            return case, planners_suite.histogram_of(case)
    raise KeyError((family, max_length))


def recorded_calls(family: str, max_length: int) -> dict[str, list]:
    """The kernels' arguments while `optimal` plans the case (1 s budget)."""
    case, histogram = _case(family, max_length)
    calls = {"price": [], "real_packs": [], "exact_fill": []}
    price, real_packs, exact_fill = _knapsack.price, _groups.real_packs, _exact_fill.fill

    def spy_price(*args, **kwargs):
        calls["price"].append((args, {k: v for k, v in kwargs.items() if k != "budget"}))
        return price(*args, **kwargs)

    def spy_real(*args):
        calls["real_packs"].append(args)
        return real_packs(*args)

    def spy_fill(*args, **kwargs):
        calls["exact_fill"].append((args[:3], {"most_left": kwargs.get("most_left")}))
        return exact_fill(*args, **kwargs)

    _knapsack.price, _groups.real_packs, _exact_fill.fill = spy_price, spy_real, spy_fill
    try:
        optimal.pack(histogram, max_length, case["depth"], seed=0, time_limit=1.0)
    finally:
        _knapsack.price, _groups.real_packs, _exact_fill.fill = price, real_packs, exact_fill
    step = max(1, len(calls["price"]) // PRICING_CALLS)
    calls["price"] = calls["price"][::step][:PRICING_CALLS]
    calls["bfd"] = [(histogram, max_length, case["depth"])]
    return calls


def _price_pair(args, kwargs):
    def reference():
        return knapsack_reference.price(*args, **kwargs)

    def compiled():
        return _knapsack.price(*args, **kwargs)

    def same(a, b):
        def packs(pricing):
            return [(r.tolist(), c.tolist()) for r, c in pricing.patterns]
        return a.best_value == b.best_value and packs(a) == packs(b)
    return reference, compiled, same


def _bfd_pair(histogram, max_length, depth):
    def reference():
        return fit_reference.best_fit_decreasing(histogram, max_length, depth or max_length)

    def compiled():
        return _fit_decreasing.fit_decreasing(histogram, max_length, depth, best_fit=True)

    def same(a, b):
        return a.strategies == b.strategies and a.counts.tolist() == b.counts.tolist()
    return reference, compiled, same


def _fill_pair(args, kwargs):
    def run(fill):
        try:
            packs, rest = fill(*args, **kwargs)
            return list(packs.items()), rest.tolist()
        except _exact_fill.TooMuchLeft:
            return "too much"
    return (lambda: run(exact_fill_reference.fill)), (lambda: run(_exact_fill.fill)), \
        (lambda a, b: a == b)


def _real_pair(*args):
    def reference():
        return groups_reference.real_packs(*args)

    def compiled():
        return _groups.real_packs(*args)

    def same(a, b):
        return list(a.items()) == list(b.items())
    return reference, compiled, same


def measure(pairs, rounds: int) -> dict:
    """Reference and compiled CPU seconds of the whole set, interleaved, per round."""
    ref_times, new_times, equal = [], [], True
    for _ in range(rounds):
        ref = new = 0.0
        for reference, compiled, same in pairs:
            start = time.process_time()
            a = reference()
            middle = time.process_time()
            b = compiled()
            ref += middle - start
            new += time.process_time() - middle
            equal = equal and same(a, b)
        ref_times.append(ref)
        new_times.append(new)
    ratios = [r / max(n, 1e-9) for r, n in zip(ref_times, new_times)]
    return dict(calls=len(pairs), reference=statistics.median(ref_times),
                compiled=statistics.median(new_times), ratio=statistics.median(ratios),
                low=min(ratios), high=max(ratios), equal=equal)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=str(HERE / "results" / "planner_kernels.md"))
    args = parser.parse_args(argv)
    rows = []
    for family, max_length in CASES:
        calls = recorded_calls(family, max_length)
        kinds = [("pricing", [_price_pair(a, k) for a, k in calls["price"]]),
                 ("best fit decreasing", [_bfd_pair(*calls["bfd"][0])]),
                 ("real_packs", [_real_pair(*a) for a in calls["real_packs"]]),
                 ("exact fill", [_fill_pair(a, k) for a, k in calls["exact_fill"]])]
        for kernel, pairs in kinds:
            if pairs:
                rows.append((f"{family} L={max_length:,}", kernel, measure(pairs, args.rounds)))
    lines = [
        "# The planner's compiled kernels vs the Python loops they replaced "
        "(`benchmarks/planner_kernels.py`)",
        "",
        f"Command: `.venv/bin/python benchmarks/planner_kernels.py --rounds {args.rounds}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other jobs "
        f"(load average {os.getloadavg()[0]:.1f} at the end). The kernels' arguments are "
        "recorded while `optimal` plans each case of `benchmarks/planners_suite.py` (1 s "
        "budget; pricing: 12 calls spread over the plan); then the Python reference "
        "(tests/packing/*_reference.py) and the compiled kernel run call for call, "
        f"interleaved, {args.rounds} rounds. Seconds: CPU time of the whole set of calls, "
        "median of the rounds; speed-up: reference / compiled, median (min-max). "
        "Equal: every result identical (values, packs, order).",
        "",
        "| case | kernel | calls | reference s | compiled s | speed-up | equal |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case, kernel, m in rows:
        lines.append(f"| {case} | {kernel} | {m['calls']} | {m['reference']:.4f} | "
                     f"{m['compiled']:.4f} | {m['ratio']:.1f}x ({m['low']:.1f}-{m['high']:.1f}) | "
                     f"{'yes' if m['equal'] else '**no**'} |")
    worst = min(rows, key=lambda row: row[2]["ratio"])
    lines += ["", f"Slowest speed-up: {worst[2]['ratio']:.1f}x ({worst[1]}, {worst[0]}); "
              f"all equal: {'yes' if all(m['equal'] for _, _, m in rows) else 'no'}.", ""]
    write_results(args.output, "\n".join(lines))
    print("\n".join(lines))
    return 0 if all(m["equal"] for _, _, m in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
