"""Checks that a packed dataset fits a model, and target counts from features.

`validate_element_spec` runs once, when training starts: every feature must
have a fixed shape (XLA compiles one program), features of one kind must agree
on L, K or M, and these must match the model's. All offending features are
listed in one message.

`target_counts` gives, for each loss term, how many targets a batch holds,
from the features alone (no forward pass), so the trainer can all-reduce them
*before* computing gradients: masked tokens for ``mlm``, present sequences for
``nsp``/classification, non-ignored labels for the causal LM. A model can
override this with a ``target_counts(x)`` method returning one float32 scalar
per term.

Example:

>>> import tensorflow as tf
>>> from tfpack.training.validation import lengths_of
>>> spec = {"input_ids": tf.TensorSpec([8], tf.int32),
...         "sequence_mask": tf.TensorSpec([3], tf.float32)}
>>> lengths_of(spec)
{'L': 8, 'K': 3}
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.errors import TfpackError

__all__ = ["validate_element_spec", "target_counts", "lengths_of", "build_shapes"]

_KIND = {
    "input_ids": "L", "sequence_ids": "L", "position_ids": "L", "token_type_ids": "L",
    "cls_positions": "K", "sequence_mask": "K", "next_sentence_labels": "K",
    "masked_lm_positions": "M", "masked_lm_ids": "M", "masked_lm_weights": "M",
    "masked_lm_sequence_ids": "M",
}
_NAMES = {"L": "max_length", "K": "max_sequences_per_pack", "M": "max_predictions_per_pack"}


def build_shapes(model) -> dict | None:
    """``{feature: shape}`` (batch first) the model was built with, or `None`.

    Read from `get_build_config`, which Keras also fills when it loads a
    ``.keras`` file.
    """
    try:
        config = model.get_build_config() if model.built else None
    except (AttributeError, NotImplementedError, ValueError):
        config = None
    stack = [config]
    while stack:  # {"shapes_dict": {"inputs_shape": {...}}} or {"input_shape": {...}}
        value = stack.pop()
        if isinstance(value, dict):
            if "input_ids" in value:
                return value
            stack.extend(value.values())
    return None


def lengths_of(element_spec: dict) -> dict:
    """``{"L": ..., "K": ..., "M": ...}`` read from an unbatched element spec."""
    found = {}
    for name, spec in element_spec.items():
        kind = _KIND.get(name)
        if kind and spec.shape.rank == 1 and spec.shape[0] is not None:
            found.setdefault(kind, int(spec.shape[0]))
    return found


def _model_lengths(model) -> dict:
    """L, K and M of the features the model was built on (if it was built)."""
    shapes = build_shapes(model) or {}
    found = {}
    for name, shape in shapes.items():
        kind = _KIND.get(name)
        shape = list(shape)
        if kind and len(shape) == 2 and shape[1] is not None:
            found.setdefault(kind, int(shape[1]))
    return found


def _position_capacity(model) -> int | None:
    for owner in (model, getattr(model, "encoder", None)):
        value = getattr(owner, "max_sequence_length", None)
        if isinstance(value, int):
            return value
    return None


def validate_element_spec(model, element_spec) -> dict:
    """Raise `TfpackError` listing every feature that does not fit ``model``.

    Args:
        model: a tfpack model; if it was built, its L, K and M are those of its
            build shapes, and L may not exceed its ``max_sequence_length``.
        element_spec: ``dataset.element_spec`` of UNBATCHED packed examples.

    Returns:
        The dataset's ``{"L": ..., "K": ..., "M": ...}``.
    """
    if not isinstance(element_spec, dict) or "input_ids" not in element_spec:
        raise TfpackError(
            "The dataset must yield unbatched dicts of packed features with at least "
            f"`input_ids`. Received: element_spec={element_spec!r}")
    problems = []
    for name, spec in element_spec.items():
        if name in _KIND and spec.shape.rank != 1:
            problems.append(f"{name} has rank {spec.shape.rank} (an unbatched pack "
                            "has rank 1: the trainer batches, pass unbatched packs)")
        elif not spec.shape.is_fully_defined():
            problems.append(f"{name} has shape {spec.shape} (must be fixed)")
    dataset = {}
    for name, spec in element_spec.items():
        kind = _KIND.get(name)
        if kind and spec.shape.rank == 1 and spec.shape[0] is not None:
            size = int(spec.shape[0])
            if kind in dataset and dataset[kind][1] != size:
                problems.append(f"{name} has {kind}={size} but {dataset[kind][0]} has "
                                f"{kind}={dataset[kind][1]}")
            dataset.setdefault(kind, (name, size))
    for kind, expected in _model_lengths(model).items():
        if kind in dataset and dataset[kind][1] != expected:
            problems.append(f"{dataset[kind][0]} has {kind}={dataset[kind][1]} but the "
                            f"model was built with {_NAMES[kind]}={expected}")
    capacity = _position_capacity(model)
    if capacity is not None and "L" in dataset and dataset["L"][1] > capacity:
        problems.append(f"{dataset['L'][0]} has L={dataset['L'][1]} but the model's "
                        f"position table has max_sequence_length={capacity}")
    if problems:
        raise TfpackError(
            "The dataset's packed features must have fixed shapes that match the model. "
            "Received: " + "; ".join(problems))
    return {kind: size for kind, (_, size) in dataset.items()}


def target_counts(model, x: dict) -> dict:
    """Float32 scalars: targets per loss term, ``real_tokens`` and ``sequences``."""
    if hasattr(model, "target_counts"):
        counts = dict(model.target_counts(x))
    else:
        counts = {}
        missing = []
        for term in model.loss_terms:
            count = _count_from_features(model, term, x)
            if count is None:
                missing.append(term)
            else:
                counts[term] = count
        if missing:
            # Unknown term: a forward pass gives its count (costs one forward).
            stats = model.loss_statistics(x, model(x, training=False))
            for term in missing:
                counts[term] = tf.cast(stats[f"{term}_count"], tf.float32)
    if "sequence_ids" in x:
        real = tf.cast(x["sequence_ids"] > 0, tf.float32)
    else:
        real = tf.cast(tf.not_equal(x["input_ids"], 0), tf.float32)
    counts["real_tokens"] = tf.reduce_sum(real)
    if "sequence_mask" in x:
        counts["sequences"] = tf.reduce_sum(tf.cast(x["sequence_mask"], tf.float32))
    elif "sequence_ids" in x:
        counts["sequences"] = tf.reduce_sum(
            tf.cast(tf.reduce_max(x["sequence_ids"], axis=-1), tf.float32))
    else:
        counts["sequences"] = tf.cast(tf.shape(x["input_ids"])[0], tf.float32)
    return counts


def _count_from_features(model, term: str, x: dict):
    if term == "mlm" and "masked_lm_weights" in x:
        weights = tf.cast(x["masked_lm_weights"], tf.float32)
        if getattr(model, "mlm_averaging", "token") == "token":
            return tf.reduce_sum(weights)
        if "masked_lm_sequence_ids" in x and "sequence_mask" in x:
            # "sequence" averaging counts sequences that have predictions.
            k = tf.range(1, tf.shape(x["sequence_mask"])[-1] + 1)
            hit = tf.logical_and(
                tf.equal(x["masked_lm_sequence_ids"][..., None], k), weights[..., None] > 0)
            return tf.reduce_sum(tf.cast(tf.reduce_any(hit, axis=-2), tf.float32))
        return None
    if term in ("nsp", "classification", "cls", "classifier") and "sequence_mask" in x:
        return tf.reduce_sum(tf.cast(x["sequence_mask"], tf.float32))
    if term in ("lm", "causal_lm", "clm") and "labels" in x:
        return tf.reduce_sum(tf.cast(tf.not_equal(x["labels"], -100), tf.float32))
    return None
