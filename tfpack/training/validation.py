"""Checks that a packed dataset fits a model, and target counts from features.

`validate_element_spec` runs once, when training starts: every feature must
have a fixed shape (XLA compiles one program), features of one kind must agree
on L, K or M, and these must match the model's. All offending features are
listed in one message.

Which dimension (L, K or M) a feature has comes from the feature contract
(`tfpack.features`), for the model's ``task`` where a name is shared (causal-LM
``labels`` are ``[L]``, classification ``labels`` ``[K]``).

`target_counts` gives, for each loss term, how many targets a batch holds, so
the trainer can all-reduce them *before* computing gradients. A task counts
them from the features alone (``model.target_counts(x)``, no forward pass);
any other model with ``loss_terms`` and ``loss_statistics`` gets its counts
from one forward pass.

Example:

>>> import tensorflow as tf
>>> from tfpack.training.validation import lengths_of
>>> spec = {"input_ids": tf.TensorSpec([8], tf.int32),
...         "sequence_mask": tf.TensorSpec([3], tf.float32)}
>>> lengths_of(spec)
{'L': 8, 'K': 3}
"""

from __future__ import annotations

import re

import numpy as np

from tfpack import _tensorflow
from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.params import Anything, InstanceOf, validate_params
from tfpack.training.layouts import shared_prompt_tokens

__all__ = ["validate_element_spec", "target_counts", "lengths_of", "build_shapes",
           "label_checks", "pair_layout_checks", "position_checks", "batch_checks",
           "check_batch", "refusal"]

def _dimension(name: str, task) -> str | None:
    """L, K or M of a contract feature (None: a scalar, unknown or ambiguous)."""
    if name not in contract.names():
        return None
    return contract.dimension_of(name, task)


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
        kind = _dimension(name, None)
        if kind and spec.shape.rank == 1 and spec.shape[0] is not None:
            found.setdefault(kind, int(spec.shape[0]))
    return found


def _model_lengths(model) -> dict:
    """L, K and M of the features the model was built on (if it was built)."""
    shapes = build_shapes(model) or {}
    task = getattr(model, "task", None)
    found = {}
    for name, shape in shapes.items():
        kind = _dimension(name, task)
        shape = list(shape)
        if kind and len(shape) == 2 and shape[1] is not None:
            found.setdefault(kind, int(shape[1]))
    return found


def _position_capacity(model) -> int | None:
    for owner in (model, getattr(model, "backbone", None)):
        value = getattr(owner, "max_sequence_length", None)
        if isinstance(value, int):
            return value
    return None


@validate_params({
    "model": Anything("a tfpack model: its build shapes and position table are read"),
    "element_spec": InstanceOf(dict, description="a dict of unbatched packed feature specs "
                               "(dataset.element_spec)"),
})
def validate_element_spec(model, element_spec) -> dict:
    """Raise `TfpackError` listing every feature that does not fit ``model``.

    Args:
        model: a tfpack model; if it was built, its L, K and M are those of its
            build shapes, and L may not exceed its ``max_sequence_length``.
        element_spec: ``dataset.element_spec`` of UNBATCHED packed examples.

    Returns:
        The dataset's ``{"L": ..., "K": ..., "M": ...}``.
    """
    pairs = {"encoder_input_ids", "decoder_input_ids"} <= set(element_spec)
    if not ("input_ids" in element_spec or pairs):  # a dict: declared
        raise TfpackError(
            "The dataset must yield unbatched dicts of packed features with at least "
            "`input_ids` (pair packs: `encoder_input_ids` and `decoder_input_ids`). "
            f"Received: element_spec={element_spec!r}")
    task = getattr(model, "task", None)
    problems = []
    for name, spec in element_spec.items():
        if _dimension(name, task) and spec.shape.rank != 1:
            problems.append(f"{name} has rank {spec.shape.rank} (an unbatched pack "
                            "has rank 1: the trainer batches, pass unbatched packs)")
        elif not spec.shape.is_fully_defined():
            problems.append(f"{name} has shape {spec.shape} (must be fixed)")
    for name in getattr(model, "required_features", ()):
        if name not in element_spec:
            problems.append(f"missing {name} ({type(model).__name__} reads it)")
    dataset = {}
    for name, spec in element_spec.items():
        kind = _dimension(name, task)
        if kind and spec.shape.rank == 1 and spec.shape[0] is not None:
            size = int(spec.shape[0])
            if kind in dataset and dataset[kind][1] != size:
                problems.append(f"{name} has {kind}={size} but {dataset[kind][0]} has "
                                f"{kind}={dataset[kind][1]}")
            dataset.setdefault(kind, (name, size))
    for kind, expected in _model_lengths(model).items():
        if kind in dataset and dataset[kind][1] != expected:
            problems.append(f"{dataset[kind][0]} has {kind}={dataset[kind][1]} but the "
                            f"model was built with {contract.DIMENSIONS[kind]}={expected}")
    capacity = _position_capacity(model)
    if capacity is not None and "L" in dataset and dataset["L"][1] > capacity:
        problems.append(f"{dataset['L'][0]} has L={dataset['L'][1]} but the model's "
                        f"position table has max_sequence_length={capacity}")
    if problems:
        raise TfpackError(
            "The dataset's packed features must have fixed shapes that match the model. "
            "Received: " + "; ".join(problems))
    return {kind: size for kind, (_, size) in dataset.items()}


