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

__all__ = ["seed"]


def seed(text: str) -> int:
    """A seed: a non-negative integer (numpy refuses others, with a traceback)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer. Received: {text}")
    return value


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
