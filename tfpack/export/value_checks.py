"""Named assertions on the packed features a SavedModel serves.

A packed request to ``serving_default`` is checked before the model runs,
with the same rules `write_packed` applies
(`tfpack.formats.packed_values.value_rule`, derived from the feature table)
and the model's own tables (`tfpack.models.limits`): ``input_ids`` and
``token_type_ids`` inside the model's vocabularies, ``position_ids`` inside
the pack (``[0, L)``, and the model's position table), ``sequence_ids`` in
``[0, K]``, ``cls_positions`` and ``masked_lm_positions`` inside the pack,
``sequence_mask`` only 0.0 or 1.0. A bad request fails as a whole with an
``InvalidArgumentError`` whose message names the feature, the rule and the
first bad value (a negative id would otherwise wrap, and an id past a table
read another row or be clamped): the same in `tf.saved_model.load`, the TF1
session loader of ``saved_model_cli run`` and TensorFlow Serving, with no
tfpack import.

Example:

>>> import tensorflow as tf
>>> rules = packed_rules({"input_ids": 30}, max_length=4, max_sequences_per_pack=2)
>>> rules["sequence_ids"].high
3
>>> @tf.function
... def serve(input_ids):
...     with tf.control_dependencies(packed_checks({"input_ids": input_ids}, rules)):
...         return tf.identity(input_ids)
>>> try:
...     serve(tf.constant([[5, 31, 0, 0]]))
... except tf.errors.InvalidArgumentError as error:
...     print(next(line for line in error.message.splitlines() if "must" in line))
assertion failed: [`input_ids` must hold integers in [0, 30) (rows of the model embedding table). Received: input_ids=] [31]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack import features as contract
from tfpack.formats.packed_values import ValueRule, value_rule

__all__ = ["packed_rules", "packed_checks", "shape_checks"]

# The dimension each packed feature's second axis counts (`tfpack.features`).
_DIMENSIONS = {"L": "max_length L", "K": "max_sequences_per_pack K",
               "M": "max_predictions_per_pack M"}


def packed_rules(limits: dict, max_length: int, max_sequences_per_pack: int | None
                 ) -> dict[str, ValueRule]:
    """The `ValueRule` of every input feature at ``L``, ``K`` (``K=None``: at most ``L``)."""
    L, K = max_length, max_sequences_per_pack or max_length
    return {name: value_rule(name, L=L, K=K, limit=limits.get(name))
            for name in contract.input_kinds()}


def shape_checks(features: dict, specs: dict) -> list:
    """One named assertion per feature: the exported width (L, K or M) and one batch size.

    A signature's ``[None, L]`` input is not enforced when it is called: packs of
    another length would otherwise fail deep inside the model (a Reshape node).

    >>> specs = {"input_ids": tf.TensorSpec([None, 4], tf.int32)}
    >>> @tf.function
    ... def serve(input_ids):
    ...     with tf.control_dependencies(shape_checks({"input_ids": input_ids}, specs)):
    ...         return tf.identity(input_ids)
    >>> try:
    ...     serve(tf.zeros([1, 6], tf.int32))
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(next(line for line in error.message.splitlines() if "must" in line))
    assertion failed: [`input_ids` must have 4 columns (the max_length L the SavedModel was exported at). Received: input_ids of width] [6]
    """
    kinds = contract.input_kinds()
    batch = None
    checks = []
    for name, values in features.items():
        width = specs[name].shape[1]
        dimension = _DIMENSIONS.get(kinds.get(name, ("",))[0], "size")
        rows = tf.shape(values)[0]
        checks.append(tf.debugging.Assert(
            tf.equal(tf.shape(values)[1], width),
            [f"`{name}` must have {width} columns (the {dimension} the SavedModel was "
             f"exported at). Received: {name} of width", tf.shape(values)[1]],
            name=f"check_{name}_width"))
        if batch is None:
            batch = (name, rows)
            continue
        checks.append(tf.debugging.Assert(
            tf.equal(rows, batch[1]),
            [f"`{name}` must have as many rows as `{batch[0]}`. Received: rows", rows,
             batch[1]], name=f"check_{name}_rows"))
    return checks


def packed_checks(features: dict, rules: dict[str, ValueRule]) -> list:
    """One named assertion per feature of ``features`` that has a rule."""
    checks = []
    for name, values in features.items():
        rule = rules.get(name)
        if rule is None:
            continue
        if rule.integer:
            ok = values >= 0
            for padding in rule.paddings or ():
                ok |= tf.equal(values, tf.constant(padding, values.dtype))
        else:
            ok = tf.math.is_finite(values)
            if rule.binary:
                ok &= tf.equal(values, 0) | tf.equal(values, 1)
            elif rule.paddings is not None:
                ok &= values >= 0
        if rule.high is not None:
            ok &= values < tf.constant(rule.high, values.dtype)
        first_bad = tf.boolean_mask(values, tf.logical_not(ok))[:1]
        checks.append(tf.debugging.Assert(
            tf.reduce_all(ok),
            [f"`{name}` must hold {rule.requirement}. Received: {name}=", first_bad],
            name=f"check_{name}"))
    return checks
