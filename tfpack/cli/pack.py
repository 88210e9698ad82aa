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
``tfpack.data.read_packed(OUTPUT)``. Prints a summary (or, with ``--json``, the stats)
on stdout; progress bars go to stderr. ``--engine beam`` runs the same job as an
Apache Beam pipeline (`tfpack.beam`, docs/beam.md) and writes the same shards.
"""

from __future__ import annotations

import argparse
import json
import sys

from tfpack.cli.plan import parse_max_sequences_per_pack
from tfpack.errors import TfpackError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``tfpack pack`` and its flags."""
    parser = subparsers.add_parser(
        "pack", help="pack Google-format BERT TFRecords into packed TFRecord shards",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True,
                        help="glob (or comma-separated globs) of input TFRecords")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--max-length", type=int, required=True, help="L: tokens per pack")
    parser.add_argument("--max-sequences-per-pack", "--max-per-pack", type=parse_max_sequences_per_pack, required=True,
                        help="K: sequences per pack, or 'none' (old name: --max-per-pack)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--algorithm", help="planner (default optimal)")
    source.add_argument("--plan", help="PLAN.json from `tfpack plan`")
    parser.add_argument("--max-predictions", type=int, default=None,
                        help="M: masked-LM predictions per pack (default: the most any pack needs)")
    parser.add_argument("--packs-per-shard", type=int, default=16384,
                        help="packs per output shard; bounds memory (default 16384)")
    parser.add_argument("--seed", type=int, default=0, help="assignment and shuffle seed")
    parser.add_argument("--no-shuffle", action="store_true", help="keep packs in plan order")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a previous tfpack output in --output (recognised by its "
                             "manifest.json); without it --output must be empty or missing")
    parser.add_argument("--json", action="store_true",
                        help="print stats.json on stdout, nothing else")
    # Engines (docs/beam.md): both write the same shards for the same arguments.
    parser.add_argument("--engine", choices=("local", "beam"), default="local",
                        help="local: this process (default); beam: an Apache Beam pipeline "
                             "(pip install 'tfpack[beam]')")
    parser.add_argument("--beam-options", default=None,
                        help="Beam pipeline options for --engine beam, written with '=': "
                             "--beam-options=\"--runner=DataflowRunner --project=P\" "
                             "(default: in-process DirectRunner, 2 worker processes)")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``tfpack pack``; returns the exit status."""
    if args.max_length < 1:
        raise TfpackError("`--max-length` must be a positive integer. "
                          f"Received: --max-length={args.max_length}")
    from tfpack.engines.local import pack_records

    plan = None
    if args.plan:
        from tfpack.packing import PackingPlan

        plan = PackingPlan.load(args.plan)  # TfpackError naming the file if unreadable
    job = dict(
        max_length=args.max_length, max_sequences_per_pack=args.max_sequences_per_pack,
        algorithm=args.algorithm, plan=plan, max_predictions_per_pack=args.max_predictions,
        packs_per_shard=args.packs_per_shard, seed=args.seed, shuffle=not args.no_shuffle,
        overwrite=args.overwrite)
    if args.engine == "beam":
        stats = _pack_on_beam(args.input, args.output, job, args.beam_options)
    elif args.beam_options is not None:
        raise TfpackError("`--beam-options` needs `--engine beam`. "
                          f"Received: --engine {args.engine}")
    else:
        stats = pack_records(args.input, args.output, progress=sys.stderr.isatty(), **job)
    if args.json:
        print(json.dumps(stats))
    else:
        print(f"packed {stats['sequences']} sequences into {stats['packs']} packs "
              f"({len(stats['output_files'])} shards in {args.output})")
        print(f"efficiency {stats['efficiency']:.4f}, packing factor "
              f"{stats['packing_factor']:.3f}, {stats['seconds']['total']:.1f} s")
    return 0


def _pack_on_beam(input_pattern, output, job, beam_options) -> dict:
    """``--engine beam``: `tfpack.beam.pack_tfrecords`, Beam's log lines kept off stderr."""
    import logging

    try:
        from tfpack.beam import pack_tfrecords
    except ImportError as error:
        raise TfpackError("`--engine beam` needs Apache Beam (pip install 'tfpack[beam]'). "
                          f"Received: {error}") from None
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    return pack_tfrecords(input_pattern, output, beam_options=beam_options, **job)
