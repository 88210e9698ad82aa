"""The packed-feature contract: every feature a pack may hold, in one place.

A packed example is a dict of fixed-shape features. This module is the one
definition of their names, dtypes, dimensions, roles and padding values; the
tf.data specs (`tfpack.data.packed_feature_spec`), the models' inputs and
labels, the trainer's shape validation, the export signatures and the numpy
packer of `tfpack.testing` are all derived from it. It imports neither
TensorFlow nor Keras.

Dimensions: ``L`` = tokens per pack (max length), ``K`` = sequences per pack,
``M`` = masked-LM predictions per pack; ``None`` is a scalar. A batch adds a
leading batch dimension.

Roles: ``"input"`` features are read by the model's forward pass (and are the
export signature); ``"label"`` features are read only by a task's loss. A
label belongs to the tasks listed in ``tasks``; the same name can mean
different things for different tasks: ``labels`` is ``[K]`` (one class per
sequence) for ``"classification"`` and ``[L]`` (next-token targets) for
``"causal_lm"``.

Worked example, a causal-LM pack of ``[5, 6, 7]`` and ``[8, 9]`` with
``L=6``, ``K=2``::

    input_ids     [5, 6, 7, 8, 9, 0]          int32 [L], pad 0
    sequence_ids  [1, 1, 1, 2, 2, 0]          int32 [L], pad 0
    position_ids  [0, 1, 2, 0, 1, 0]          int32 [L], pad 0
    labels        [6, 7, -100, 9, -100, -100] int32 [L], pad IGNORE_LABEL
    cls_positions [0, 3], sequence_mask [1., 1.]

>>> from tfpack import features
>>> features.IGNORE_LABEL
-100
>>> features.feature("labels", task="causal_lm").dimension
'L'
>>> features.label_features("classification")
('labels',)
>>> features.check_names(["input_ids", "segment_ids"], where="my model")
Traceback (most recent call last):
...
tfpack.errors.TfpackError: Feature names must be in the tfpack feature contract (tfpack.features). Received: unknown features ['segment_ids'] in my model
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from tfpack.errors import TfpackError

__all__ = [
    "DIMENSIONS",
    "FEATURES",
    "IGNORE_LABEL",
    "TASKS",
    "Feature",
    "check_names",
    "dimension_of",
    "dtype_of",
    "feature",
    "label_features",
    "names",
    "padding_value",
]

# Label value of positions without a target (the Keras / Hugging Face
# convention); the ONE definition of -100 in tfpack.
IGNORE_LABEL = -100

# Dimension symbol -> the packing option that sets it.
DIMENSIONS = {"L": "max_length", "K": "max_sequences_per_pack",
              "M": "max_predictions_per_pack"}

# Tasks whose labels the contract defines ("pretraining" is BERT's MLM + NSP).
TASKS = ("pretraining", "classification", "causal_lm")


@dataclasses.dataclass(frozen=True)
class Feature:
    """One packed feature.

    Attributes:
        name: the dict key.
        dtype: ``"int32"`` or ``"float32"``.
        dimension: ``"L"``, ``"K"``, ``"M"`` or ``None`` (a scalar).
        role: ``"input"`` (read by the forward pass) or ``"label"`` (read by
            a loss only).
        tasks: the tasks that read it; ``None`` for every task.
        padding: the value of padding slots (``IGNORE_LABEL`` for targets
            that must not count).
        doc: one line of meaning.
    """

    name: str
    dtype: str
    dimension: str | None
    role: str
    tasks: tuple[str, ...] | None
    padding: int | float
    doc: str


FEATURES: tuple[Feature, ...] = (
    Feature("input_ids", "int32", "L", "input", None, 0,
            "tokens of the packed sequences, back to back, then padding"),
    Feature("sequence_ids", "int32", "L", "input", None, 0,
            "1..K: the sequence of each token; 0 = padding"),
    Feature("position_ids", "int32", "L", "input", None, 0,
            "position inside its own sequence, restarting at 0"),
    Feature("token_type_ids", "int32", "L", "input", None, 0,
            "BERT sentence A/B ids, when the input has them"),
    Feature("masked_lm_positions", "int32", "M", "input", ("pretraining",), 0,
            "index into the pack of each masked token"),
    Feature("cls_positions", "int32", "K", "input", None, 0,
            "index of each sequence's first token (0 for absent ones)"),
    Feature("sequence_mask", "float32", "K", "input", None, 0.0,
            "1.0 where sequence k exists in the pack"),
    Feature("masked_lm_ids", "int32", "M", "label", ("pretraining",), 0,
            "the true token of each masked position"),
    Feature("masked_lm_weights", "float32", "M", "label", ("pretraining",),
            0.0, "1.0 for a real prediction, 0.0 for padding"),
    Feature("masked_lm_sequence_ids", "int32", "M", "label", ("pretraining",),
            0, "the sequence (1..K) of each prediction; 0 = padding"),
    Feature("next_sentence_labels", "int32", "K", "label", ("pretraining",),
            0, "next-sentence label of each sequence"),
    Feature("labels", "int32", "K", "label", ("classification",), 0,
            "class of each sequence"),
    Feature("labels", "int32", "L", "label", ("causal_lm",), IGNORE_LABEL,
            "next-token target; never a token of another sequence"),
    Feature("loss_weights", "float32", "L", "label", ("causal_lm",), 0.0,
            "weight of each token's target (0.0 = not trained, e.g. prompts)"),
)


def names() -> frozenset[str]:
    """Every feature name of the contract."""
    return frozenset(f.name for f in FEATURES)


def feature(name: str, task: str | None = None) -> Feature:
    """The contract entry of ``name`` (for ``task`` where the name is shared).

    >>> feature("sequence_mask").dtype
    'float32'
    """
    found = [f for f in FEATURES if f.name == name
             and (task is None or f.tasks is None or task in f.tasks)]
    if not found:
        raise TfpackError(
            "Feature names must be in the tfpack feature contract "
            f"(tfpack.features). Received: name={name!r}, task={task!r}")
    if len(found) > 1:
        raise TfpackError(
            f"Feature {name!r} means different things for tasks "
            f"{[f.tasks for f in found]}: pass `task`. Received: task=None")
    return found[0]


def dtype_of(name: str) -> str:
    """The dtype of ``name`` (the same for every task)."""
    return feature(name, _any_task(name)).dtype


def dimension_of(name: str, task: str | None = None) -> str | None:
    """``"L"``, ``"K"``, ``"M"`` or ``None``; ``None`` also when ``name`` is
    shared by tasks with different dimensions and ``task`` does not say.

    >>> dimension_of("masked_lm_ids"), dimension_of("labels")
    ('M', None)
    """
    matches = {f.dimension for f in FEATURES if f.name == name
               and (task is None or f.tasks is None or task in f.tasks)}
    if not matches and name not in names():
        feature(name, task)  # Raises the contract error.
    return matches.pop() if len(matches) == 1 else None


def padding_value(name: str, task: str | None = None) -> int | float:
    """The value padding slots of ``name`` hold."""
    return feature(name, task).padding


def label_features(task: str) -> tuple[str, ...]:
    """The label features a task's loss reads, in contract order."""
    if task not in TASKS:
        raise TfpackError(f"`task` must be one of {TASKS}. Received: task={task!r}")
    return tuple(f.name for f in FEATURES
                 if f.role == "label" and f.tasks is not None and task in f.tasks)


def check_names(feature_names: Iterable[str], where: str) -> None:
    """Raise `TfpackError` listing every name the contract lacks."""
    unknown = sorted(set(feature_names) - names())
    if unknown:
        raise TfpackError(
            "Feature names must be in the tfpack feature contract "
            f"(tfpack.features). Received: unknown features {unknown} in {where}")


def _any_task(name: str) -> str | None:
    dtypes = {f.dtype for f in FEATURES if f.name == name}
    if len(dtypes) > 1:  # Never true today; a guard for future entries.
        raise TfpackError(f"Feature {name!r} must have one dtype. Received: {dtypes}")
    return next((f.tasks[0] for f in FEATURES if f.name == name and f.tasks), None)
