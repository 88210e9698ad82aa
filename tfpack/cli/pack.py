"""`tfpack pack`: Google BERT TFRecords -> packed TFRecord shards.

::

    tfpack pack --input 'wiki/*.tfrecord' --output packed --max-length 512 \\
        --max-sequences-per-pack 3 --algorithm lpfhp
    tfpack pack --input 'wiki/*.tfrecord' --output packed --max-length 512 \\
        --max-sequences-per-pack 3 --plan plan.json

Writes ``part-*.tfrecord``, ``plan.json``, ``stats.json`` and, last,
``manifest.json`` into ``--output``, which must be empty or missing unless
``--overwrite`` replaces a previous tfpack output there (see
`tfpack.engines.local`, `tfpack.formats.outputs`); read the packs back with
``tfpack.formats.read_packed(OUTPUT)``. Prints a summary (or, with ``--json``, the stats)
on stdout; progress bars go to stderr. ``--engine beam`` runs the same job as an
Apache Beam pipeline (`tfpack.beam`, docs/beam.md) and writes the same shards.
"""

from __future__ import annotations

import argparse
import json

from tfpack.cli import types
from tfpack.cli.plan import parse_max_sequences_per_pack
from tfpack.errors import TfpackError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack pack`` and its flags."""
    parser = subparsers.add_parser(
        "pack", help="pack Google-format BERT TFRecords into packed TFRecord shards",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, type=types.text,
                        help="glob (or comma-separated globs) of input TFRecords")
    parser.add_argument("--output", required=True, type=types.output_directory,
                        help="output directory")
    parser.add_argument("--max-length", type=types.count, required=True, help="L: tokens per pack")
    parser.add_argument("--max-sequences-per-pack", "--max-per-pack", required=True,
                        type=parse_max_sequences_per_pack,
                        help="K: sequences per pack, or 'none' (old name: --max-per-pack)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--algorithm", type=types.text, help="planner (default optimal)")
    source.add_argument("--plan", type=types.input_file, help="PLAN.json from `tfpack plan`")
    parser.add_argument("--max-predictions", type=types.index, default=None,
                        help="M: masked-LM predictions per pack (default: the most any pack needs)")
    parser.add_argument("--packs-per-shard", type=types.count, default=16384,
                        help="packs per output shard; bounds a Beam worker's memory "
                             "(default 16384)")
    parser.add_argument("--seed", type=types.seed, default=0, help="assignment and shuffle seed")
    parser.add_argument("--no-shuffle", action="store_true", help="keep packs in plan order")
    parser.add_argument("--batch-size", type=types.count, default=None,
                        help="packs per training batch, for --balance")
    parser.add_argument("--balance", nargs="?", const="sequences", default=None,
                        choices=("sequences", "tokens"),
                        help="order packs so that every --batch-size consecutive packs hold "
                             "the same number of sequences (default) or tokens; shards hold "
                             "whole batches")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a previous tfpack output in --output (recognised by its "
                             "manifest.json); without it --output must be empty or missing")
    parser.add_argument("--json", action="store_true",
                        help="print stats.json on stdout, nothing else")
    # Engines (tfpack.engines; docs/beam.md): all write the same shards for the same
    # arguments; each adds its own flags.
    from tfpack import engines

    parser.add_argument("--engine", choices=engines.names(), default="local",
                        help="local: this process (default); beam: an Apache Beam pipeline "
                             "on any runner (pip install 'tfpack[beam]')")
    for name in engines.names():
        engines.get(name).add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``tfpack pack``; returns the exit status."""
    from tfpack import engines

    for name in engines.names():
        given = engines.get(name).flags_given(args) if name != args.engine else []
        if given:
            raise TfpackError(f"`{given[0]}` needs `--engine {name}`. "
                              f"Received: --engine {args.engine}")
    plan = None
    if args.plan:
        from tfpack.packing import PackingPlan

        plan = PackingPlan.load(args.plan)  # TfpackError naming the file if unreadable
    stats = engines.pack(
        args.engine, args.input, args.output, overwrite=args.overwrite,
        engine_options=engines.get(args.engine).options_from(args), max_length=args.max_length,
        max_sequences_per_pack=args.max_sequences_per_pack, algorithm=args.algorithm,
        plan=plan, max_predictions_per_pack=args.max_predictions,
        packs_per_shard=args.packs_per_shard, seed=args.seed, shuffle=not args.no_shuffle,
        batch_size=args.batch_size, balance=args.balance)
    if args.json:
        print(json.dumps(stats))
    else:
        print(f"packed {stats['sequences']} sequences into {stats['packs']} packs "
              f"({len(stats['output_files'])} shards in {args.output})")
        print(f"efficiency {stats['efficiency']:.4f}, packing factor "
              f"{stats['packing_factor']:.3f}, {stats['seconds']['total']:.1f} s")
        balance = stats.get("balance")
        if balance:
            print(f"balanced {balance['by']}: {balance['low']}-{balance['high']} per batch of "
                  f"{balance['batch_size']} (mean {balance['mean']:.2f}, unbalanced "
                  f"{balance['unbalanced_low']}-{balance['unbalanced_high']}"
                  + ("" if balance["within_tolerance"] else
                     f"; {balance['excess']:.2f} beyond the tolerance "
                     f"{balance['tolerance']:.2f}") + ")")
    return 0
