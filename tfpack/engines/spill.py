"""Parsed examples kept on disk between the local engine's two passes.

Pass 1 of the local engine (`tfpack.engines.local`) parses and checks every
record once (`tfpack.formats.records.scan_google_records`); `Spill` appends
what it parsed, without padding, to one flat file per feature (int32 or
float32 values back to back, in input order). Pass 2 reads back, a chunk of
packs at a time, only the runs of values its packs hold (`SpillReader.take`,
read by `tfpack.engines.columns`), so no record is read or parsed twice.

Packs read the files in random order. Pass 2 reads them with positioned reads
(``pread``, compiled: `tfpack.formats.compiled`) into each chunk's own arrays,
not through memory maps: a map of the files would keep every page a pack
touched resident in the process (file-backed RSS growing to the spill's size,
which a container's memory limit counts), while a positioned read leaves
nothing mapped: what pass 2 holds is its chunks, whatever the spill's size
(docs/data.md, "Memory").

Example:

>>> import numpy as np, tempfile
>>> spill = Spill(tempfile.mkdtemp())
>>> spill.append({"input_ids": np.array([5, 6, 7, 8], np.int32),
...               "next_sentence_labels": np.array([0, 1], np.int32)})
>>> spill.close()
>>> with spill.reader() as reader:  # runs [3, 4) then [0, 2), back to back
...     reader.take("input_ids", np.array([3, 0]), np.array([1, 2])).tolist()
[8, 5, 6]
"""

from __future__ import annotations

import os

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["Spill", "SpillReader"]


class Spill:
    """Flat per-feature files of parsed examples in ``folder`` (removed by its caller).

    `append` takes batches of features as `scan_google_records` hands them
    to ``keep``: a ragged feature's flat values, or one value per example;
    `close`, then read them (`reader`).
    """

    def __init__(self, folder: str):
        self.folder = folder
        self._files: dict = {}
        self._dtypes: dict[str, np.dtype] = {}

    def append(self, features: dict[str, np.ndarray]) -> None:
        for name, values in features.items():
            if name not in self._files:
                self._files[name] = open(self._path(name), "wb")
                self._dtypes[name] = values.dtype
            # file.write, not ndarray.tofile: a full disk then raises the
            # OSError naming its cause (ENOSPC, EFBIG), not a short-write count.
            self._files[name].write(np.ascontiguousarray(values, self._dtypes[name]).data)

    def close(self) -> None:
        for file in self._files.values():
            file.close()

    def reader(self) -> SpillReader:
        """A `SpillReader` of the closed spill (a context manager: it closes its files)."""
        return SpillReader({name: (self._path(name), dtype) for name, dtype in self._dtypes.items()})

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, f"{name}.values")


class SpillReader:
    """Runs of a spill's values, read with positioned reads (`Spill.reader`).

    Safe to call from several threads at once (``pread`` moves no shared
    file offset; the reads run without the GIL).

    Args:
        files: feature -> ``(path, dtype)`` of its flat file.
    """

    def __init__(self, files: dict[str, tuple[str, np.dtype]]):
        from tfpack.formats.compiled import wire

        self._read = wire.read_runs
        self._files = {}
        try:
            for name, (path, dtype) in files.items():
                self._files[name] = (os.open(path, os.O_RDONLY), np.dtype(dtype), path)
        except BaseException:
            self.close()
            raise

    def __contains__(self, name: str) -> bool:
        return name in self._files

    def take(self, name: str, starts: np.ndarray, runs: np.ndarray | None = None) -> np.ndarray:
        """Values ``[starts[m], starts[m] + runs[m])`` of ``name``, run after run, back to back.

        Args:
            name: a spilled feature.
            starts: int ``[n]``, where each run starts (in values, not bytes).
            runs: int ``[n]``, each run's length; ``None``: one value each.

        Returns:
            A new array of ``runs.sum()`` (or ``n``) values of the feature's dtype.

        Raises:
            TfpackError: the file ends before a run does (the spill was cut
                short while the job ran).
        """
        fd, dtype, path = self._files[name]
        starts = np.ascontiguousarray(starts, np.int64)
        runs = None if runs is None else np.ascontiguousarray(runs, np.int64)
        out = np.empty(len(starts) if runs is None else int(runs.sum()), dtype)
        got = self._read(fd, dtype.itemsize, starts, runs, out)
        if got != out.nbytes:
            raise TfpackError(
                "The spill of pass 1 must stay whole until pass 2 has read it. Received: "
                f"file={path!r} ends before its runs ({got} of {out.nbytes} bytes read)")
        return out

    def close(self) -> None:
        for fd, _, _ in self._files.values():
            os.close(fd)
        self._files = {}

    def __enter__(self) -> SpillReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
