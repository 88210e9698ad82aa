"""Reading unpacked examples into host memory as ragged tensors.

`materialize` is pass 1 of offline packing: it reads every example of a
dataset once, keeps the features named by the roles as `tf.RaggedTensor`
``[N, None]`` (token and masked-LM features) or `tf.Tensor` ``[N]``
(per-sequence features), and returns the lengths for the planner.

Example:

>>> import tensorflow as tf
>>> from tfpack.features import FeatureRoles
>>> ds = tf.data.Dataset.from_tensor_slices({"input_ids": tf.ragged.constant([[1, 2], [3]])})
>>> examples, lengths = materialize(ds, FeatureRoles.causal_lm())
>>> lengths.tolist(), examples["input_ids"].to_list()
([2, 1], [[1, 2], [3]])
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfpack.features import FeatureRoles
from tfpack.packing.windows import empty_dataset_error
from tfpack.errors import TfpackError

__all__ = ["materialize", "no_examples", "truncate_example", "ragged_rows", "input_names",
           "check_partitions"]

_READ_BATCH = 4096


def truncate_example(example: dict, roles: FeatureRoles, max_length: int) -> dict:
    """Cut the token features to ``max_length``; drop predictions past it."""
    out = dict(example)
    for name in roles.tokens:
        out[name] = example[name][:max_length]
    positions = [n for n in roles.predictions if n in roles.shifted]
    if positions:
        keep = example[positions[0]] < max_length
        for name in roles.predictions:
            if name in example:
                out[name] = tf.boolean_mask(example[name], keep)
    return out


def materialize(dataset: tf.data.Dataset, roles: FeatureRoles, *, batched: bool = False,
                allow_empty: bool = False):
    """Read a dataset into ragged host tensors; also return the lengths.

    ``batched=True``: the dataset already yields batches (ragged ``[B, None]``
    and ``[B]`` features), e.g. from `tfpack.formats.records.parse_google_batch`.

    Returns:
        ``(examples, lengths)``: feature name -> `tf.RaggedTensor` ``[N, None]``
        or `tf.Tensor` ``[N]``, and int64 numpy ``[N]``. An empty dataset is
        an error unless ``allow_empty`` (then ``N = 0``).
    """
    names = input_names(roles, dataset.element_spec)
    if set(names) != set(dataset.element_spec):
        select = lambda x: {n: x[n] for n in names}  # noqa: E731
        dataset = dataset.map(tf.autograph.experimental.do_not_convert(select))
    values = {n: [] for n in names}
    row_lengths = {n: [] for n in names}
    for batch in (dataset if batched else dataset.ragged_batch(_READ_BATCH)):
        for n, t in ragged_rows(batch).items():
            if isinstance(t, tf.RaggedTensor):
                values[n].append(t.flat_values.numpy())
                row_lengths[n].append(t.row_lengths().numpy())
            else:
                values[n].append(t.numpy())
    if not values[roles.length_feature]:
        if allow_empty:
            return no_examples(dataset.element_spec, names, batched), np.zeros([0], np.int64)
        raise empty_dataset_error()
    examples = {}
    for n in names:
        flat = np.concatenate(values[n])
        if row_lengths[n]:
            examples[n] = tf.RaggedTensor.from_row_lengths(
                flat, np.concatenate(row_lengths[n]).astype(np.int64), validate=False)
        else:
            examples[n] = tf.constant(flat)
    lengths = np.concatenate(row_lengths[roles.length_feature]).astype(np.int64)
    check_partitions(row_lengths, roles)
    return examples, lengths


def no_examples(element_spec, names, batched):
    """Zero examples with the features ``materialize`` would return."""
    examples = {}
    for n in names:
        spec = element_spec[n]
        rank = spec.shape.rank - (1 if batched else 0)
        if isinstance(spec, tf.RaggedTensorSpec) or rank >= 1:
            examples[n] = tf.RaggedTensor.from_row_lengths(
                tf.zeros([0], spec.dtype), tf.zeros([0], tf.int64), validate=False)
        else:
            examples[n] = tf.zeros([0], spec.dtype)
    return examples


def check_partitions(row_lengths: dict, roles: FeatureRoles) -> None:
    """Token features must match ``input_ids`` (prediction ones each other) per example."""
    groups = [list(roles.tokens)]
    if roles.predictions:
        groups.append(list(roles.predictions))
    for group in groups:
        group = [n for n in group if row_lengths.get(n)]
        base = np.concatenate(row_lengths[group[0]])
        for name in group[1:]:
            bad = np.flatnonzero(np.concatenate(row_lengths[name]) != base)
            if bad.size:
                raise TfpackError(
                    f"Feature {name!r} must have as many values as {group[0]!r} in every "
                    f"example. Received: example {int(bad[0])} with "
                    f"{int(np.concatenate(row_lengths[name])[bad[0]])} and {int(base[bad[0]])}")


def ragged_rows(batch: dict) -> dict:
    """Batches of fixed-length features come out of `ragged_batch` dense: make them ragged."""
    return {n: tf.RaggedTensor.from_tensor(t) if isinstance(t, tf.Tensor) and t.shape.rank == 2
            else t for n, t in batch.items()}


def input_names(roles, element_spec):
    names = list(roles.tokens) + list(roles.sequence)
    return names + [n for n in roles.predictions if n in element_spec]
