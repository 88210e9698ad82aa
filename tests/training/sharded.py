"""Test helper: a packed output of several shards of chosen (uneven) pack counts."""

import os

import numpy as np
import tensorflow as tf

from tfpack.formats import manifest
from tfpack.formats.records import packed_features, serialize_packs


def write_sharded(directory, packs: dict, counts) -> str:
    """Write ``packs`` (numpy ``[N, ...]``) as shards of ``counts`` packs, then the manifest."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    assert sum(counts) == len(packs["input_ids"])
    shards, start = [], 0
    for i, count in enumerate(counts):
        name = f"part-{i:05d}-of-{len(counts):05d}.tfrecord"
        part = {n: v[start:start + count] for n, v in packs.items()}
        with manifest.atomic_path(os.path.join(directory, name)) as tmp, \
                tf.io.TFRecordWriter(tmp) as writer:
            for record in (serialize_packs(part) if count else []):
                writer.write(record)
        shards.append((name, count))
        start += count
    features = packed_features({n: v[:1] for n, v in packs.items()})
    manifest.write_manifest(
        directory, shards, features=features, max_length=packs["input_ids"].shape[1],
        max_sequences_per_pack=packs["sequence_mask"].shape[1],
        max_predictions_per_pack=packs["masked_lm_positions"].shape[1],
        sequences=int((packs["sequence_mask"] > 0).sum()), created_by="tests")
    return directory


def in_order(packs: dict, order, empty: dict) -> dict:
    """The packs at ``order`` (``-1``: ``empty``, one pack), stacked."""
    return {n: np.stack([v[i] if i >= 0 else empty[n] for i in order]) for n, v in packs.items()}
