"""Parsed examples kept on disk between the local engine's two passes.

Pass 1 of the local engine (`tfpack.engines.local`) parses and checks every
record once (`tfpack.formats.records.scan_google_records`); `Spill` appends
what it parsed, without padding, to one flat file per feature (int32 or
float32 values back to back, in input order). Pass 2 reads them through
memory maps (`Spill.values`, read by `tfpack.engines.columns`), so no record
is read or parsed twice. Packs read the files in random order: the maps come
to hold about all of their pages, clean page cache the kernel can drop, not
memory the job allocates (docs/data.md, "Memory").

Example:

>>> import numpy as np, tempfile
>>> spill = Spill(tempfile.mkdtemp())
>>> spill.append({"input_ids": np.array([5, 6, 7, 8], np.int32),
...               "next_sentence_labels": np.array([0, 1], np.int32)})
>>> spill.close()
>>> values = spill.values()
>>> values["input_ids"][3:4].tolist(), values["next_sentence_labels"].tolist()
([8], [0, 1])
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["Spill"]


class Spill:
    """Flat per-feature files of parsed examples in ``folder`` (removed by its caller).

    `append` takes batches of features as `scan_google_records` hands them
    to ``keep``: a ragged feature's flat values, or one value per example;
    `close`, then read them (`values`).
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

    def values(self) -> dict[str, np.ndarray]:
        """Every feature's values, memory-mapped read-only (``del`` them to unmap)."""
        return {name: np.memmap(self._path(name), dtype, "r") if os.path.getsize(self._path(name))
                else np.zeros(0, dtype) for name, dtype in self._dtypes.items()}

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, f"{name}.values")
