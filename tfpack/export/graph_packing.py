"""Packing inside the TensorFlow graph, for serving unpacked sequences.

`pack_sequences` puts a ragged batch of token ids into fixed-shape packs with
best-fit decreasing (longest sequence first, each into the open pack with the
least room left that still fits it and holds fewer than ``K`` sequences, else
into a new pack), builds the DESIGN.md features, and says where each sequence
went so outputs can be gathered back in the caller's order. Empty sequences
(length 0) go into no pack: their ``pack`` is -1 and the gather helpers give
them zeros. Every sequence must have at most ``L`` tokens (checked in the
graph: the caller decides whether to cut or to refuse). Example with
``L = 6``, ``K = 2``::

    sequences [[5, 6, 7], [8, 9], [4, 4, 4, 4], []]
    longest first: [4, 4, 4, 4] opens pack 0; [5, 6, 7] does not fit it and
    opens pack 1; [8, 9] fits both, pack 0 has least room (2 tokens left)
    -> input_ids    [[4, 4, 4, 4, 8, 9], [5, 6, 7, 0, 0, 0]]
       sequence_ids [[1, 1, 1, 1, 2, 2], [1, 1, 1, 0, 0, 0]]
       position_ids [[0, 1, 2, 3, 0, 1], [0, 1, 2, 0, 0, 0]]
       cls_positions [[0, 4], [0, 0]], sequence_mask [[1, 1], [1, 0]]
       placement: pack [1, 0, 0, -1], slot [0, 1, 0, -1], offset [0, 4, 0, 0]

>>> import tensorflow as tf
>>> from tfpack.export.graph_packing import pack_sequences
>>> features, placement = pack_sequences(
...     tf.ragged.constant([[5, 6, 7], [8, 9], [4, 4, 4, 4], []], tf.int32),
...     max_length=6, max_sequences_per_pack=2)
>>> features["sequence_ids"].numpy().tolist()
[[1, 1, 1, 1, 2, 2], [1, 1, 1, 0, 0, 0]]
>>> placement["pack"].numpy().tolist()
[1, 0, 0, -1]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.params import InstanceOf, Integer, validate_params

__all__ = ["pack_sequences", "gather_sequence_outputs", "gather_token_outputs"]


def _best_fit_decreasing(lengths, max_length: int, max_sequences_per_pack: int):
    """``(pack, slot, offset, num_packs)`` per sequence; -1 for empty ones."""
    n = tf.size(lengths)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    packs = tf.range(n + 1)

    def body(i, room, count, opened, pack, slot, offset):
        s = order[i]
        length = lengths[s]
        fits = (packs < opened) & (room >= length) & (count < max_sequences_per_pack)
        best = tf.cast(tf.argmin(tf.where(fits, room, max_length + 1)), tf.int32)
        target = tf.where(tf.reduce_any(fits), best, opened)
        real = length > 0
        index = [[target]]
        here = tf.where(real, target, -1)
        pack = tf.tensor_scatter_nd_update(pack, [[s]], [here])
        slot = tf.tensor_scatter_nd_update(slot, [[s]], [tf.where(real, count[target], -1)])
        offset = tf.tensor_scatter_nd_update(
            offset, [[s]], [tf.where(real, max_length - room[target], 0)])
        used = tf.cast(real, tf.int32)
        room = tf.tensor_scatter_nd_sub(room, index, [length])
        count = tf.tensor_scatter_nd_add(count, index, [used])
        opened = tf.maximum(opened, (target + 1) * used)
        return i + 1, room, count, opened, pack, slot, offset

    minus_one = -tf.ones([n], tf.int32)
    # Room for n packs (one per sequence at worst): index `target` stays < n
    # for a real sequence; an empty one (sorted last) writes nothing real.
    state = (tf.constant(0), tf.fill([n + 1], max_length), tf.zeros([n + 1], tf.int32),
             tf.constant(0), minus_one, minus_one, tf.zeros([n], tf.int32))
    _, _, _, opened, pack, slot, offset = tf.while_loop(
        lambda i, *_: i < n, body, state)
    return pack, slot, offset, opened


@validate_params({"input_ids": InstanceOf(tf.RaggedTensor), "max_length": Integer(1),
                  "max_sequences_per_pack": Integer(1),
                  "token_type_ids": [None, InstanceOf(tf.RaggedTensor)]})
def pack_sequences(input_ids: tf.RaggedTensor, max_length: int, max_sequences_per_pack: int,
                   token_type_ids: tf.RaggedTensor | None = None):
    """Pack a ragged batch ``[N, (len)]`` into ``[P, L]`` features (best-fit decreasing).

    Args:
        input_ids: int32 ragged ``[N, (len)]``; each row at most
            ``max_length`` tokens (an `InvalidArgumentError` otherwise).
        max_length: ``L``, tokens per pack.
        max_sequences_per_pack: ``K``, sequences per pack.
        token_type_ids: optional, same row lengths as ``input_ids``.

    Returns:
        ``(features, placement)``: the DESIGN.md features ``input_ids``,
        ``sequence_ids``, ``position_ids``, ``token_type_ids`` ``[P, L]`` and
        ``cls_positions``, ``sequence_mask`` ``[P, K]`` with ``P >= 1`` (one
        empty pack when every row is empty); ``placement`` holds int32
        ``pack``, ``slot`` (-1 for empty rows), ``offset`` and ``length``
        ``[N]``.
    """
    L, K = int(max_length), int(max_sequences_per_pack)
    lengths = tf.cast(input_ids.row_lengths(), tf.int32)
    check = tf.debugging.assert_less_equal(
        lengths, L, message=f"every sequence must have at most max_length={L} tokens")
    with tf.control_dependencies([check]):
        lengths = tf.identity(lengths)
    if token_type_ids is None:
        token_type_ids = tf.zeros_like(input_ids)
    pack, slot, offset, opened = _best_fit_decreasing(lengths, L, K)
    num_packs = tf.maximum(opened, 1)

    row = tf.cast(input_ids.value_rowids(), tf.int32)
    position = tf.range(tf.size(row), dtype=tf.int32) - tf.gather(
        tf.cast(input_ids.row_starts(), tf.int32), row)
    token_index = tf.stack([tf.gather(pack, row), tf.gather(offset, row) + position], axis=1)
    shape = tf.stack([num_packs, L])

    def scatter(values):
        return tf.scatter_nd(token_index, tf.cast(values, tf.int32), shape)

    real = tf.where(lengths > 0)[:, 0]
    slot_index = tf.gather(tf.stack([pack, slot], axis=1), real)
    slot_shape = tf.stack([num_packs, K])
    features = {
        "input_ids": scatter(input_ids.values),
        "sequence_ids": scatter(tf.gather(slot, row) + 1),
        "position_ids": scatter(position),
        "token_type_ids": scatter(token_type_ids.values),
        "cls_positions": tf.scatter_nd(slot_index, tf.gather(offset, real), slot_shape),
        "sequence_mask": tf.scatter_nd(slot_index, tf.ones_like(real, tf.float32),
                                       slot_shape),
    }
    placement = {"pack": pack, "slot": slot, "offset": offset, "length": lengths}
    return features, placement


def _expand_like(mask, value):
    """``mask`` ``[N, ...]`` broadcast to the rank of ``value``."""
    extra = tf.rank(value) - tf.rank(mask)
    return tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([extra], tf.int32)], 0))


def gather_sequence_outputs(outputs: tf.Tensor, placement: dict) -> tf.Tensor:
    """``[P, K, ...]`` per-slot outputs -> ``[N, ...]`` in the caller's order (zeros if empty)."""
    real = placement["pack"] >= 0
    index = tf.stack([tf.maximum(placement["pack"], 0), tf.maximum(placement["slot"], 0)],
                     axis=1)
    gathered = tf.gather_nd(outputs, index)
    # `where`, not a product: an unused slot's outputs may be NaN.
    return tf.where(_expand_like(real, gathered), gathered, tf.zeros_like(gathered))


def gather_token_outputs(outputs: tf.Tensor, placement: dict, width) -> tf.Tensor:
    """``[P, L, ...]`` per-token outputs -> ``[N, width, ...]`` (zeros past each length)."""
    t = tf.range(width, dtype=tf.int32)
    valid = t[None, :] < placement["length"][:, None]
    column = tf.where(valid, placement["offset"][:, None] + t[None, :], 0)
    pack = tf.broadcast_to(tf.maximum(placement["pack"], 0)[:, None], tf.shape(column))
    gathered = tf.gather_nd(outputs, tf.stack([pack, column], axis=-1))
    return tf.where(_expand_like(valid, gathered), gathered, tf.zeros_like(gathered))
