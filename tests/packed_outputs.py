"""Helpers for the reading tests: tiny packed outputs whose packs say where they stand.

Each pack holds one sequence whose first token is the pack's global index + 1,
so a reader that skips, repeats or reorders packs is caught by value
(`tests/formats/test_packed_reading.py`, `tests/faults/test_reading.py`).
"""

from __future__ import annotations

import os

import numpy as np

from tfpack.formats import blocks, manifest
from tfpack.formats.records import packed_features, serialize_packs

L, K = 6, 2


def make_packs(count: int, first: int = 0) -> dict[str, np.ndarray]:
    """``count`` one-sequence packs whose ``input_ids[0]`` is their global index + 1."""
    ids = np.zeros((count, L), np.int64)
    ids[:, 0] = np.arange(first, first + count) + 1
    ids[:, 1] = 7
    seq = (ids > 0).astype(np.int64)
    return {"input_ids": ids, "sequence_ids": seq, "position_ids": seq * np.arange(L)[None],
            "sequence_mask": np.eye(K, dtype=np.float32)[np.zeros(count, int)]}


def write_output(directory, sizes, block_records: int, files: tuple = ()) -> int:
    """Writes an output of shards holding ``sizes`` packs, blocks of ``block_records``.

    ``files`` names extra files already in ``directory`` that the manifest lists.
    Returns the number of packs written.
    """
    directory = str(directory)
    os.makedirs(directory, exist_ok=True)
    infos, first = [], 0
    for i, size in enumerate(sizes):
        path = os.path.join(directory, f"part-{i:05d}-of-{len(sizes):05d}.tfrecord")
        with manifest.atomic_path(path) as tmp, \
                blocks.ShardWriter(tmp, block_records=block_records) as writer:
            for record in serialize_packs(make_packs(size, first)):
                writer.write(record)
        infos.append(writer.shard_info(path))
        first += size
    manifest.write_manifest(directory, infos, features=packed_features(make_packs(1)),
                            max_length=L, max_sequences_per_pack=K,
                            max_predictions_per_pack=None, sequences=first, tokens=2 * first,
                            files=list(files))
    return first
