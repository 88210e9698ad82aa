"""PNG plots for the command line, the demo and the examples (matplotlib, Agg).

Example:

>>> import numpy as np, tempfile, os
>>> from tfpack import plots
>>> path = os.path.join(tempfile.mkdtemp(), "lengths.png")
>>> plots.length_histogram(np.array([0, 3, 5, 2]), path, title="toy")
>>> os.path.getsize(path) > 0
True
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping, Sequence

import numpy as np

from tfpack import atomic
from tfpack.errors import TfpackError
from tfpack.params import writable_folder

__all__ = ["check_target", "length_histogram", "loss_curves", "theoretical_speedup"]


def theoretical_speedup(counts: np.ndarray) -> float:
    """Padded tokens over real tokens: the speed-up if no padding were processed."""
    counts = np.asarray(counts, dtype=np.float64)
    lengths = np.arange(1, counts.size + 1)
    return float(counts.sum() * counts.size / (counts @ lengths))


def check_target(path: str, name: str = "path") -> None:
    """Refuse, before any work, a plot path that holds another file or has no folder.

    Example:

    >>> check_target("/nonexistent-folder/plot.png", name="--plot")
    Traceback (most recent call last):
    ...
    tfpack.errors.TfpackError: `--plot` must be a file in an existing folder. Received: --plot=/nonexistent-folder/plot.png
    """
    if not path:
        raise TfpackError(f"`{name}` must be a file path. Received: {name}={path!r}")
    if os.path.lexists(path) and not _is_png(path):
        raise TfpackError(
            f"`{name}` must be a new file or an earlier PNG, which is replaced; it holds "
            f"another file, kept as it is. Received: {name}={path}"
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TfpackError(f"`{name}` must be a file in an existing folder. Received: {name}={path}")
    if not writable_folder(folder):  # refused now, not after the planning
        raise TfpackError(f"`{name}` must be a file in a writable folder. Received: {name}={path}")


@contextlib.contextmanager
def _figure(path: str, name: str, figsize=(8, 4)) -> Iterator:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_target(path, name)
    figure, axes = plt.subplots(figsize=figsize)
    try:
        yield axes
        figure.tight_layout()
        with atomic.atomic_path(path) as partial:
            figure.savefig(partial, format="png")
    except OSError as error:
        raise TfpackError(
            f"`{name}` must be a writable file path. Received: {name}={path} ({error})"
        ) from None
    finally:
        plt.close(figure)


def length_histogram(counts: np.ndarray, path: str, title: str, *, name: str = "path") -> None:
    """Write a PNG bar chart of a length histogram with its theoretical speed-up.

    Args:
        counts: ``counts[i]`` = sequences of length ``i + 1``.
        path: the PNG file to write.
        title: the start of the plot title; the speed-up is appended.
        name: how to name ``path`` in an error message (e.g. ``"--plot"``).
    """
    counts = np.asarray(counts)
    lengths = np.arange(1, counts.size + 1)
    with _figure(path, name) as axes:
        axes.bar(lengths, counts, width=1.0, color="tab:blue")
        axes.set_xlabel("sequence length (tokens)")
        axes.set_ylabel("sequences")
        nonzero = counts[counts > 0]
        if nonzero.size and counts.max() > 100 * max(1, np.median(nonzero)):
            axes.set_yscale("log")
        axes.set_title(f"{title}: theoretical speed-up {theoretical_speedup(counts):.3f}x")


def loss_curves(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], path: str,
                *, xlabel: str = "sequences seen", ylabel: str = "loss",
                title: str = "", name: str = "path") -> None:
    """Write a PNG with one line per run, e.g. packed and unpacked training.

    Args:
        curves: run name -> ``(x values, y values)``.
        path: the PNG file to write.
    """
    with _figure(path, name) as axes:
        for label, (x, y) in curves.items():
            axes.plot(x, y, marker="o", markersize=3, label=label)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        if title:
            axes.set_title(title)
        axes.legend()
        axes.grid(alpha=0.3)


def _is_png(path: str) -> bool:
    """Whether ``path`` is a file that starts with PNG's signature."""
    if not os.path.isfile(path):  # a FIFO's open would wait for a writer forever
        return False
    try:
        with open(path, "rb") as file:
            return file.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False
