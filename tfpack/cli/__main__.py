"""`python -m tfpack.cli` runs the `tfpack` command line."""

from tfpack.cli import _console_main

_console_main()
