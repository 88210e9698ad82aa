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
    example_ids    [[2, 0], [1, -1]]

>>> import tensorflow as tf
>>> from tfpack.data.assemble import assemble
>>> from tfpack.features import FeatureRoles
>>> ids = tf.ragged.constant([[5, 6, 7], [8, 9], [3]], dtype=tf.int32)
>>> packs = assemble({"input_ids": ids}, [2, 0, 1], [0, 2, 3],
...                  FeatureRoles.causal_lm(), 6, 2)
>>> packs["labels"].numpy().tolist()
[[-100, 6, 7, -100, -100, -100], [9, -100, -100, -100, -100, -100]]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack import features as contract
from tfpack.features import IGNORE_LABEL, FeatureRoles
from tfpack.params import Anything, Boolean, InstanceOf, Integer, validate_params

__all__ = ["assemble"]


@validate_params({
    "examples": InstanceOf(dict, description="a dict of feature name -> tensor"),
    "order": Anything("int [n] indices (a tensor or a list), checked by TensorFlow"),
    "splits": Anything("int [P + 1] boundaries (a tensor or a list), checked by TensorFlow"),
    "roles": InstanceOf(FeatureRoles), "max_length": Integer(1),
    "max_sequences_per_pack": Integer(1), "max_predictions": [None, Integer(0)],
    "check_partitions": Boolean(),
    "example_ids": [None, Anything("int [N] indices (a tensor or a list)")],
})
def assemble(
    examples: dict,
    order,
    splits,
    roles: FeatureRoles,
    max_length: int,
    max_sequences_per_pack: int,
    max_predictions: int | None = None,
    *,
    check_partitions: bool = True,
    example_ids=None,
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
        max_length, max_sequences_per_pack, max_predictions: ``L``, ``K``, ``M``.
        check_partitions: assert that the token features (and the masked-LM
            features) of each example have equal lengths. Costs O(N) per call;
            callers that checked once already pass ``False``.
        example_ids: int ``[N]``, each example's index in the whole input
            (written to ``example_ids``); default its row in ``examples``.

    Returns:
        Dict of dense tensors with a leading dimension ``P``; the features of
        `tfpack.data.features.packed_feature_spec`.

    Raises:
        tf.errors.InvalidArgumentError: when a pack holds more than ``L``
            tokens, ``K`` sequences or ``M`` predictions.
    """
    L, K, M = max_length, max_sequences_per_pack, max_predictions
    order = tf.cast(order, tf.int64)
    splits = tf.cast(splits, tf.int64)
    n = tf.size(order, out_type=tf.int64)

    tokens = examples[roles.length_feature]
    # Gathered from row_splits: O(n) per call, not O(N) like row_lengths().
    first = tf.gather(tokens.row_splits, order)
    lengths = tf.gather(tokens.row_splits, order + 1) - first
    seq_pack = tf.ragged.row_splits_to_segment_ids(splits)  # [n] pack of each sequence
    seq_k = tf.range(n) - tf.gather(splits, seq_pack)  # its index inside the pack
    starts = tf.concat([[0], tf.cumsum(lengths)], 0)  # token offsets in the selection
    pack_tokens = tf.gather(starts, splits[1:]) - tf.gather(starts, splits[:-1])
    seq_offset = starts[:-1] - tf.gather(starts, tf.gather(splits, seq_pack))

    checks = [
        tf.debugging.assert_less_equal(
            pack_tokens, tf.constant(L, tf.int64),
            message=f"A pack holds more than max_length={L} tokens"),
        tf.debugging.assert_less_equal(
            splits[1:] - splits[:-1], tf.constant(K, tf.int64),
            message=f"A pack holds more than max_sequences_per_pack={K} sequences"),
    ] + (_same_partition(examples, roles.tokens) if check_partitions else [])
    # Everything below reads these, so the checks run before any output.
    with tf.control_dependencies(checks):
        seq_pack, seq_k, seq_offset, first, lengths = (
            tf.identity(t) for t in (seq_pack, seq_k, seq_offset, first, lengths))
    # One gather index for all token features: their rows share one partition.
    token_index = tf.ragged.range(first, first + lengths)
    tok_seq = token_index.value_rowids()
    tok_pos = token_index.flat_values - tf.gather(first, tok_seq)

    sizes = {"L": L, "K": K, "M": M}
    task = roles.task

    def by_pack(name, values, row_lengths):
        # Width, dtype and padding of feature `name` from the contract.
        entry = contract.feature(name, task)
        dtype = tf.as_dtype(entry.dtype)
        ragged = tf.RaggedTensor.from_row_lengths(tf.cast(values, dtype), row_lengths,
                                                  validate=False)
        return ragged.to_tensor(default_value=tf.constant(entry.padding, dtype),
                                shape=[None, sizes[entry.dimension]])

    def tokens_by_pack(name, values):
        return by_pack(name, values, pack_tokens)

    def source(name):
        return contract.feature(name, task).source

    out = {}
    for name in roles.tokens:
        out[name] = tokens_by_pack(
            name, tf.gather(examples[name].flat_values, token_index.flat_values))
    out["sequence_ids"] = tokens_by_pack("sequence_ids", tf.gather(seq_k, tok_seq) + 1)
    out["position_ids"] = tokens_by_pack("position_ids", tok_pos)
    for name in roles.derived:
        if source(name) == "next_token":
            flat = tf.gather(tokens.flat_values, token_index.flat_values)
            following = tf.concat([flat[1:], tf.zeros([1], flat.dtype)], 0)
            last = tok_pos == tf.gather(lengths, tok_seq) - 1
            targets = tf.where(last, tf.constant(IGNORE_LABEL, flat.dtype), following)
            out[name] = tokens_by_pack(name, targets)

    if roles.predictions:
        out.update(_predictions(examples, order, splits, roles, seq_k, seq_offset, M, by_pack,
                                check_partitions))

    per_pack = splits[1:] - splits[:-1]
    out["cls_positions"] = by_pack("cls_positions", seq_offset, per_pack)
    out["sequence_mask"] = by_pack("sequence_mask", tf.ones_like(seq_k), per_pack)
    ids = order if example_ids is None else tf.gather(tf.cast(example_ids, tf.int64), order)
    out["example_ids"] = by_pack("example_ids", ids, per_pack)
    for name in roles.sequence:
        values = tf.gather(examples[name], order)
        if name in roles.shifted:
            values = tf.cast(values, tf.int64) + seq_offset
        out[name] = by_pack(name, values, per_pack)
    return out


def _same_partition(examples, names):
    """Assertions that the ragged features ``names`` have equal row lengths."""
    present = [n for n in names if n in examples]
    base = examples[present[0]].row_splits
    return [tf.debugging.assert_equal(
        examples[n].row_splits, base,
        message=f"Feature {n!r} must have one value per {present[0]!r} value in every example")
        for n in present[1:]]


def _predictions(examples, order, splits, roles, seq_k, seq_offset, M, by_pack,
                 check_partitions):
    """The ``[M]`` features: read ones gathered (positions shifted), derived slots."""
    counter = examples[roles.predictions[0]]
    first = tf.gather(counter.row_splits, order)
    counts = tf.gather(counter.row_splits, order + 1) - first
    starts = tf.concat([[0], tf.cumsum(counts)], 0)
    pack_predictions = tf.gather(starts, splits[1:]) - tf.gather(starts, splits[:-1])
    checks = [tf.debugging.assert_less_equal(
        pack_predictions, tf.constant(M, tf.int64),
        message=f"A pack holds more than max_predictions_per_pack={M} masked-LM predictions")]
    if check_partitions:
        checks += _same_partition(examples, roles.predictions)
    with tf.control_dependencies(checks):
        first = tf.identity(first)
    index = tf.ragged.range(first, first + counts)
    m_seq = index.value_rowids()
    flat = index.flat_values
    out = {}
    for name in roles.predictions:
        if name in examples:
            values = tf.gather(examples[name].flat_values, flat)
        else:  # An absent optional prediction feature is 1.0 (`source="ones"`).
            values = tf.ones_like(m_seq, tf.float32)
        if name in roles.shifted:
            values = tf.cast(values, tf.int64) + tf.gather(seq_offset, m_seq)
        out[name] = by_pack(name, values, pack_predictions)
    for name in roles.derived:
        if contract.feature(name, roles.task).packing == "prediction":  # `source="slot"`
            out[name] = by_pack(name, tf.gather(seq_k, m_seq) + 1, pack_predictions)
    return out
