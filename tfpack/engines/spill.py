"""Parsed examples kept on disk between the local engine's two passes.

Pass 1 of the local engine (`tfpack.engines.local`) parses and checks every
record once (`tfpack.formats.records.scan_google_records`); `Spill` appends
what it parsed, without padding, to one flat file, example after example:
each example's features back to back (4-byte values: int32, or float32),
in the order of the first batch's features, written with ``writev`` straight
from the scan's arrays. Pass 2 reads back, a chunk of
packs at a time, only its examples (`SpillReader.read`, called by
`tfpack.engines.columns`), so no record is read or parsed twice.

Packs read the spill in random order. Pass 2 reads it with positioned reads
(``pread``, compiled: `tfpack.formats.compiled`), one per example (its
features lie together), into each chunk's own array, not through memory
maps: a map of the file would keep every page a pack touched resident in the
process (file-backed RSS growing to the spill's size, which a container's
memory limit counts), while a positioned read leaves nothing mapped: what
pass 2 holds is its chunks, whatever the spill's size (docs/data.md,
"Memory"), at 0.80x-0.99x the memory maps' speed (`benchmarks/spill_reads.py`;
one read per feature instead of per example was 0.41x-0.66x).

Example:

>>> import numpy as np, tempfile
>>> spill = Spill(tempfile.mkdtemp())
>>> spill.append({"input_ids": np.array([5, 6, 7, 8], np.int32),       # 3 then 1 tokens
...               "next_sentence_labels": np.array([0, 1], np.int32)},  # one each
...              runs={"input_ids": np.array([3, 1])})
>>> spill.close()
>>> with spill.reader() as reader:  # example 1, then example 0
...     read = reader.read(starts={"input_ids": np.array([3, 0]),
...                                "next_sentence_labels": np.array([1, 0])},
...                        runs={"input_ids": np.array([1, 3])})
>>> values, where = read["input_ids"]      # example 0's 3 tokens start at where[1]
>>> labels, at = read["next_sentence_labels"]
>>> values[where[1]:where[1] + 3].tolist(), labels[at].tolist()
([5, 6, 7], [1, 0])
"""

from __future__ import annotations

import os

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["Spill", "SpillReader"]

_NAME = "examples.values"
_MOST_ITEMS = (2 ** 63 - 1) // 4  # 4-byte values a file offset can address


class Spill:
    """One flat file of parsed examples in ``folder`` (removed by its caller).

    `append` takes batches of features as `scan_google_records` hands them
    to ``keep``; `close`, then read them back (`reader`).
    """

    def __init__(self, folder: str):
        self.folder = folder
        self._fd = None
        self._dtypes: dict[str, np.dtype] = {}  # the features, in the order of each example

    def append(self, features: dict[str, np.ndarray],
               runs: dict[str, np.ndarray] | None = None) -> None:
        """Append a batch of examples.

        Args:
            features: name -> flat values of 4 bytes each: a ragged
                feature's values, every example's back to back, or one value
                per example. The same names in every batch.
            runs: name -> int ``[B]``, each example's values of a ragged
                feature; a feature not in ``runs`` has one value per example.
        """
        from tfpack.formats.compiled import wire

        runs = runs or {}
        if self._fd is None:
            self._dtypes = {name: np.asarray(v).dtype for name, v in features.items()}
            if any(dtype.itemsize != 4 for dtype in self._dtypes.values()):
                raise ValueError(f"A spill holds 4-byte values. Received: {self._dtypes}")
            self._fd = os.open(os.path.join(self.folder, _NAME),
                               os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sources = [np.ascontiguousarray(features[name], dtype)
                   for name, dtype in self._dtypes.items()]
        counts = [None if runs.get(name) is None else np.ascontiguousarray(runs[name], np.int64)
                  for name in self._dtypes]
        # Example after example, straight from the batch's arrays (writev, no copy between); a
        # full disk raises the OSError naming its cause (ENOSPC, EFBIG).
        wire.write_interleaved(self._fd, sources, counts)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def reader(self) -> SpillReader:
        """A `SpillReader` of the closed spill (a context manager: it closes its file)."""
        return SpillReader(os.path.join(self.folder, _NAME), self._dtypes)


class SpillReader:
    """Examples read back from a spill with positioned reads (`Spill.reader`).

    Safe to call from several threads at once (``pread`` moves no shared
    file offset; the reads run without the GIL).

    Args:
        path: the spill's file.
        dtypes: its features, in their order within each example, and their dtypes.
    """

    def __init__(self, path: str, dtypes: dict[str, np.dtype]):
        from tfpack.formats.compiled import wire

        self._read = wire.read_runs
        self.path = path
        self._dtypes = dict(dtypes)
        self._fd = os.open(path, os.O_RDONLY) if dtypes else None

    def __contains__(self, name: str) -> bool:
        return name in self._dtypes

    def read(self, starts: dict[str, np.ndarray], runs: dict[str, np.ndarray]
             ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Some examples' values, one positioned read an example, in the order asked.

        Args:
            starts: every feature -> int ``[n]``: where each example's values
                start among the feature's own values (the exclusive cumulative
                sum of its runs over the whole spill; for a feature of one
                value an example, the example's index).
            runs: name -> int ``[n]``, each example's values of a ragged
                feature; a feature not in ``runs`` has one value an example.

        Returns:
            feature -> ``(values, where)``: a view, in the feature's dtype,
            of one new array holding the examples (every feature's values),
            and where each example's values of the feature start in it:
            example ``i``'s are ``values[where[i]:where[i] + runs[name][i]]``.

        Raises:
            TfpackError: the file ends before an example does (the spill
                was cut short while the job ran).
        """
        if set(starts) != set(self._dtypes):
            raise ValueError(f"`starts` must name every spilled feature, {sorted(self._dtypes)}. "
                             f"Received: {sorted(starts)}")
        count = len(next(iter(starts.values()), ()))
        sizes = {name: np.ones(count, np.int64) if runs.get(name) is None
                 else np.asarray(runs[name], np.int64) for name in self._dtypes}
        starts = {name: np.asarray(starts[name], np.int64) for name in self._dtypes}
        if count:  # the sums below must not wrap in int64 (a wrapped start reads other bytes)
            lowest = min(int(v.min(initial=0)) for v in (*starts.values(), *sizes.values()))
            end = sum(int(v.max(initial=0)) for v in (*starts.values(), *sizes.values()))
            if lowest < 0 or end > _MOST_ITEMS:
                raise ValueError("`starts` and `runs` must be at least 0 and address the spill "
                                 f"within 2**63 bytes. Received: values {lowest} to {end}")
        # An example's values follow those of every earlier example, of every feature.
        first = sum(starts[name] for name in self._dtypes)
        size = sum(sizes.values()) if sizes else np.zeros(0, np.int64)
        block = np.empty(int(size.sum()), np.int32)
        if count:
            got = self._read(self._fd, 4, np.ascontiguousarray(first, np.int64),
                             np.ascontiguousarray(size, np.int64), block)
            if got != block.nbytes:
                raise TfpackError(
                    "The spill of pass 1 must stay whole until pass 2 has read it. Received: "
                    f"file={self.path!r} ends before its examples ({got} of {block.nbytes} "
                    "bytes read)")
        where, read = np.cumsum(size) - size, {}
        for name, dtype in self._dtypes.items():
            read[name] = (block.view(dtype), where.copy())
            where += sizes[name]
        return read

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> SpillReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
