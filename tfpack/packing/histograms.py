"""Length histograms: build them from lengths, read them from files.

A histogram is an int64 array of shape ``[max_length]`` whose entry ``i`` is
the number of sequences of length ``i + 1``. Histogram files (DESIGN.md) are
plain text, one integer per line (blank lines and ``#`` comments ignored), or
``.npy`` files holding the same 1-D array::

    # lengths of my dataset, max length 4
    0
    3      <- three sequences of length 2
    1
    5

Example:

>>> from tfpack.packing import histogram
>>> histogram([2, 2, 4, 1], max_length=4).tolist()
[1, 2, 0, 1]
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import Anything, ExistingFile, Integer, validate_params

# The longest pack (L) tfpack accepts: histograms, plans and packs cost O(L)
# memory each, so larger values fail fast instead of exhausting memory.
MAX_LENGTH_LIMIT = 1 << 20

__all__ = [
    "MAX_LENGTH_LIMIT",
    "histogram",
    "length_range_error",
    "read_histogram",
    "validate_histogram",
    "validate_lengths",
    "validate_max_length",
    "validate_max_sequences_per_pack",
    "validate_seed",
]


def validate_max_length(max_length) -> int:
    """``max_length`` as an int; a clear error unless it is a positive integer."""
    if isinstance(max_length, bool) or not isinstance(max_length, (int, np.integer)) or max_length < 1:
        raise TfpackError(
            f"`max_length` must be a positive integer. Received: max_length={max_length!r}"
        )
    if max_length > MAX_LENGTH_LIMIT:
        raise TfpackError(
            f"`max_length` must be at most {MAX_LENGTH_LIMIT:,} tokens (a histogram holds one "
            f"count per length). Received: max_length={max_length!r}"
        )
    return int(max_length)


def validate_max_sequences_per_pack(max_sequences_per_pack) -> int | None:
    """``max_sequences_per_pack`` as an int or ``None`` (no limit)."""
    if max_sequences_per_pack is None:
        return None
    if (
        isinstance(max_sequences_per_pack, bool)
        or not isinstance(max_sequences_per_pack, (int, np.integer))
        or max_sequences_per_pack < 1
    ):
        raise TfpackError(
            "`max_sequences_per_pack` must be a positive integer or None (no limit). "
            f"Received: max_sequences_per_pack={max_sequences_per_pack!r}"
        )
    return int(max_sequences_per_pack)


def validate_seed(seed) -> int:
    """``seed`` as an int; a clear error unless it is a non-negative integer.

    >>> validate_seed(3)
    3
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TfpackError(f"`seed` must be a non-negative integer. Received: seed={seed!r}")
    return int(seed)


def validate_lengths(lengths: Iterable[int] | np.ndarray, max_length: int) -> np.ndarray:
    """Lengths as int64 ``[n]``; a clear error naming the first bad length.

    Every length must be an integer in ``1..max_length``.
    """
    max_length = validate_max_length(max_length)
    array = np.asarray(lengths)
    if array.ndim != 1:
        raise TfpackError(
            f"`lengths` must be a 1-D sequence of integers. Received: lengths with shape {array.shape}"
        )
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.issubdtype(array.dtype, np.floating) or not np.all(np.mod(array, 1) == 0):
            raise TfpackError(
                f"`lengths` must hold integers. Received: lengths of dtype {array.dtype}"
            )
    array = array.astype(np.int64, copy=False)
    bad = np.flatnonzero((array < 1) | (array > max_length))
    if bad.size:
        index = int(bad[0])
        raise length_range_error(bad.size, index, int(array[index]), max_length)
    return array


def length_range_error(count: int, index: int, length: int, max_length: int) -> TfpackError:
    """The error for ``count`` lengths outside ``1..max_length``, the first ``lengths[index]``."""
    return TfpackError(
        f"Every length must be between 1 and max_length={max_length} "
        f"({count} are not). Received: lengths[{index}]={length}"
    )


