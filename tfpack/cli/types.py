"""Argument types of the command line: a bad value is argparse's one-line usage error.

>>> seed("3")
3
>>> seed("-1")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a non-negative integer. Received: -1
"""

from __future__ import annotations

import argparse

from tfpack.params import Directory, ExistingFile, Integer, OutputPath, Real, Text, argument

__all__ = ["count", "index", "input_directory", "input_file", "output_directory",
           "output_file", "seed", "text", "time_limit"]


# A seed: a non-negative integer (numpy refuses others, with a traceback).
seed = argument(Integer(0), convert=int)
count = argument(Integer(1), convert=int)
positive_number = argument(Real(0, closed="neither"), convert=float)  # L, K, M, batch sizes: positive integers
index = argument(Integer(0), convert=int)  # a step, a padding id, M (0: no predictions)
text = argument(Text())  # a glob, a planner name
input_file = argument(ExistingFile())
input_directory = argument(Directory())
output_file = argument(OutputPath("file"))
output_directory = argument(OutputPath("directory"))


def time_limit(text: str) -> float | None:
    """``--time-limit`` value: seconds (a number >= 0), or ``none`` for no limit."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds >= 0 or 'none'. Received: --time-limit={text}")
    return value


time_limit.__tfpack_constraint__ = [None, Real(0)]  # 'none' or seconds (tfpack.params)
