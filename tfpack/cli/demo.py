"""`tfpack demo`: the main job on embedded data (see `tfpack.demo`).

Prints one line per stage, the summary table, and as its last line on stdout
one JSON object with at least ``efficiency``, ``packing_factor``,
``realized_speedup``, ``final_loss_packed``, ``final_loss_unpacked`` and
``saved_model``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from tfpack.cli import types

__all__ = ["add_parser"]


# Declared types of the DemoConfig fields (tfpack.params): sizes and counts are positive.
_TYPES = {int: types.count, float: types.positive_number, str: types.text}


def add_parser(subparsers) -> None:
    from tfpack.demo import DemoConfig

    defaults = DemoConfig()
    parser = subparsers.add_parser(
        "demo", help="train a small BERT packed and unpacked on real text; compare",
        description=(
            "Standard-library docstrings -> WordPiece -> BERT pre-training examples -> "
            "packing plan -> a small BERT trained packed and unpacked on the same "
            "sequences -> efficiency, realized speed-up, loss curves, a SavedModel."))
    parser.add_argument("--output-dir", default="demo_output", type=types.output_directory,
                        help="plots and training logs (default: %(default)s)")
    parser.add_argument("--saved-model", type=types.output_directory,
                        default=os.path.join("saved_models", "tfpack_demo"),
                        help="SavedModel of the packed model (default: %(default)s)")
    for field in dataclasses.fields(DemoConfig):
        value = getattr(defaults, field.name)
        kind = types.seed if field.name == "seed" else _TYPES[type(value)]
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=value, help=f"(default: %(default)s)")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from tfpack import demo

    config = demo.DemoConfig(**{f.name: getattr(args, f.name)
                                for f in dataclasses.fields(demo.DemoConfig)})

    def say(line: str) -> None:
        print(line, flush=True)

    result = demo.run(config, output_dir=args.output_dir, saved_model_dir=args.saved_model,
                      progress=args.progress, log=say)
    summary = result.summary()
    say(f"efficiency {summary['efficiency']:.2%} | packing factor "
        f"{summary['packing_factor']:.3f} | {summary['realized_speedup_label']}")
    say(f"final loss: packed {summary['final_loss_packed']:.4f} after "
        f"{summary['sequences_seen_packed']} sequences, unpacked "
        f"{summary['final_loss_unpacked']:.4f} after {summary['sequences_seen_unpacked']}")
    say(f"plots: {summary['plots']['lengths']}, {summary['plots']['losses']}; "
        f"SavedModel: {summary['saved_model']}")
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0
