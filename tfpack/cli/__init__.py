"""The `tfpack` command line.

Each subcommand lives in its own module of this package and exposes
``add_parser(subparsers)``, which registers its flags and sets ``run`` (a
function taking the parsed ``argparse.Namespace`` and returning an exit code).
Heavy imports (TensorFlow) happen inside ``run`` so that ``tfpack analyze``
and ``tfpack plan`` stay fast.

Bad input raises `tfpack.errors.TfpackError`; `main` prints its message on
stderr and returns exit status 2, never a traceback.

Example:

>>> from tfpack.cli import main
>>> main(["plan", "--help"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tfpack.errors import TfpackError
from tfpack.version import __version__

__all__ = ["main", "build_parser"]

# Order of the subcommands in `tfpack --help`.
COMMANDS = ("analyze", "plan", "pack", "train", "export", "demo")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="tfpack",
        description="Sequence packing without cross-contamination for TensorFlow/Keras.",
    )
    parser.add_argument("--version", action="version", version=f"tfpack {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"tfpack.cli.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the `tfpack` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except TfpackError as error:
        print(f"tfpack {args.command}: error: {error}", file=sys.stderr)
        return 2


def _console_main() -> None:  # pragma: no cover - thin wrapper for entry points
    sys.exit(main())
