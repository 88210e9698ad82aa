"""From a plan's ``(order, splits)`` to a dataset of packs with static shapes.

The last step of every mode of `tfpack.data.pack` (and of `tfpack.data.flatten`):
``order`` lists example indices pack by pack, ``splits`` cuts it into packs
(as `tfpack.packing.flow` returns them); `assemble` builds the packed
features, and the dataset gets the fixed shapes ``[L]``, ``[K]``, ``[M]``.

>>> import tensorflow as tf
>>> from tfpack.features import FeatureRoles
>>> examples = {"input_ids": tf.ragged.constant([[5, 6, 7], [8, 9], [3]])}
>>> packs = pack_dataset(examples, [0, 2, 1], [0, 2, 3], FeatureRoles.causal_lm(), 6, 2, None)
>>> [p["sequence_ids"].tolist() for p in packs.as_numpy_iterator()]
[[1, 1, 1, 2, 0, 0], [1, 1, 0, 0, 0, 0]]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.data.assemble import assemble
from tfpack.data.features import packed_feature_spec
from tfpack.data.reading import input_names, no_examples

__all__ = ["pack_dataset", "empty_packs", "with_static_shapes", "graph"]

# Packs built per call of `assemble` in offline mode: large enough to amortize
# the per-call overhead, small enough to keep the first element fast.
CHUNK_PACKS = 512
# Pipeline functions have no Python control flow on tensors: skip AutoGraph.
graph = tf.autograph.experimental.do_not_convert


def empty_packs(element_spec, roles, L, K, M):
    """One empty pack (every feature at its padding value) as a dataset."""
    names = input_names(roles, element_spec)
    examples = no_examples(element_spec, names, batched=False)
    pack = assemble(examples, tf.zeros([0], tf.int64), tf.zeros([2], tf.int64), roles, L, K,
                    M, check_partitions=False)
    return with_static_shapes(tf.data.Dataset.from_tensor_slices(pack), roles, L, K, M)


def pack_dataset(examples, order, splits, roles, L, K, M, batch_size=None):
    """The packs ``splits`` cuts from ``order`` (offline mode), built in chunks.

    At most one chunk of packs is assembled at once, here: the same packs, without
    tracing `assemble` into a `tf.data` function (half the CPU of a small ``pack``).
    """
    order_t = tf.constant(order, tf.int64)
    splits_t = tf.constant(splits, tf.int64)
    packs = len(splits) - 1
    if packs <= CHUNK_PACKS:
        # One chunk: assembled eagerly now, no `tf.data` function traced for it.
        packed = tf.data.Dataset.from_tensor_slices(assemble(
            examples, order_t, splits_t, roles, L, K, M, check_partitions=False))
        if batch_size:
            return with_static_shapes(packed.batch(batch_size), roles, L, K, M, batch_size)
        return with_static_shapes(packed, roles, L, K, M)
    chunk_packs = batch_size or CHUNK_PACKS
    chunks = -(-packs // chunk_packs)

    def build(chunk):
        first = chunk * chunk_packs
        last = tf.minimum(first + chunk_packs, packs)
        sub_splits = splits_t[first:last + 1]
        sub_order = order_t[sub_splits[0]:sub_splits[-1]]
        return assemble(examples, sub_order, sub_splits - sub_splits[0], roles, L, K, M,
                        check_partitions=False)

    packed = tf.data.Dataset.range(chunks).map(
        graph(build), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if batch_size:
        return with_static_shapes(packed, roles, L, K, M, batch_size)
    return with_static_shapes(packed.unbatch(), roles, L, K, M)


def with_static_shapes(dataset, roles, L, K, M, batch_size=None):
    """``dataset`` with the packed features' static shapes (``[batch_size, ...]`` if given)."""
    spec = packed_feature_spec(roles, L, K, M)
    if batch_size:
        spec = {n: tf.TensorSpec([batch_size, *s.shape], s.dtype) for n, s in spec.items()}
    if all(dataset.element_spec[n].shape == s.shape for n, s in spec.items()):
        return dataset
    return dataset.map(graph(
        lambda x: {n: tf.ensure_shape(x[n], spec[n].shape) for n in spec}))
