"""`tfpack plan`: plan the packing of a length histogram and write the plan file.

::

    tfpack plan wikipedia_512 --max-length 512 --max-sequences-per-pack 3 \\
        --algorithm optimal --output plan.json

HISTOGRAM is a histogram file (text, one count per line, or ``.npy``; see
DESIGN.md) or the name of a bundled histogram such as ``wikipedia_512``.
Prints the plan's summary, or with ``--json`` only a JSON object
(``output``, ``algorithm``, ``max_length``, ``max_sequences_per_pack``,
``metrics``) on stdout. `tfpack pack --plan` and `PackingPlan.load` read the
file back.

``--time-limit`` gives `optimal` that many seconds (CPU time of its thread), best fit
decreasing included (default 1; ``none``: no limit, the same plan on every machine).

This module also holds the argument helpers `tfpack analyze` shares:
`parse_max_sequences_per_pack` (an integer or ``none``), `add_time_limit`
(seconds or ``none``, parsed by `types.time_limit`) and `load_histogram`
(file or bundled name, fitted to ``--max-length``).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from tfpack import datasets
from tfpack.cli import types
from tfpack.errors import TfpackError
from tfpack.params import Integer

__all__ = ["add_parser", "run", "parse_max_sequences_per_pack", "load_histogram"]


def parse_max_sequences_per_pack(text: str) -> int | None:
    """``--max-sequences-per-pack`` value: a positive integer, or ``none`` for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer or 'none'. Received: --max-sequences-per-pack={text}"
        )
    return value


# Declared for the common API test (tfpack.params): 'none' or a positive integer.
parse_max_sequences_per_pack.__tfpack_constraint__ = [None, Integer(1)]


def add_time_limit(parser: argparse.ArgumentParser) -> None:
    """The ``--time-limit`` flag (`optimal`'s `time_limit`; other planners ignore it)."""
    from tfpack.packing.plans import DEFAULT_TIME_LIMIT  # noqa: PLC0415

    parser.add_argument("--time-limit", type=types.time_limit, default=DEFAULT_TIME_LIMIT,
                        metavar="SECONDS",
                        help=f"CPU seconds optimal plans for, best fit included (default "
                             f"{DEFAULT_TIME_LIMIT:g}); 'none': no limit, the same plan anywhere")


def load_histogram(source: str, max_length: int) -> np.ndarray:
    """The histogram in file ``source`` or bundled under that name, as ``[max_length]`` counts.

    A histogram shorter than ``max_length`` is padded with zeros (its
    sequences all fit); a longer one may only have zeros beyond it.
    """
    from tfpack.packing.histograms import read_histogram, validate_max_length

    max_length = validate_max_length(max_length)
    if os.path.exists(source):
        counts = read_histogram(source)
    elif source in datasets.histogram_names():
        counts = datasets.histogram(source)
    else:
        raise TfpackError(
            "HISTOGRAM must be a histogram file or one of the bundled histograms "
            f"{datasets.histogram_names()}. Received: HISTOGRAM={source!r}"
        )
    too_long = counts[max_length:]
    if too_long.any():
        longest = int(np.flatnonzero(too_long)[-1]) + max_length + 1
        raise TfpackError(
            f"Every sequence must fit in max_length={max_length}, but {int(too_long.sum())} are "
            f"longer. Received: sequences of length up to {longest} in {source!r}"
        )
    return np.pad(counts[:max_length], (0, max(0, max_length - counts.size)))


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack plan`` and its flags."""
    parser = subparsers.add_parser(
        "plan", help="plan how to pack a length histogram; write PLAN.json",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("histogram", metavar="HISTOGRAM", type=types.text, help="histogram file or bundled name (e.g. wikipedia_512)")
    parser.add_argument("--max-length", type=types.count, required=True, help="L: tokens per pack")
    parser.add_argument("--max-sequences-per-pack", "--max-per-pack", required=True,
                        type=parse_max_sequences_per_pack,
                        help="K: sequences per pack, or 'none' (old name: --max-per-pack)")
    parser.add_argument("--algorithm", required=True, type=types.text, help="planner: none, greedy, ffd, bfd, spfhp, lpfhp, nnlshp, ennlshp, optimal")
    parser.add_argument("--output", required=True, type=types.output_file, help="where to write the plan file (JSON)")
    parser.add_argument("--seed", type=types.seed, default=0,
                        help="seed of randomized planners (greedy)")
    parser.add_argument("--json", action="store_true", help="print only a JSON object on stdout")
    add_time_limit(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Plan, write ``--output``, report."""
    from tfpack import packing

    counts = load_histogram(args.histogram, args.max_length)
    plan = packing.plan(counts, args.max_length, args.max_sequences_per_pack,
                        algorithm=args.algorithm, seed=args.seed, time_limit=args.time_limit)
    try:
        plan.save(args.output)
    except OSError as error:
        raise TfpackError(f"--output must be a writable file. Received: --output={args.output} ({error})") from None
    if args.json:
        print(json.dumps({
            "output": args.output,
            "algorithm": plan.algorithm,
            "max_length": plan.max_length,
            "max_sequences_per_pack": plan.max_sequences_per_pack,
            "metrics": plan.metrics,
        }))
    else:
        print(plan.summary())
        print(f"wrote {args.output}")
    return 0
