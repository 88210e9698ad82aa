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

import dataclasses
from collections.abc import Iterable

from tfpack import tasks as _tasks
from tfpack.errors import TfpackError
from tfpack.params import InstanceOf, Text, declare_fields
from tfpack.tasks.base import IGNORE_LABEL, Feature

__all__ = [
    "DIMENSIONS",
    "FEATURES",
    "IGNORE_LABEL",
    "TASKS",
    "Feature",
    "FeatureRoles",
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


_NAMES = InstanceOf(tuple, description="a tuple of feature names")


@declare_fields({
    "name": Text(), **dict.fromkeys(
        ("tokens", "sequence", "predictions", "derived", "shifted", "optional"), _NAMES),
    "task": [None, Text()],
})
@dataclasses.dataclass(frozen=True)
class FeatureRoles:
    """Which input features are token-level, per-sequence or prediction slots.

    Usually built from a task declaration (`FeatureRoles.get`, `for_task`).

    Attributes:
        name: a short name for messages (``"bert"``, ``"causal_lm"``, ...).
        tokens: token-level features read from the input; the first one
            defines the length.
        sequence: per-sequence scalar features, stacked to ``[K]``.
        predictions: prediction-slot features read from the input,
            concatenated to ``[M]``; the first one counts the predictions.
        derived: features computed by the packer, never read (causal-LM
            ``labels``, ``masked_lm_sequence_ids``).
        shifted: features of ``sequence``/``predictions`` that are positions
            inside the example: the sequence's offset in the pack is added.
        optional: features that may be absent from the input; token and
            sequence ones are then left out of the packs, prediction ones
            declared ``source="ones"`` are filled with 1.0.
        task: the contract task (which ``labels`` is meant), if any.
    """

    name: str
    tokens: tuple[str, ...] = ("input_ids",)
    sequence: tuple[str, ...] = ()
    predictions: tuple[str, ...] = ()
    derived: tuple[str, ...] = ()
    shifted: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    task: str | None = None

    def __post_init__(self):
        check_names(
            self.tokens + self.sequence + self.predictions + self.derived,
            f"the {self.name!r} feature roles")

    @classmethod
    def for_task(cls, task: "str | _tasks.TaskSpec", preset: str | None = None) -> "FeatureRoles":
        """The roles of a registered task (under one of its presets).

        >>> FeatureRoles.for_task("causal_lm").derived
        ('labels',)
        """
        spec = _tasks.get(task) if isinstance(task, str) else task
        if any(f.packing in ("encoder_token", "decoder_token") for f in spec.features):
            raise TfpackError(
                f"Task {spec.name!r} packs pairs into two rows (encoder and decoder), which "
                "tf.data packing of one row does not make; use "
                "`tfpack.builders.seq2seq_examples`. Received: task=" + repr(spec.name))
        chosen = _tasks.preset(preset or spec.name)[1]
        features = tuple(f for f in spec.features if f.name not in chosen.omit)
        core = {f.name: f for f in _tasks.CORE_FEATURES}

        def read(packing):
            return tuple(f.name for f in features if f.packing == packing and f.read)

        optional = tuple(spec.reads) + tuple(
            f.name for f in features if f.source in ("optional", "ones"))
        return cls(
            name=chosen.name,
            tokens=("input_ids",) + tuple(n for n in spec.reads
                                          if core[n].packing == "token") + read("token"),
            sequence=read("sequence"),
            predictions=read("prediction"),
            derived=tuple(f.name for f in features if not f.read),
            shifted=tuple(f.name for f in features if f.shift),
            optional=tuple(n for n in optional if n not in chosen.require),
            task=spec.name,
        )

    @classmethod
    def bert(cls) -> "FeatureRoles":
        """BERT pre-training: tokens, token types, masked LM and NSP labels."""
        return cls.get("bert")

    @classmethod
    def causal_lm(cls) -> "FeatureRoles":
        """Causal LM: tokens only; ``labels`` [L] derived per sequence."""
        return cls.get("causal_lm")

    @classmethod
    def sft(cls) -> "FeatureRoles":
        """Supervised fine-tuning of a causal LM: tokens and the weight of each
        position's target (``loss_weights``, 0.0 on prompts); ``labels`` derived."""
        return cls.get("sft")

    @classmethod
    def classification(cls) -> "FeatureRoles":
        """Per-sequence classification: tokens, token types, ``labels`` [K]."""
        return cls.get("classification")

    @classmethod
    def get(cls, roles: "str | FeatureRoles") -> "FeatureRoles":
        """``roles`` itself, or the preset (or task) named ``roles``
        (`tfpack._tasks.preset_names`)."""
        if isinstance(roles, FeatureRoles):
            return roles
        if not isinstance(roles, str):
            raise TfpackError(
                f"`roles` must be a FeatureRoles or one of {_tasks.preset_names()}. "
                f"Received: roles={roles!r}")
        spec, preset = _tasks.preset(roles)
        return cls.for_task(spec, preset.name)

    @classmethod
    def infer(cls, element_spec) -> "FeatureRoles":
        """The preset matching a dataset's features (`tfpack._tasks.detect`).

        ``bert`` when ``masked_lm_positions`` is present, ``sft`` when
        ``loss_weights`` is, ``classification`` when a scalar ``labels`` is,
        else ``causal_lm``; a registered task's ``detect`` adds its rule.
        """
        ranks = {}
        if isinstance(element_spec, dict):
            ranks = {n: s.shape.rank for n, s in element_spec.items()
                     if getattr(s, "shape", None) is not None}
        spec, preset = _tasks.detect(ranks)
        return cls.for_task(spec, preset.name)

    @property
    def length_feature(self) -> str:
        return self.tokens[0]

    @property
    def causal_labels(self) -> bool:
        """Whether ``labels`` [L] are derived as next tokens."""
        return any(self._entry(n).source == "next_token" for n in self.derived)

    def _entry(self, name):
        return feature(name, self.task)

    def filled(self, name) -> bool:
        """Whether an absent ``name`` is filled (1.0) rather than left out."""
        return self._entry(name).source == "ones"

    def present(self, element_spec) -> "FeatureRoles":
        """These roles without the optional features the input lacks."""
        def keep(names):
            return tuple(n for n in names if n in element_spec or n not in self.optional
                         or self.filled(n))
        return dataclasses.replace(self, tokens=keep(self.tokens),
                                   sequence=keep(self.sequence),
                                   predictions=keep(self.predictions))

    def validate(self, element_spec) -> None:
        """Check a dataset's ``element_spec`` against these roles.

        Every offending feature is listed in one `TfpackError`.
        """
        if not isinstance(element_spec, dict):
            raise TfpackError(
                "The dataset to pack must yield dicts of tensors. "
                f"Received: element_spec={element_spec!r}"
            )
        problems = []

        def check(name, rank):
            spec = element_spec.get(name)
            if spec is None:
                if name not in self.optional:
                    problems.append(f"missing feature {name!r}")
                return
            if not _dense(spec):
                problems.append(
                    f"feature {name!r} must be a dense tensor, not {type(spec).__name__}")
                return
            kind = "float" if self._entry(name).dtype == "float32" else "int"
            good_dtype = spec.dtype.is_integer if kind == "int" else spec.dtype.is_floating
            if not good_dtype or spec.shape.rank != rank:
                want = "an integer" if kind == "int" else "a float"
                shape = "a scalar" if rank == 0 else "of rank 1 ([length])"
                problems.append(
                    f"feature {name!r} must be {want} tensor {shape}, "
                    f"got {spec.dtype.name} with shape {spec.shape}"
                )

        for name in self.tokens + self.predictions:
            check(name, 1)
        for name in self.sequence:
            check(name, 0)
        if problems:
            raise TfpackError(
                f"The dataset's features must match the {self.name!r} feature roles: "
                + "; ".join(problems)
                + f". Received: element_spec={_describe(element_spec)}"
            )


def _shape(spec) -> str:
    shape = getattr(spec, "shape", None)
    if shape is None or shape.rank is None:  # e.g. the output of `tf.io.parse_tensor`
        return "[<unknown rank>]"
    return str(list(shape))


def _describe(element_spec) -> str:
    return "{" + ", ".join(
        f"{k!r}: {getattr(v, 'dtype', None) and v.dtype.name}{_shape(v)}"
        for k, v in sorted(element_spec.items())
    ) + "}"


def _dense(spec) -> bool:
    """Whether a dataset's `element_spec` entry is a dense `tf.TensorSpec`
    (read by its class, so this module never imports TensorFlow)."""
    return any(c.__name__ == "TensorSpec" for c in type(spec).__mro__)