def _label_rule(model, x: dict):
    """Class labels past the head: ``(bad, labels, message)`` or `None`.

    Written with array operators only, so one rule serves TensorFlow tensors
    (`label_checks`) and the host's numpy arrays (`check_batch`).
    """
    classes = getattr(model, "num_classes", None)
    if not isinstance(classes, int) or "labels" not in x:
        return None
    labels = x["labels"]
    if _dimension("labels", getattr(model, "task", None)) == "K" and "sequence_mask" in x:
        real = x["sequence_mask"] > 0
    else:
        real = labels != contract.IGNORE_LABEL
    bad = real & ((labels < 0) | (labels >= classes))
    return bad, labels, (f"`labels` must be class ids in [0, {classes}) (num_classes of the "
                         "model). Received: labels=")


def _pair_rule(model, x: dict):
    """Shared prompts (real tokens of ``branch_ids`` 0) for a model without them."""
    if getattr(model, "share_prompt", True) or "branch_ids" not in x:
        return None
    bad = shared_prompt_tokens(x["sequence_ids"], x["branch_ids"])
    return bad, None, ("`model` must be a PreferenceModel(share_prompt=True) to read pairs "
                       "that share their prompt (prompt tokens of branch_ids 0). "
                       "Received: share_prompt=False")


def _position_rule(model, x):
    """Positions past the model's learned position table (``position_table_rows``), read
    where the table is: each sequence's own positions (``sequence_positions``: a pair's two
    sequences). TensorFlow's CPU gather refuses such a position with a raw error; XLA
    clamps it to the last row and Keras on JAX fills it, both without a word."""
    rows = getattr(model, "position_table_rows", None)
    if not isinstance(rows, int) or "position_ids" not in x or "sequence_ids" not in x:
        return None
    reader = getattr(model, "sequence_positions", None)
    positions = x["position_ids"] if reader is None else reader(x)
    return _past_the_table(rows, x["sequence_ids"], positions, "position_ids")


def _row_position_rule(row: str):
    """`_position_rule` for one row of a pair pack (``row``: ``"encoder"`` or ``"decoder"``,
    BART's two learned tables of ``position_table_rows`` rows)."""
    def rule(model, x):
        rows = getattr(model, "position_table_rows", None)
        positions, ids = x.get(f"{row}_position_ids"), x.get(f"{row}_sequence_ids")
        if not isinstance(rows, int) or positions is None or ids is None:
            return None
        return _past_the_table(rows, ids, positions, f"{row}_position_ids")
    return rule


