"""The packed-feature contract: every feature a pack may hold, in one place.

A packed example is a dict of fixed-shape features. This module is the one
table of their names, dtypes, dimensions, roles and padding values; the
table itself is derived from the registered task declarations
(`tfpack.tasks`: the core features every pack has, plus each task's own
label and head-input features). The tf.data specs
(`tfpack.data.packed_feature_spec`), the models' inputs and labels, the
trainer's shape validation, the export signatures and the numpy packer of
`tfpack.testing` are all derived from it. It imports neither TensorFlow nor
Keras.

Dimensions: ``L`` = tokens per pack (max length), ``K`` = sequences per pack,
``M`` = prediction slots per pack (masked LM), ``Le`` and ``Ld`` = encoder
and decoder tokens per pair pack (`tfpack.tasks.seq2seq`); a batch adds a
leading batch dimension.

Roles: ``"input"`` features are read by the model's forward pass (and are the
export signature); ``"label"`` features are read only by a task's loss;
``"index"`` features are bookkeeping read by neither. A feature belongs to
the tasks listed in ``tasks`` (``None``: every task); the same name can mean
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

from collections.abc import Iterable

from tfpack import tasks as _tasks
from tfpack.errors import TfpackError
from tfpack.tasks.base import IGNORE_LABEL, Feature

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
    "input_kinds",
    "label_features",
    "names",
    "outputs",
    "padding_value",
    "table",
]

# Dimension symbol -> the packing option that sets it.
DIMENSIONS = {"L": "max_length", "K": "max_sequences_per_pack",
              "M": "max_predictions_per_pack", "Le": "max_encoder_length",
              "Ld": "max_decoder_length"}


def table() -> tuple[Feature, ...]:
    """Every feature of the contract: the core features, then each registered
    task's own (`tfpack.tasks`), in registration order."""
    return _tasks.CORE_FEATURES + tuple(f for spec in _tasks.specs() for f in spec.features)


def __getattr__(name):
    # Live views of the registry: a task registered later is in them too.
    if name == "FEATURES":
        return table()
    if name == "TASKS":
        return _tasks.names()
    raise AttributeError(f"module 'tfpack.features' has no attribute {name!r}")


def names() -> frozenset[str]:
    """Every feature name of the contract."""
    return frozenset(f.name for f in table())


def feature(name: str, task: str | None = None) -> Feature:
    """The contract entry of ``name`` (for ``task`` where the name is shared).

    >>> feature("sequence_mask").dtype
    'float32'
    """
    found = [f for f in table() if f.name == name
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
    """``"L"``, ``"K"``, ``"M"``, ``"Le"``, ``"Ld"`` or ``None``; ``None`` also when ``name`` is
    shared by tasks with different dimensions and ``task`` does not say.

    >>> dimension_of("masked_lm_ids"), dimension_of("labels")
    ('M', None)
    """
    matches = {f.dimension for f in table() if f.name == name
               and (task is None or f.tasks is None or task in f.tasks)}
    if not matches and name not in names():
        feature(name, task)  # Raises the contract error.
    return matches.pop() if len(matches) == 1 else None


def padding_value(name: str, task: str | None = None) -> int | float:
    """The value padding slots of ``name`` hold."""
    return feature(name, task).padding


def label_features(task: str) -> tuple[str, ...]:
    """The label features a task's loss reads, in declaration order."""
    return _tasks.get(task).label_features


def outputs(task: str | None) -> dict[str, str]:
    """Output name -> packing (``"token"``, ``"sequence"``, ``"prediction"``)
    of a task's model (``None``: a backbone's ``sequence_output``).

    >>> outputs("classification"), outputs(None)
    ({'logits': 'sequence'}, {'sequence_output': 'token'})
    """
    return dict(_tasks.BACKBONE_OUTPUTS if task is None else _tasks.get(task).outputs)


def input_kinds() -> dict[str, tuple[str, str]]:
    """``{name: (dimension, dtype)}`` of every input feature (what a model may
    read at serving time), from every registered task."""
    return {f.name: (f.dimension, f.dtype) for f in table() if f.role == "input"}


def check_names(feature_names: Iterable[str], where: str) -> None:
    """Raise `TfpackError` listing every name the contract lacks."""
    unknown = sorted(set(feature_names) - names())
    if unknown:
        raise TfpackError(
            "Feature names must be in the tfpack feature contract "
            f"(tfpack.features). Received: unknown features {unknown} in {where}")


def _any_task(name: str) -> str | None:
    dtypes = {f.dtype for f in table() if f.name == name}
    if len(dtypes) > 1:  # Never true today; a guard for future entries.
        raise TfpackError(f"Feature {name!r} must have one dtype. Received: {dtypes}")
    return next((f.tasks[0] for f in table() if f.name == name and f.tasks), None)
