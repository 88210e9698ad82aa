"""Packing inside the TensorFlow graph, for serving unpacked sequences.

`pack_sequences` puts a ragged batch of token ids into fixed-shape packs with
next-fit in the caller's order (a new pack starts when the next sequence does
not fit in ``L`` tokens or the pack already holds ``K`` sequences), builds the
DESIGN.md features, and says where each sequence went so outputs can be
gathered back in the caller's order. Sequences longer than ``L`` are cut to
``L`` tokens. Example with ``L = 6``, ``K = 2``::

    sequences [[5, 6, 7], [8, 9], [4, 4, 4, 4]]
    -> input_ids    [[5, 6, 7, 8, 9, 0], [4, 4, 4, 4, 0, 0]]
       sequence_ids [[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0]]
       position_ids [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 0]]
       cls_positions [[0, 3], [0, 0]], sequence_mask [[1, 1], [1, 0]]
       placement: pack [0, 0, 1], slot [0, 1, 0], offset [0, 3, 0]

>>> import tensorflow as tf
>>> from tfpack.export.graph_packing import pack_sequences
>>> features, placement = pack_sequences(
...     tf.ragged.constant([[5, 6, 7], [8, 9], [4, 4, 4, 4]]), max_length=6,
...     max_sequences_per_pack=2)
>>> features["sequence_ids"].numpy().tolist()
[[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0]]
>>> placement["pack"].numpy().tolist()
[0, 0, 1]
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["pack_sequences", "gather_sequence_outputs", "gather_token_outputs"]


def _next_fit(lengths, max_length: int, max_sequences: int):
    def step(state, length):
        pack, offset, count = state[0], state[1], state[2]
        new = tf.logical_or(offset + length > max_length, count >= max_sequences)
        pack = tf.where(new, pack + 1, pack)
        offset = tf.where(new, 0, offset)
        count = tf.where(new, 0, count)
        return tf.stack([pack, offset + length, count + 1, offset, count])

    # The first sequence opens pack 0 (count starts at K so that it "starts a new pack").
    init = tf.constant([-1, 0, max_sequences, 0, 0], tf.int32)
    states = tf.scan(lambda s, x: step(s, x), lengths, initializer=init)
    return states[:, 0], states[:, 4], states[:, 3]  # pack, slot, offset


def pack_sequences(input_ids: tf.RaggedTensor, max_length: int, max_sequences_per_pack: int,
                   token_type_ids: tf.RaggedTensor | None = None):
    """Pack a ragged batch ``[N, (len)]`` into ``[P, L]`` features (next-fit, caller's order).

    Returns:
        ``(features, placement)``: the DESIGN.md features ``input_ids``,
        ``sequence_ids``, ``position_ids``, ``token_type_ids`` ``[P, L]`` and
        ``cls_positions``, ``sequence_mask`` ``[P, K]``; ``placement`` holds
        int32 ``pack``, ``slot``, ``offset`` and ``length`` ``[N]``.
    """
    L, K = int(max_length), int(max_sequences_per_pack)
    input_ids = input_ids[:, :L]
    if token_type_ids is None:
        token_type_ids = tf.zeros_like(input_ids)
    token_type_ids = token_type_ids[:, :L]
    lengths = tf.cast(input_ids.row_lengths(), tf.int32)
    pack, slot, offset = _next_fit(lengths, L, K)
    num_packs = tf.reduce_max(tf.concat([pack, [-1]], 0)) + 1

    row = tf.cast(input_ids.value_rowids(), tf.int32)
    position = tf.range(tf.size(row), dtype=tf.int32) - tf.gather(
        tf.cast(input_ids.row_starts(), tf.int32), row)
    token_index = tf.stack([tf.gather(pack, row), tf.gather(offset, row) + position], axis=1)
    shape = tf.stack([num_packs, L])

    def scatter(values):
        return tf.scatter_nd(token_index, tf.cast(values, tf.int32), shape)

    slot_index = tf.stack([pack, slot], axis=1)
    slot_shape = tf.stack([num_packs, K])
    features = {
        "input_ids": scatter(input_ids.values),
        "sequence_ids": scatter(tf.gather(slot, row) + 1),
        "position_ids": scatter(position),
        "token_type_ids": scatter(token_type_ids.values),
        "cls_positions": tf.scatter_nd(slot_index, offset, slot_shape),
        "sequence_mask": tf.scatter_nd(slot_index, tf.ones_like(offset, tf.float32),
                                       slot_shape),
    }
    placement = {"pack": pack, "slot": slot, "offset": offset, "length": lengths}
    return features, placement


def gather_sequence_outputs(outputs: tf.Tensor, placement: dict) -> tf.Tensor:
    """``[P, K, ...]`` per-slot outputs -> ``[N, ...]`` in the caller's order."""
    return tf.gather_nd(outputs, tf.stack([placement["pack"], placement["slot"]], axis=1))


def gather_token_outputs(outputs: tf.Tensor, placement: dict, width) -> tf.Tensor:
    """``[P, L, ...]`` per-token outputs -> ``[N, width, ...]`` (zeros past each length)."""
    t = tf.range(width, dtype=tf.int32)
    valid = t[None, :] < placement["length"][:, None]
    column = tf.where(valid, placement["offset"][:, None] + t[None, :], 0)
    index = tf.stack([tf.broadcast_to(placement["pack"][:, None], tf.shape(column)), column],
                     axis=-1)
    gathered = tf.gather_nd(outputs, index)
    mask = tf.reshape(tf.cast(valid, gathered.dtype),
                      tf.concat([tf.shape(valid), tf.ones([tf.rank(gathered) - 2], tf.int32)], 0))
    return gathered * mask
