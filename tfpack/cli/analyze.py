"""`tfpack analyze`: compare packing algorithms on a length histogram (the paper's Table 1).

::

    tfpack analyze wikipedia_512 --max-length 512 --max-sequences-per-pack 3,none \\
        --algorithms spfhp,lpfhp,nnlshp,optimal --plot wikipedia.png

For each algorithm and each ``--max-sequences-per-pack`` (repeat the flag or give a
comma list; an integer or ``none``), prints the strategies used, packs,
tokens, padding tokens, efficiency, packing factor, the theoretical speed-up
bound, the proven lower bound on packs and the solve time. ``--json`` prints
only ``{"histogram", "max_length", "sequences", "tokens",
"speedup_upper_bound", "results": [{"algorithm", "max_sequences_per_pack",
"metrics"}, ...]}`` on stdout. ``--plot FILE.png`` draws the length histogram
with the theoretical speed-up in the title.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from tfpack.cli import types
from tfpack.cli.plan import add_time_limit, load_histogram, parse_max_sequences_per_pack
from tfpack.errors import TfpackError

__all__ = ["add_parser", "run", "format_table"]

# ennlshp is left out by default: it takes minutes for max length 512.
DEFAULT_ALGORITHMS = ("none", "greedy", "ffd", "bfd", "spfhp", "lpfhp", "nnlshp", "optimal")
DEFAULT_DEPTHS = (3, None)

COLUMNS = (
    ("algorithm", "algorithm"),
    ("depth", "max per pack"),
    ("strategies_used", "strategies"),
    ("packs", "packs"),
    ("lower_bound_packs", "lower bound"),
    ("tokens", "tokens"),
    ("padding_tokens", "padding tokens"),
    ("efficiency", "efficiency %"),
    ("packing_factor", "packing factor"),
    ("speedup_upper_bound", "speed-up bound"),
    ("solve_seconds", "time s"),
)


def depth_list(text: str) -> list[int | None]:
    """One ``--max-sequences-per-pack`` value: comma-separated depths, each a positive
    integer or ``none``.

    >>> depth_list("3,none")
    [3, None]
    """
    parts = [part for part in text.split(",") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("must be a positive integer or 'none'. "
                                          f"Received: --max-sequences-per-pack={text!r}")
    return [parse_max_sequences_per_pack(part) for part in parts]


# Declared for the common API test (tfpack.params): each part 'none' or a positive integer.
depth_list.__tfpack_constraint__ = parse_max_sequences_per_pack.__tfpack_constraint__


def _depths(values: list[list[int | None]] | None) -> list[int | None]:
    if not values:
        return list(DEFAULT_DEPTHS)
    return list(dict.fromkeys(depth for value in values for depth in value))


def _cell(key: str, value) -> str:
    if key == "efficiency":
        return f"{100 * value:.3f}"
    if key in ("packing_factor", "speedup_upper_bound"):
        return f"{value:.4f}"
    if key == "solve_seconds":
        return f"{value:.3f}"
    if key == "depth":
        return "none" if value is None else str(value)
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def format_table(results: list[dict]) -> str:
    """A markdown table, one row per ``{"algorithm", "max_sequences_per_pack", "metrics"}``."""
    rows = [[_cell(key, {"algorithm": r["algorithm"], "depth": r["max_sequences_per_pack"], **r["metrics"]}[key])
             for key, _ in COLUMNS] for r in results]
    header = [title for _, title in COLUMNS]
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    left = {0, 1}

    def line(cells):
        return "| " + " | ".join(c.ljust(w) if i in left else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    rule = "| " + " | ".join("-" * w if i in left else "-" * (w - 1) + ":" for i, w in enumerate(widths)) + " |"
    return "\n".join([line(header), rule] + [line(row) for row in rows])


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack analyze`` and its flags."""
    parser = subparsers.add_parser(
        "analyze", help="compare packing algorithms on a length histogram (Table 1)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("histogram", metavar="HISTOGRAM", type=types.text, help="histogram file or bundled name (e.g. wikipedia_512)")
    parser.add_argument("--max-length", type=types.count, required=True, help="L: tokens per pack")
    parser.add_argument("--max-sequences-per-pack", "--max-per-pack", action="append", metavar="K",
                        type=depth_list,
                        help="K: sequences per pack or 'none'; repeat or comma-separate "
                             "(default: 3,none); old name: --max-per-pack")
    parser.add_argument("--algorithms", type=types.text,
                        help=f"comma-separated planners (default: {','.join(DEFAULT_ALGORITHMS)}, "
                        "skipping those that cannot handle the input)")
    parser.add_argument("--seed", type=types.seed, default=0,
                        help="seed of randomized planners (greedy)")
    parser.add_argument("--json", action="store_true", help="print only a JSON object on stdout")
    parser.add_argument("--plot", metavar="FILE.png", type=types.output_file, help="write a PNG of the length histogram")
    add_time_limit(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Plan with every algorithm and depth; print the table (or JSON); plot."""
    from tfpack import packing

    depths = _depths(args.max_sequences_per_pack)
    chosen = args.algorithms is not None
    names = [name.strip() for name in (args.algorithms or ",".join(DEFAULT_ALGORITHMS)).split(",") if name.strip()]
    unknown = [name for name in names if name not in packing.algorithm_names()]
    if not names or unknown:
        raise TfpackError(
            f"--algorithms must list some of {packing.algorithm_names()}. Received: --algorithms={args.algorithms}"
        )
    if args.plot is not None:  # "" too: refused, not skipped
        from tfpack import plots

        plots.check_target(args.plot, name="--plot")  # before minutes of planning, not after
    counts = load_histogram(args.histogram, args.max_length)
    if not counts.any():
        raise TfpackError(
            f"HISTOGRAM must count at least one sequence (the dataset is empty). Received: {args.histogram!r}"
        )
    results = []
    for name in names:
        cap = packing.algorithms.base.depth_cap(name)
        done = set()
        for depth in depths:
            effective = depth if cap is None else min(depth or cap, cap)
            if effective in done:
                print(f"tfpack analyze: {name} puts at most {cap} sequences in a pack; "
                      f"max per pack {depth or 'none'} gives its depth-{cap} plan again", file=sys.stderr)
                continue
            done.add(effective)
            try:
                plan = packing.plan(counts, args.max_length, depth, algorithm=name, seed=args.seed,
                                    time_limit=args.time_limit)
            except TfpackError as error:
                if chosen:
                    raise
                # A default algorithm that cannot take this input (nnlshp on long packs) is skipped.
                print(f"tfpack analyze: skipped {name}: {error}", file=sys.stderr)
                break
            results.append({"algorithm": name, "max_sequences_per_pack": depth, "metrics": plan.metrics})
    if not results:
        raise TfpackError(f"No algorithm could plan this histogram. Received: --algorithms={','.join(names)}")
    if args.plot is not None:
        from tfpack import plots

        plots.length_histogram(counts, args.plot, title=str(args.histogram), name="--plot")
    first = results[0]["metrics"]
    if args.json:
        print(json.dumps({
            "histogram": args.histogram,
            "max_length": args.max_length,
            "sequences": first["sequences"],
            "tokens": first["tokens"],
            "speedup_upper_bound": first["speedup_upper_bound"],
            "results": results,
        }))
        return 0
    print(f"{args.histogram}: {first['sequences']:,} sequences, {first['tokens']:,} tokens, "
          f"max length {args.max_length}, theoretical speed-up {first['speedup_upper_bound']:.4f}")
    print(format_table(results))
    if args.plot is not None:
        print(f"wrote {args.plot}")
    return 0