def _past_the_table(rows: int, sequence_ids, positions, name: str):
    """The position rules' result: real tokens whose position has no row of ``rows``."""
    bad = (sequence_ids > 0) & ((positions < 0) | (positions >= rows))
    return bad, positions, (f"`{name}` must be inside [0, {rows}) (the rows of the model's "
                            f"position table). Received: {name}=")


# The rules, by the name of their TensorFlow assertion; what they read (all `check_batch`
# copies to the host).
_RULES = {"check_label_range": _label_rule, "check_pair_layout": _pair_rule,
          "check_position_range": _position_rule,
          "check_encoder_position_range": _row_position_rule("encoder"),
          "check_decoder_position_range": _row_position_rule("decoder")}
_RULE_FEATURES = ("labels", "sequence_mask", "sequence_ids", "branch_ids", "position_ids",
                  "encoder_sequence_ids", "encoder_position_ids", "decoder_sequence_ids",
                  "decoder_position_ids")


def _assertion(found, name: str) -> list:
    """``found`` (a rule's result) as a named TensorFlow assertion."""
    if found is None:
        return []
    tf = _tensorflow.require("tfpack.training.validation's TensorFlow assertions")
    bad, values, message = found
    shown = [] if values is None else [tf.boolean_mask(values, bad)[:1]]
    return [tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [message] + shown,
                                name=name)]


def label_checks(model, x: dict) -> list:
    """Named assertions: every class label a loss reads is inside ``[0, num_classes)``.

    Eager TensorFlow refuses such a label inside the loss; under XLA the loss
    becomes NaN without a word. The trainer runs these before its compiled
    step (a label per sequence where ``sequence_mask`` is set, per token where
    it is not ``-100``), so both refuse it alike.

    >>> import tensorflow as tf
    >>> class Tagger:
    ...     task, num_classes = "token_classification", 3
    >>> _ = label_checks(Tagger(), {"labels": tf.constant([[0, 2, -100]])})  # -100: ignored
    >>> try:
    ...     label_checks(Tagger(), {"labels": tf.constant([[0, 5, -100]])})
    ... except tf.errors.InvalidArgumentError as error:
    ...     print("`labels` must be class ids in [0, 3)" in error.message)
    True
    """
    return _assertion(_label_rule(model, x), "check_label_range")


def pair_layout_checks(model, x: dict) -> list:
    """A named assertion: pairs that share their prompt need ``PreferenceModel(share_prompt=True)``.

    Shared prompts are real tokens of ``branch_ids`` 0
    (`tfpack.training.layouts`); another model would score each response
    without its prompt.
    """
    return _assertion(_pair_rule(model, x), "check_pair_layout")


def position_checks(model, x: dict) -> list:
    """Named assertions: every real token's position has a row in the model's learned
    position table (``position_table_rows``; each sequence's own positions for pairs; both
    rows of an encoder-decoder's pair packs)."""
    return [check for name, rule in _RULES.items() if "position" in name
            for check in _assertion(rule(model, x), name)]


def batch_checks(model, x: dict) -> list:
    """All the named assertions on a batch: `label_checks`, `pair_layout_checks` and
    `position_checks` (the rules `check_batch` runs on the host)."""
    return [check for name, rule in _RULES.items() for check in _assertion(rule(model, x), name)]


def check_batch(model, x: dict) -> None:
    """The rules of `batch_checks` on a batch on the host.

    Where no TensorFlow assertion runs (Keras on JAX, whose steps are jitted):
    the models check each batch before their compiled step
    (`tfpack.models.task`). Raises one `TfpackError` with the assertion's message.

    >>> class Tagger:
    ...     task, num_classes = "token_classification", 3
    >>> check_batch(Tagger(), {"labels": [[0, 2, -100]]})  # -100: ignored
    >>> check_batch(Tagger(), {"labels": [[0, 5, -100]]})
    Traceback (most recent call last):
    ...
    tfpack.errors.TfpackError: `labels` must be class ids in [0, 3) (num_classes of the model). Received: labels=5
    """
    x = {name: _local(x[name]) for name in _RULE_FEATURES if name in x}
    for rule in _RULES.values():
        found = rule(model, x)
        if found is None:
            continue
        bad, values, message = found
        bad = np.asarray(bad)
        if bad.any():
            raise TfpackError(message + ("" if values is None else
                                         str(np.asarray(values)[bad][0])))


