"""The settle kernel's search for the tightest place: by column against by rows, on 1 s plans.

`tfpack.packing.algorithms._spread_settle` settles a one-length plan with the
kernel ``settle`` of ``tfpack/packing/_kernels.c``: each sequence is the pair
``(length, 1)``, a pack's room is (free tokens, free slots), and each placement
asks for the least ``free tokens * depth + free slots * L`` that holds the
sequence. By rows, the search walks the rows of free tokens from the length up,
a tree over the rows skipping empty ones, until no row can hold a tighter place:
up to ``L / depth`` rows for each free slot of the best so far. By column (what
`_spread_settle` asks for), it looks at each count of free slots once, the first
row at the length or more in a two-level bit index. Both find the same place
(``tests/packing/test_pair_settle.py`` checks both against a written-out pass).

This script plans long-context cases (`planners_long_context.py`, all cases of
``--seed``) with `optimal` at ``time_limit=1.0``, then runs on each plan's packs
with free tokens the first pass of the plan's settling (`Tuning.PLAN_SETTLE`: 1%
dissolved, `Tuning.PLAN_SETTLE_MOVES` moves a sequence, no time limit) both
ways, interleaved (the order alternating), ``--rounds`` times; it reports each
way's CPU seconds (median and range), their ratio and whether the two passes
left every sequence in the same pack.

Run:

    PYTHONPATH=. .venv/bin/python benchmarks/settle_index.py --seed 640

Writes ``benchmarks/results/settle_index.md`` (``--output``).
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
import planners_long_context  # noqa: E402

from results_file import write_results  # noqa: E402
from tfpack.packing.algorithms import optimal  # noqa: E402
from tfpack.packing.algorithms._tuning import Tuning  # noqa: E402
from tfpack.packing.compiled import kernels  # noqa: E402


def loose_packs(strategies, counts, max_length):
    """The plan's packs with free tokens as the kernel's sequences: ``(pack, lengths, packs)``."""
    pack, lengths, packs = [], [], 0
    for strategy, number in zip(strategies, counts.tolist()):
        if sum(strategy) < max_length:
            for _ in range(number):
                pack += [packs] * len(strategy)
                lengths += list(strategy)
                packs += 1
    return np.array(pack, dtype=np.int64), np.array(lengths, dtype=np.int64), packs


def one_pass(pack, lengths, packs, total, max_length, depth, by_column):
    """The plan's first settling pass; its CPU seconds and each sequence's pack (-1: out)."""
    share = Tuning.PLAN_SETTLE[0][0]
    start = time.thread_time()
    after = kernels.settle(pack.tobytes(), lengths.tobytes(), np.ones_like(lengths).tobytes(),
                           packs, max_length, depth, depth, int(share * total),
                           int(Tuning.PLAN_SETTLE_MOVES * len(lengths)) + 64, 0.0, by_column)
    return time.thread_time() - start, after


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=640)
    parser.add_argument("--cases", type=int, default=48, help="the seed's first N cases")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=str(HERE / "results" / "settle_index.md"))
    args = parser.parse_args(argv)
    ways = {"rows": False, "column": True}
    rows = []
    for index in range(args.cases):
        case = planners_long_context.case(index, args.seed)
        max_length, depth = case["max_length"], case["depth"]
        histogram = planners_long_context.histogram_of(case)
        result = optimal.pack(histogram, max_length, depth, seed=0, time_limit=1.0)
        pack, lengths, packs = loose_packs(result.strategies, result.counts, max_length)
        if len(lengths) == 0:
            continue
        total = int(np.sum(result.counts))
        seconds, packed = {way: [] for way in ways}, {}
        for round_ in range(args.rounds):
            for way in list(ways) if round_ % 2 == 0 else list(ways)[::-1]:
                took, packed[way] = one_pass(pack, lengths, packs, total, max_length, depth,
                                             ways[way])
                seconds[way].append(took)
        same = packed["rows"] == packed["column"]
        rows.append((f"{args.seed}/{index}", max_length, depth, len(lengths), seconds, same))
        print(rows[-1][0], {way: round(statistics.median(s), 3) for way, s in seconds.items()},
              "same" if same else "DIFFERENT", flush=True)

    def spread(values):
        return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    ratios = [statistics.median(s["rows"]) / max(statistics.median(s["column"]), 1e-9)
              for *_, s, _ in rows]
    slow = [r for r, (*_, s, _) in zip(ratios, rows) if statistics.median(s["rows"]) >= 0.05]
    command = "PYTHONPATH=. .venv/bin/python benchmarks/settle_index.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    lines = ["# The settle kernel's search by column against by rows (`benchmarks/settle_index.py`)",
             "", f"Command: `{command.strip()}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, shared with other jobs. "
             f"Each case of seed {args.seed} planned by `optimal` at time_limit=1.0; on its packs "
             f"with free tokens, the plan's first settling pass ({Tuning.PLAN_SETTLE[0][0]:.0%} "
             f"dissolved, {Tuning.PLAN_SETTLE_MOVES} moves a sequence, no time limit) "
             f"{args.rounds} times each way, interleaved; the calling thread's CPU seconds, median "
             "(range); same: every sequence in the same pack both ways.", "",
             f"**Cases: {len(rows)}; the same packs on {sum(r[-1] for r in rows)}. Rows over "
             f"column (median seconds): worst {min(ratios):.2f}x, median "
             f"{statistics.median(ratios):.2f}x; on the {len(slow)} passes of 0.05 s or more by "
             f"rows: worst {min(slow, default=float('nan')):.2f}x, median "
             f"{statistics.median(slow) if slow else float('nan'):.2f}x.**", "",
             "| case | L | depth | sequences | rows s | column s | rows / column | same |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (name, max_length, depth, sequences, seconds, same), ratio in zip(rows, ratios):
        lines.append(f"| {name} | {max_length:,} | {depth} | {sequences:,} | "
                     f"{spread(seconds['rows'])} | {spread(seconds['column'])} | {ratio:.2f}x | "
                     f"{'yes' if same else 'no'} |")
    write_results(args.output, "\n".join(lines) + "\n")
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