def validate_histogram(counts, max_length: int | None = None) -> np.ndarray:
    """A histogram as int64 ``[max_length]``; a clear error when it is malformed.

    Args:
        counts: non-negative integer counts, entry ``i`` for length ``i + 1``.
        max_length: expected size; ``None`` accepts any non-empty size.
    """
    array = np.asarray(counts)
    if array.ndim != 1 or array.size == 0:
        raise TfpackError(
            "`histogram` must be a non-empty 1-D array of counts. "
            f"Received: histogram with shape {array.shape}"
        )
    if not np.issubdtype(array.dtype, np.integer):
        if not np.issubdtype(array.dtype, np.floating) or not np.all(np.mod(array, 1) == 0):
            raise TfpackError(
                f"`histogram` must hold integer counts. Received: histogram of dtype {array.dtype}"
            )
    int64_max = np.iinfo(np.int64).max
    if array.dtype == object or (array.dtype.kind in "uf" and array.max() > int64_max):
        raise TfpackError(
            f"`histogram` counts must fit int64 (at most {int64_max}). "
            f"Received: a count of {max(array.tolist())}")
    array = array.astype(np.int64)
    if max_length is not None and array.size != max_length:
        raise TfpackError(
            "`histogram` must have one count per length 1..max_length, i.e. "
            f"{max_length} entries. Received: histogram with {array.size} entries"
        )
    negative = np.flatnonzero(array < 0)
    if negative.size:
        index = int(negative[0])
        raise TfpackError(
            "`histogram` counts must be non-negative. "
            f"Received: histogram[{index}]={int(array[index])} (length {index + 1})"
        )
    # Metrics multiply sequence counts by lengths: refuse what would wrap int64.
    sequences = int(array.sum(dtype=object))
    if sequences * array.size > int64_max:
        raise TfpackError(
            f"`histogram` must count at most {int64_max // array.size} sequences for "
            f"max_length={array.size}, so that token counts fit int64. "
            f"Received: {sequences} sequences")
    return array


@validate_params({"lengths": Anything("integer lengths in 1..max_length, checked by `validate_lengths`"),
                  "max_length": Integer(1)})
def histogram(lengths: Iterable[int] | np.ndarray, max_length: int) -> np.ndarray:
    """Count sequences per length.

    Args:
        lengths: integer sequence lengths, each in ``1..max_length``.
        max_length: maximum tokens per pack.

    Returns:
        int64 ``[max_length]``: entry ``i`` counts the sequences of length ``i + 1``.

    Example:

    >>> histogram([3, 1, 3], max_length=4).tolist()
    [1, 0, 2, 0]
    """
    array = validate_lengths(lengths, max_length)
    return np.bincount(array, minlength=int(max_length) + 1)[1:].astype(np.int64)


@validate_params({"path": ExistingFile()})
def read_histogram(path: str | os.PathLike) -> np.ndarray:
    """Read a histogram file: plain text (one count per line) or ``.npy``.

    Args:
        path: the file; its number of entries is the max length.

    Returns:
        int64 ``[max_length]``: entry ``i`` counts the sequences of length ``i + 1``.

    Example:

    >>> import pathlib, tempfile
    >>> file = pathlib.Path(tempfile.mkdtemp()) / "lengths.txt"
    >>> _ = file.write_text("# max length 3\\n0\\n2\\n1\\n")
    >>> read_histogram(file).tolist()
    [0, 2, 1]
    """
    name = os.fspath(path)
    if name.endswith(".npy"):
        try:
            counts = np.load(name, allow_pickle=False)
        except (ValueError, OSError) as error:
            raise TfpackError(
                f"A .npy histogram file must hold a 1-D integer array. Received: path={name!r} ({error})"
            ) from None
        return validate_histogram(counts)
    try:
        # utf-8-sig: a byte-order mark that Windows editors put first is not a count's text.
        with open(name, encoding="utf-8-sig") as file:
            lines = file.readlines()
    except (OSError, UnicodeDecodeError) as error:
        raise TfpackError(
            f"A histogram file must be readable text (or .npy). Received: path={name!r} ({error})"
        ) from None
    counts = []
    for number, line in enumerate(lines, start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            counts.append(int(text))
        except ValueError:
            raise TfpackError(
                "Each line of a histogram file must hold one integer count. "
                f"Received: line {number} of {name!r} = {_excerpt(line.strip())!r}"
            ) from None
        if not -2 ** 63 <= counts[-1] < 2 ** 63:  # else "dtype object", naming no line
            raise TfpackError(
                "Each count of a histogram file must fit int64 (at most 2**63 - 1). "
                f"Received: line {number} of {name!r} = {_excerpt(text)!r}")
    if not counts:
        raise TfpackError(f"A histogram file must hold at least one count. Received: path={name!r}")
    return validate_histogram(counts)


def _excerpt(text: str, most: int = 60) -> str:
    """``text``, cut to ``most`` characters with an ellipsis, for an error message."""
    return text if len(text) <= most else text[:most] + "..."