# A failed `batch_checks` assertion: its node, its message and the value it shows.
_FAILED = re.compile(r"\{\{node (?:[^{}]*/)?(?:" + "|".join(_RULES) + r")(?:_\d+)?/Assert\}\}")
_ASSERTED = re.compile(r"assertion failed: \[(.*? Received: [^\[\]]*)\](?: \[([^\[\]]*)\])?")


def refusal(error: Exception) -> TfpackError | None:
    """The `TfpackError` of `check_batch` for ``error``, a failed `batch_checks` assertion
    (`None` for any other error), so that a graph refuses a batch as the host does.

    >>> import tensorflow as tf
    >>> @tf.function
    ... def step(labels):
    ...     class Tagger:
    ...         task, num_classes = "token_classification", 3
    ...     with tf.control_dependencies(batch_checks(Tagger(), {"labels": labels})):
    ...         return tf.identity(labels)
    >>> try:
    ...     step(tf.constant([[0, 5, -100]]))
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(refusal(error))
    `labels` must be class ids in [0, 3) (num_classes of the model). Received: labels=5
    """
    text = getattr(error, "message", str(error))
    found = _ASSERTED.search(text) if _FAILED.search(text) else None
    if found is None:
        return None
    # TensorFlow prints the message's quotes and backslashes escaped (model\'s).
    message = re.sub(r"\\(['\"\\])", r"\1", found.group(1))
    return TfpackError(message + (found.group(2) or ""))


def _local(value) -> np.ndarray:
    """``value`` as numpy; of a `jax.Array` spread over several processes
    (Keras on JAX across hosts), this process's shards in device order (each
    process checks the rows it holds; the features share one sharding, so
    their rows stay aligned)."""
    if getattr(value, "is_fully_addressable", True):
        return np.asarray(value)
    shards = sorted(value.addressable_shards, key=lambda shard: shard.device.id)
    return np.concatenate([np.asarray(shard.data) for shard in shards])


def target_counts(model, x: dict) -> dict:
    """Float32 scalars: targets per loss term, ``real_tokens`` and ``sequences``.

    The model's class labels, a pair layout and positions are checked first
    (`batch_checks`): the trainer counts targets outside its compiled step,
    where an assertion still runs.
    """
    tf = _tensorflow.require("tfpack.training.validation.target_counts")
    with tf.control_dependencies(batch_checks(model, x)):
        x = {k: tf.identity(v) for k, v in x.items()}
    if hasattr(model, "target_counts"):
        counts = {t: tf.cast(c, tf.float32) for t, c in model.target_counts(x).items()}
    else:
        # Not a task: one forward pass gives the counts.
        stats = model.loss_statistics(x, model(x, training=False))
        counts = {t: tf.cast(stats[f"{t}_count"], tf.float32) for t in model.loss_terms}
    if "sequence_ids" in x:
        real = tf.reduce_sum(tf.cast(x["sequence_ids"] > 0, tf.float32))
    elif "encoder_sequence_ids" in x:  # Pair packs: the tokens of both rows.
        real = tf.add_n([tf.reduce_sum(tf.cast(x[f"{side}_sequence_ids"] > 0, tf.float32))
                         for side in ("encoder", "decoder")])
    else:
        real = tf.reduce_sum(tf.cast(tf.not_equal(x["input_ids"], 0), tf.float32))
    counts["real_tokens"] = real
    if "sequence_mask" in x:
        counts["sequences"] = tf.reduce_sum(tf.cast(x["sequence_mask"], tf.float32))
    elif "sequence_ids" in x:
        counts["sequences"] = tf.reduce_sum(
            tf.cast(tf.reduce_max(x["sequence_ids"], axis=-1), tf.float32))
    else:
        counts["sequences"] = tf.cast(tf.shape(x["input_ids"])[0], tf.float32)
    return counts
