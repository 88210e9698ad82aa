"""Data bundled with tfpack: length histograms, a BERT vocabulary, English text.

Example:

>>> from tfpack import datasets
>>> counts = datasets.histogram("wikipedia_512")
>>> counts.shape, int(counts.sum())
((512,), 16279552)
"""

from __future__ import annotations

import importlib.resources

import numpy as np

from tfpack.datasets.text import bert_vocab_path, stdlib_documents, stdlib_modules
from tfpack.packing.histograms import read_histogram
from tfpack.params import Options, validate_params

__all__ = ["histogram", "histogram_names", "histogram_path", "bert_vocab_path",
           "stdlib_documents", "stdlib_modules"]

_DATA = "data"


def histogram_names() -> list[str]:
    """Names of the bundled histograms, e.g. ``["wikipedia_512"]``."""
    folder = importlib.resources.files(__name__).joinpath(_DATA)
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))


# The bundled histograms (package data: fixed when tfpack is installed).
_NAME = Options(*histogram_names())


@validate_params({"name": _NAME})
def histogram_path(name: str):
    """The path of a bundled histogram file (plain text, DESIGN.md format).

    >>> histogram_path("wikipedia_512").name
    'wikipedia_512.txt'
    """
    return importlib.resources.files(__name__).joinpath(_DATA, f"{name}.txt")


@validate_params({"name": _NAME})
def histogram(name: str) -> np.ndarray:
    """Load a bundled length histogram by name.

    Args:
        name: one of `histogram_names()`, e.g. ``"wikipedia_512"`` (the
            paper's BERT Wikipedia pre-training histogram, max length 512).

    Returns:
        int64 array of shape ``[max_length]``: entry ``i`` is the number of
        sequences of length ``i + 1``.
    """
    with importlib.resources.as_file(histogram_path(name)) as path:
        return read_histogram(path)
