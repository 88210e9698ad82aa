"""Assemble fixed-shape packs from unpacked examples and an assignment.

The one place where packed features are computed (DESIGN.md, "Packed
example"). Every mode of `tfpack.data.pack`, `tfpack.data.flatten` and the
TFRecord packer calls `assemble`, vectorized over many packs at once: no
Python loop over examples, so it runs inside ``tf.data`` graphs.

Worked example (``L=6``, ``K=2``): examples ``a=[5, 6, 7]``, ``b=[8, 9]``,
``c=[3]``; ``order=[2, 0, 1]``, ``splits=[0, 2, 3]`` (pack 0 holds c then a,
pack 1 holds b)::

    input_ids      [[3, 5, 6, 7, 0, 0], [8, 9, 0, 0, 0, 0]]
    sequence_ids   [[1, 2, 2, 2, 0, 0], [1, 1, 0, 0, 0, 0]]
    position_ids   [[0, 0, 1, 2, 0, 0], [0, 1, 0, 0, 0, 0]]
    cls_positions  [[0, 1], [0, 0]]
    sequence_mask  [[1., 1.], [1., 0.]]

>>> import tensorflow as tf
>>> from tfpack.data.assemble import assemble
>>> from tfpack.data.features import FeatureRoles
>>> ids = tf.ragged.constant([[5, 6, 7], [8, 9], [3]], dtype=tf.int32)
>>> packs = assemble({"input_ids": ids}, [2, 0, 1], [0, 2, 3],
...                  FeatureRoles.causal_lm(), 6, 2)
>>> packs["labels"].numpy().tolist()
[[-100, 6, 7, -100, -100, -100], [9, -100, -100, -100, -100, -100]]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.data.features import IGNORE_LABEL, FeatureRoles

__all__ = ["assemble"]


def assemble(
    examples: dict,
    order,
    splits,
    roles: FeatureRoles,
    max_length: int,
    max_sequences: int,
    max_predictions: int | None = None,
) -> dict[str, tf.Tensor]:
    """Build ``P`` packs from ``N`` examples.

    Args:
        examples: feature name -> `tf.RaggedTensor` ``[N, None]`` (token and
            masked-LM features) or `tf.Tensor` ``[N]`` (per-sequence features).
        order: int ``[n]``, indices into the examples, grouped pack by pack.
        splits: int ``[P + 1]``; pack ``p`` holds ``order[splits[p]:splits[p+1]]``
            in that order. Empty packs (equal splits) come out all padding.
        roles: which feature plays which role; ``roles.tokens`` must all be in
            ``examples``.
        max_length, max_sequences, max_predictions: ``L``, ``K``, ``M``.

    Returns:
        Dict of dense tensors with a leading dimension ``P``; the features of
        `tfpack.data.features.packed_feature_spec`.

    Raises:
        tf.errors.InvalidArgumentError: when a pack holds more than ``L``
            tokens, ``K`` sequences or ``M`` predictions.
    """
    L, K, M = max_length, max_sequences, max_predictions
    order = tf.cast(order, tf.int64)
    splits = tf.cast(splits, tf.int64)
    num_packs = tf.size(splits, out_type=tf.int64) - 1
    n = tf.size(order, out_type=tf.int64)

    tokens = tf.gather(examples[roles.length_feature], order)
    lengths = tokens.row_lengths()
    seq_pack = tf.ragged.row_splits_to_segment_ids(splits)  # [n] pack of each sequence
    seq_k = tf.range(n) - tf.gather(splits, seq_pack)  # its index inside the pack
    starts = tf.concat([[0], tf.cumsum(lengths)], 0)  # token offsets, global
    pack_tokens = tf.gather(starts, splits[1:]) - tf.gather(starts, splits[:-1])
    seq_offset = starts[:-1] - tf.gather(starts, tf.gather(splits, seq_pack))

    checks = [
        tf.debugging.assert_less_equal(
            pack_tokens, tf.constant(L, tf.int64),
            message=f"A pack holds more than max_length={L} tokens"),
        tf.debugging.assert_less_equal(
            splits[1:] - splits[:-1], tf.constant(K, tf.int64),
            message=f"A pack holds more than max_sequences_per_pack={K} sequences"),
    ]
    # Everything below reads these, so the checks run before any scatter.
    with tf.control_dependencies(checks):
        seq_pack, seq_k, seq_offset = (tf.identity(t) for t in (seq_pack, seq_k, seq_offset))
        tok_seq = tokens.value_rowids()
    tok_pos = tf.range(tf.size(tok_seq, out_type=tf.int64)) - tf.gather(starts, tok_seq)
    tok_index = tf.stack(
        [tf.gather(seq_pack, tok_seq), tf.gather(seq_offset, tok_seq) + tok_pos], axis=1)
    pack_shape = tf.stack([num_packs, tf.constant(L, tf.int64)])

    def scatter(index, shape, values, fill, dtype):
        base = tf.fill(tf.cast(shape, tf.int32), tf.constant(fill, dtype))
        return tf.tensor_scatter_nd_update(base, index, tf.cast(values, dtype))

    out = {}
    for name in roles.tokens:
        values = tokens.flat_values if name == roles.length_feature else (
            tf.gather(examples[name], order).flat_values)
        out[name] = scatter(tok_index, pack_shape, values, 0, tf.int32)
    out["sequence_ids"] = scatter(
        tok_index, pack_shape, tf.gather(seq_k, tok_seq) + 1, 0, tf.int32)
    out["position_ids"] = scatter(tok_index, pack_shape, tok_pos, 0, tf.int32)
    if roles.causal_labels:
        flat = tokens.flat_values
        following = tf.concat([flat[1:], tf.zeros([1], flat.dtype)], 0)
        last = tok_pos == tf.gather(lengths, tok_seq) - 1
        targets = tf.where(last, tf.constant(IGNORE_LABEL, flat.dtype), following)
        out["labels"] = scatter(tok_index, pack_shape, targets, IGNORE_LABEL, tf.int32)

    if roles.masked_lm is not None:
        out.update(_masked_lm(examples, order, splits, roles, seq_pack, seq_k,
                              seq_offset, num_packs, M, scatter))

    seq_index = tf.stack([seq_pack, seq_k], axis=1)
    seq_shape = tf.stack([num_packs, tf.constant(K, tf.int64)])
    out["cls_positions"] = scatter(seq_index, seq_shape, seq_offset, 0, tf.int32)
    out["sequence_mask"] = scatter(
        seq_index, seq_shape, tf.ones_like(seq_k), 0.0, tf.float32)
    for name in roles.sequence:
        out[name] = scatter(seq_index, seq_shape, tf.gather(examples[name], order), 0, tf.int32)
    return out


def _masked_lm(examples, order, splits, roles, seq_pack, seq_k, seq_offset,
               num_packs, M, scatter):
    positions_name, ids_name, weights_name = roles.masked_lm
    positions = tf.gather(examples[positions_name], order)
    counts = positions.row_lengths()
    starts = tf.concat([[0], tf.cumsum(counts)], 0)
    pack_predictions = tf.gather(starts, splits[1:]) - tf.gather(starts, splits[:-1])
    check = tf.debugging.assert_less_equal(
        pack_predictions, tf.constant(M, tf.int64),
        message=f"A pack holds more than max_predictions_per_pack={M} masked-LM predictions")
    with tf.control_dependencies([check]):
        m_seq = tf.identity(positions.value_rowids())
    m_pack = tf.gather(seq_pack, m_seq)
    m_col = tf.range(tf.size(m_seq, out_type=tf.int64)) - tf.gather(
        starts, tf.gather(splits, m_pack))
    index = tf.stack([m_pack, m_col], axis=1)
    shape = tf.stack([num_packs, tf.constant(M, tf.int64)])
    shifted = tf.cast(positions.flat_values, tf.int64) + tf.gather(seq_offset, m_seq)
    if weights_name in examples:
        weights = tf.gather(examples[weights_name], order).flat_values
    else:
        weights = tf.ones_like(m_seq, tf.float32)
    return {
        positions_name: scatter(index, shape, shifted, 0, tf.int32),
        ids_name: scatter(index, shape, tf.gather(examples[ids_name], order).flat_values,
                          0, tf.int32),
        weights_name: scatter(index, shape, weights, 0.0, tf.float32),
        "masked_lm_sequence_ids": scatter(index, shape, tf.gather(seq_k, m_seq) + 1,
                                          0, tf.int32),
    }
