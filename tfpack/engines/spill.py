"""Parsed examples kept on disk between the local engine's two passes.

Pass 1 of the local engine (`tfpack.engines.local`) parses and checks every
record once (`tfpack.formats.records.scan_google_records`); `Spill` appends
what it parsed, without padding, to one flat file per feature (int32 or
float32 values back to back, in input order). Pass 2 takes one shard's
examples back (`Spill.gather`) through a memory map opened for that shard
only, so memory holds one shard's examples, never the dataset's, and no
record is read or parsed twice.

Example:

>>> import numpy as np, tempfile
>>> spill = Spill(tempfile.mkdtemp())
>>> spill.append({"input_ids": np.array([5, 6, 7, 8], np.int32),
...               "next_sentence_labels": np.array([0, 1], np.int32)})
>>> spill.close()
>>> examples = spill.gather(np.array([1]), {"input_ids": np.array([3, 1])},
...                         {"input_ids": np.array([0, 3])})
>>> examples["input_ids"].to_list(), examples["next_sentence_labels"].numpy().tolist()
([[8]], [1])
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["Spill"]


class Spill:
    """Flat per-feature files of parsed examples in ``folder`` (removed by its caller).

    `append` takes batches of features as `scan_google_records` hands them
    to ``keep``: a ragged feature's flat values, or one value per example;
    `close`, then `gather` any examples back.
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

    def gather(self, members: np.ndarray, lengths: dict[str, np.ndarray],
               offsets: dict[str, np.ndarray]) -> dict:
        """Examples ``members`` (global indices), as `parse_google_batch` returns them.

        Args:
            members: int ``[n]``, the examples to take, in the order wanted.
            lengths: feature -> int ``[N]`` values of every example (ragged
                features only; the others have one value per example).
            offsets: feature -> int ``[N]`` where each example's values start
                in its file (the exclusive cumulative sum of ``lengths``).

        Returns:
            feature -> `tf.RaggedTensor` ``[n, None]`` or `tf.Tensor` ``[n]``.
        """
        import tensorflow as tf

        members = np.asarray(members, np.int64)
        examples = {}
        for name, values in self.values().items():
            if name not in lengths:
                examples[name] = tf.constant(values[members])
                continue
            counts = lengths[name][members]
            starts = offsets[name][members]
            # Index of every value taken: each example's start, then +1 along it.
            index = np.arange(int(counts.sum()), dtype=np.int64)
            index += np.repeat(starts - (np.cumsum(counts) - counts), counts)
            examples[name] = tf.RaggedTensor.from_row_lengths(
                np.asarray(values[index]), counts.astype(np.int64), validate=False)
            del values  # unmapped: only this shard's pages were touched
        return examples

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, f"{name}.values")
