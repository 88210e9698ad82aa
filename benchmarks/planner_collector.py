"""`optimal` with Python's garbage collector paused, against it running, in a process like a user's.

A plan allocates hundreds of thousands of tuples and dicts (packs, plans), and
every 700 allocations Python starts a collection; a full one scans every object
of the process, on the planner's clock (the calling thread's CPU time). In a
training script that imported TensorFlow (about 430,000 objects) one full
collection takes about 0.25 s. `optimal` runs with the collector paused
(`tfpack.packing.algorithms._budget.collector_paused`). This script plans
long-context cases (`planners_long_context.py`) at ``time_limit=1.0`` both
ways in one process, interleaved (the order alternating), ``--rounds`` times:
paused (`optimal.pack`) and running (the same function undecorated,
``optimal.pack.__wrapped__``), and reports each way's CPU seconds (median and
range), the collector's seconds (`gc.callbacks`) and the gap to the bound.

Run:

    .venv/bin/python benchmarks/planner_collector.py --rounds 5

Writes ``benchmarks/results/planner_collector.md`` (``--output``);
``--no-tensorflow`` plans in a process of numpy alone.
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import planners_long_context  # noqa: E402

from results_file import write_results  # noqa: E402
from tfpack.packing.algorithms import optimal  # noqa: E402

# Long-context cases (seed/case) of fresh seeds 640-651, each on the path that settles the plan.
CASES = "643/2,645/22,640/6,641/2,644/8,646/42,648/4,651/30"


class _Collections:
    """The collector's CPU seconds and passes (by generation) while counting."""

    def __init__(self):
        self.seconds, self.passes, self._start = 0.0, [0, 0, 0], 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start
            self.passes[info["generation"]] += 1

    def reset(self):
        self.seconds, self.passes = 0.0, [0, 0, 0]


def _plan(function, histogram, case, collections):
    collections.reset()
    start = time.thread_time()
    result = function(histogram, case["max_length"], case["depth"], seed=0, time_limit=1.0)
    cpu = time.thread_time() - start
    packs = int(np.sum(result.counts))
    return dict(cpu=cpu, gc=collections.seconds, full=collections.passes[2],
                gap=packs / result.lower_bound_packs - 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="seed/case, comma separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-tensorflow", action="store_true",
                        help="plan in a process of numpy alone")
    parser.add_argument("--output", default=str(HERE / "results" / "planner_collector.md"))
    args = parser.parse_args(argv)
    if not args.no_tensorflow:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow  # noqa: F401, PLC0415  (a user's process: its objects)
    objects = len(gc.get_objects())
    collections = _Collections()
    ways = {"paused": optimal.pack, "running": optimal.pack.__wrapped__}
    rows = []
    for name in args.cases.split(","):
        seed, index = map(int, name.split("/"))
        case = planners_long_context.case(index, seed)
        histogram = planners_long_context.histogram_of(case)
        runs = {way: [] for way in ways}
        for round_ in range(args.rounds):
            order = list(ways) if round_ % 2 == 0 else list(ways)[::-1]
            for way in order:
                runs[way].append(_plan(ways[way], histogram, case, collections))
        rows.append((name, case, runs))
        print(name, {way: (round(statistics.median(r["cpu"] for r in rs), 3),
                           round(max(r["gc"] for r in rs), 3)) for way, rs in runs.items()},
              flush=True)

    def spread(values, digits=2):
        return (f"{statistics.median(values):.{digits}f} "
                f"({min(values):.{digits}f}-{max(values):.{digits}f})")

    command = "PYTHONPATH=. .venv/bin/python benchmarks/planner_collector.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    lines = ["# `optimal` with the garbage collector paused (`benchmarks/planner_collector.py`)", "",
             f"Command: `{command.strip()}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other jobs. "
             f"Process: {'numpy alone' if args.no_tensorflow else 'TensorFlow imported'} "
             f"({objects:,} objects the collector tracks). Each case planned at time_limit=1.0 "
             f"{args.rounds} times each way, interleaved (the order alternating); CPU: the "
             "calling thread's seconds, median (range); collector: its seconds in a plan; "
             "full: plans with a full collection; gap: packs over the bound, median.", "",
             "| case | L | depth | CPU s, paused | CPU s, running | collector s, running | "
             "full, running | gap paused | gap running |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, case, runs in rows:
        paused, running = runs["paused"], runs["running"]
        lines.append(
            f"| {name} | {case['max_length']:,} | {case['depth']} | "
            f"{spread([r['cpu'] for r in paused])} | {spread([r['cpu'] for r in running])} | "
            f"{spread([r['gc'] for r in running], 3)} | "
            f"{sum(r['full'] > 0 for r in running)} of {len(running)} | "
            f"{statistics.median(r['gap'] for r in paused):.3%} | "
            f"{statistics.median(r['gap'] for r in running):.3%} |")
    worst = {way: max(r["cpu"] for _, _, runs in rows for r in runs[way]) for way in ways}
    lines += ["", f"Worst CPU: paused {worst['paused']:.2f} s, running {worst['running']:.2f} s.", ""]
    write_results(args.output, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
