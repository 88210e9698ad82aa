"""The pricing kernel's vector loops: none, SSE2 and AVX2, on the calls of long-context plans.

`tfpack/packing/_kernels.c` prices with a dynamic program over (sequences,
tokens); each item updates the table row by row, 8 cells a block, in vector
loops chosen at run time (level 0: none, 1: SSE2, 2: AVX2 where the CPU has
it). An item within one row (no depth limit, or the depth above what fits)
runs its blocks from the right. Every level gives the same table, bits and
packs (tests/packing/test_kernels.py); this script times them on the calls
`optimal` really makes: it plans cases of `benchmarks/planners_long_context.py`
(1 s budget), records every pricing call's arguments, then runs the whole set
at each level, interleaved (the order rotating), ``--rounds`` times.

Reported per level: CPU seconds of the whole set (median of the rounds), and
the speed-up over level 1 (SSE2, the kernel before AVX2 and the right-to-left
blocks), median and range of the per-round ratios.

Run:

    PYTHONPATH=. .venv/bin/python benchmarks/pricing_vectors.py --rounds 5

Writes ``benchmarks/results/pricing_vectors.md`` (``--output``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import planners_long_context  # noqa: E402  (benchmarks/planners_long_context.py)

from tfpack.packing import compiled  # noqa: E402
from tfpack.packing.algorithms import _knapsack, optimal  # noqa: E402
from results_file import write_results  # noqa: E402

# (seed, case) of the long-context suite: L=12,288 and 16,384, depths 4-12, wide and narrow.
CASES = [(556, 39), (559, 35), (565, 7), (557, 39), (554, 20), (558, 10)]
LEVELS = {0: "none", 1: "SSE2", 2: "AVX2"}


def recorded_calls(seed: int, index: int) -> list[tuple]:
    """The kernel's arguments (budget left out) while `optimal` plans the case in 1 s."""
    params = planners_long_context.case(index, seed)
    calls, kernels = [], _knapsack.kernels

    class Spy:
        def __getattr__(self, name):
            return getattr(kernels, name)

        @staticmethod
        def price(*args):
            calls.append(tuple(bytes(a) if hasattr(a, "tobytes") else a for a in args[:-1]))
            return kernels.price(*args)

    _knapsack.kernels = Spy()
    try:
        optimal.pack(planners_long_context.histogram_of(params), params["max_length"],
                     params["depth"], seed=0, time_limit=1.0)
    finally:
        _knapsack.kernels = kernels
    return calls


def measure(calls: list[tuple], levels: list[int], rounds: int) -> dict:
    """CPU seconds of the whole set per level and round, the levels' order rotating."""
    seconds = {level: [] for level in levels}
    outputs = {level: None for level in levels}
    for r in range(rounds):
        for level in levels[r % len(levels):] + levels[:r % len(levels)]:
            start = time.process_time()
            out = [compiled.kernels.price(*args, None, level) for args in calls]
            seconds[level].append(time.process_time() - start)
            outputs[level] = outputs[level] or out
    first = outputs[levels[0]]
    return dict(seconds=seconds, equal=all(outputs[level] == first for level in levels))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--output", default=str(HERE / "results" / "pricing_vectors.md"))
    args = parser.parse_args(argv)
    calls = [c for seed, index in CASES for c in recorded_calls(seed, index)]
    cpu = _cpu_name()
    m = measure(calls, list(LEVELS), args.rounds)
    base = m["seconds"][1]
    lines = [
        "# The pricing kernel's vector loops (`benchmarks/pricing_vectors.py`)",
        "",
        f"Command: `PYTHONPATH=. .venv/bin/python benchmarks/pricing_vectors.py "
        f"--rounds {args.rounds}`",
        "",
        f"Machine: {platform.machine()} ({cpu}), {os.cpu_count()} CPU cores, shared with other "
        f"jobs (load average {os.getloadavg()[0]:.1f} at the end); the best level this build "
        f"runs here: {LEVELS[compiled.kernels.vectors()]}. Calls: the {len(calls):,} pricing calls "
        f"of `optimal` (1 s) on long-context cases {', '.join(f'{s}/{i}' for s, i in CASES)} "
        "(seed/case), each level over all of them, interleaved, the order rotating. "
        "Speed-up: level 1 (SSE2) seconds / the level's, per round: median (min-max).",
        "",
        "| vectors | CPU s (median) | speed-up over SSE2 |",
        "| --- | --- | --- |",
    ]
    for level, name in LEVELS.items():
        ratios = [b / max(s, 1e-9) for b, s in zip(base, m["seconds"][level])]
        lines.append(f"| {level}: {name} | {statistics.median(m['seconds'][level]):.3f} | "
                     f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
    lines += ["", f"Every level's results identical: {'yes' if m['equal'] else '**no**'}.", ""]
    write_results(args.output, "\n".join(lines))
    print("\n".join(lines))
    return 0 if m["equal"] else 1


def _cpu_name() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    names = [line.split(":", 1)[1].strip() for line in text.splitlines()
             if line.startswith("model name")]
    return names[0] if names else "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
