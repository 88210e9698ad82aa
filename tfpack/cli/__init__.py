"""The `tfpack` command line.

Each subcommand lives in its own module of this package and exposes
``add_parser(subparsers)``, which registers its flags and sets ``run`` (a
function taking the parsed ``argparse.Namespace`` and returning an exit code).
Heavy imports (TensorFlow) happen inside ``run`` so that ``tfpack analyze``
and ``tfpack plan`` stay fast.

Bad input raises `tfpack.errors.TfpackError`; `main` prints its message on
stderr as one line and returns exit status 2, never a traceback. TensorFlow is
imported by the dispatcher with its native start-up lines silenced, so that
line is all stderr shows; ``--json`` prints exactly one JSON document whatever
native libraries write (`tfpack.cli.streams`); a closed pipe ends quietly.

Example:

>>> from tfpack.cli import main
>>> main(["plan", "--help"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import re
import sys

# Before anything imports TensorFlow: its C++ log threshold.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfpack.cli import streams  # noqa: E402
from tfpack.errors import TfpackError  # noqa: E402
from tfpack.version import __version__

__all__ = ["main", "build_parser"]

# Order of the subcommands in `tfpack --help`.
COMMANDS = ("analyze", "plan", "pack", "train", "export", "demo")
# The subcommands that import TensorFlow (analyze and plan stay fast without it).
_USE_TENSORFLOW = ("pack", "train", "export", "demo")


_DECLARED = re.compile(r"argument (?P<flag>[^/:\s]+)[^:]*: must be (?P<rule>.*?)\. "
                       r"Received: (?P<value>.*)")


class _OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one stderr line and exit 2.

    argparse prints the whole usage block before the error; the contract of
    the command line is one line naming what was wrong (``--help`` has the rest).
    Subcommand parsers inherit the class through ``add_subparsers``.
    """

    def error(self, message):
        message = " ".join(str(message).split())
        # A declared type's refusal (tfpack.params.argument) in the one pattern of tfpack's
        # errors: "`--flag` must be ... Received: --flag=value".
        declared = _DECLARED.fullmatch(message)
        if declared:
            flag, rule, value = declared.group("flag", "rule", "value")
            value = value if value.startswith(f"{flag}=") else f"{flag}={value}"
            message = f"`{flag}` must be {rule}. Received: {value}"
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args=None, namespace=None):
        # argparse drops a value of "--" (``--max-length=--``) and hands the flag an
        # empty list, past its type check: refuse it here, as a missing value.
        for arg in sys.argv[1:] if args is None else args:
            if isinstance(arg, str) and arg.startswith("--") and arg.endswith("=--"):
                self.error(f"argument {arg[:-3]}: expected a value. Received: {arg}")
        return super().parse_known_args(args, namespace)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = _OneLineParser(
        prog="tfpack",
        description="Sequence packing without cross-contamination for TensorFlow/Keras.",
    )
    parser.add_argument("--version", action="version", version=f"tfpack {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"tfpack.cli.{name}").add_parser(subparsers)
    return parser


def _import_tensorflow() -> None:
    """TensorFlow imported with Python's cyclic garbage collector paused, then the
    process's objects so far frozen out of its scans (a command owns its process).

    Importing TensorFlow and Keras creates about a million objects, none of them
    garbage; the collector scanned them over and over while they were made (about
    1.1 of 4.3 CPU s of ``import tensorflow, keras_hub`` on 2 cores, 2026-11-29)
    and again at every full collection after. Collection resumes as it was.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        streams.quiet_import_tensorflow()
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    """Run the `tfpack` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command in _USE_TENSORFLOW:
            _import_tensorflow()
        json_mode = streams.json_stdout() if getattr(args, "json", False) else None
        with json_mode or contextlib.nullcontext():
            return int(args.run(args) or 0)
    except TfpackError as error:
        message = " ".join(str(error).split())  # One line, whatever the message holds.
        print(f"tfpack {args.command}: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tfpack ... | head`: the reader is gone; end quietly.
        streams.close_broken_stdout()
        return 0


def _console_main() -> None:  # pragma: no cover - thin wrapper for entry points
    sys.exit(main())
