"""Feature roles: how each feature of an unpacked example enters a pack.

The roles are derived from a task's declaration (`tfpack.tasks`): every
feature packs one way (``packing``) from one source (``source``):

- token features (``input_ids``, ``token_type_ids``, the float
  ``loss_weights`` of supervised fine-tuning): shape ``[length]``;
  concatenated pack by pack into ``[L]`` and padded (contract padding).
- per-sequence features (``next_sentence_labels``, ``labels``): scalars;
  stacked into ``[K]`` and padded.
- prediction features (``masked_lm_positions``, ``masked_lm_ids``,
  ``masked_lm_weights``): shape ``[num_predictions]``; concatenated into
  ``[M]``.
- shifted features (``masked_lm_positions``): positions inside the example;
  the offset of their sequence in the pack is added.
- derived features, never read: causal-LM ``labels`` (the next token of the
  same sequence, -100 elsewhere), ``masked_lm_sequence_ids`` (the slot of
  each prediction).

The first token feature (``input_ids``) defines the length of an example.
Packs always also hold ``sequence_ids``, ``position_ids``, ``cls_positions``,
``sequence_mask`` and ``example_ids`` (each slot's index in the input). Every name, dtype, shape and padding value of a pack
comes from the feature contract, `tfpack.features`.

Example:

>>> import tensorflow as tf
>>> from tfpack.data import features
>>> roles = features.FeatureRoles.bert()
>>> roles.tokens, roles.sequence
(('input_ids', 'token_type_ids'), ('next_sentence_labels',))
>>> spec = {"input_ids": tf.TensorSpec([None], tf.int32)}
>>> features.FeatureRoles.infer(spec).name
'causal_lm'
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from tfpack import features as contract
from tfpack import tasks
from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL

__all__ = ["FeatureRoles", "packed_feature_spec", "IGNORE_LABEL"]


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
        contract.check_names(
            self.tokens + self.sequence + self.predictions + self.derived,
            f"the {self.name!r} feature roles")

    @classmethod
    def for_task(cls, task: "str | tasks.TaskSpec", preset: str | None = None) -> "FeatureRoles":
        """The roles of a registered task (under one of its presets).

        >>> FeatureRoles.for_task("causal_lm").derived
        ('labels',)
        """
        spec = tasks.get(task) if isinstance(task, str) else task
        if any(f.packing in ("encoder_token", "decoder_token") for f in spec.features):
            raise TfpackError(
                f"Task {spec.name!r} packs pairs into two rows (encoder and decoder), which "
                "tf.data packing of one row does not make; use "
                "`tfpack.builders.seq2seq_examples`. Received: task=" + repr(spec.name))
        chosen = tasks.preset(preset or spec.name)[1]
        features = tuple(f for f in spec.features if f.name not in chosen.omit)
        core = {f.name: f for f in tasks.CORE_FEATURES}

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
        (`tfpack.tasks.preset_names`)."""
        if isinstance(roles, FeatureRoles):
            return roles
        if not isinstance(roles, str):
            raise TfpackError(
                f"`roles` must be a FeatureRoles or one of {tasks.preset_names()}. "
                f"Received: roles={roles!r}")
        spec, preset = tasks.preset(roles)
        return cls.for_task(spec, preset.name)

    @classmethod
    def infer(cls, element_spec) -> "FeatureRoles":
        """The preset matching a dataset's features (`tfpack.tasks.detect`).

        ``bert`` when ``masked_lm_positions`` is present, ``sft`` when
        ``loss_weights`` is, ``classification`` when a scalar ``labels`` is,
        else ``causal_lm``; a registered task's ``detect`` adds its rule.
        """
        ranks = {}
        if isinstance(element_spec, dict):
            ranks = {n: s.shape.rank for n, s in element_spec.items()
                     if getattr(s, "shape", None) is not None}
        spec, preset = tasks.detect(ranks)
        return cls.for_task(spec, preset.name)

    @property
    def length_feature(self) -> str:
        return self.tokens[0]

    @property
    def causal_labels(self) -> bool:
        """Whether ``labels`` [L] are derived as next tokens."""
        return any(self._entry(n).source == "next_token" for n in self.derived)

    def _entry(self, name):
        return contract.feature(name, self.task)

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
            if not isinstance(spec, tf.TensorSpec):
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


def packed_feature_spec(
    roles: FeatureRoles, max_length: int, max_sequences_per_pack: int, max_predictions: int | None
) -> dict[str, tf.TensorSpec]:
    """The contract features (`tfpack.features`) of one pack under ``roles``, unbatched.

    >>> spec = packed_feature_spec(FeatureRoles.causal_lm(), 8, 2, None)
    >>> sorted(spec)  # doctest: +NORMALIZE_WHITESPACE
    ['cls_positions', 'example_ids', 'input_ids', 'labels', 'position_ids', 'sequence_ids',
     'sequence_mask']
    """
    sizes = {"L": max_length, "K": max_sequences_per_pack, "M": max_predictions}
    entries = {n: contract.feature(n, roles.task) for n in packed_feature_names(roles)}
    return {n: tf.TensorSpec([sizes[e.dimension]], tf.as_dtype(e.dtype))
            for n, e in entries.items()}


def packed_feature_names(roles: FeatureRoles) -> list[str]:
    """The names of a pack's features under ``roles``, in pack order."""
    def derived(packing):
        return [n for n in roles.derived if contract.feature(n, roles.task).packing == packing]

    names = [*roles.tokens, "sequence_ids", "position_ids"]
    if roles.predictions:
        names += [*roles.predictions, *derived("prediction")]
    names += ["cls_positions", "sequence_mask", "example_ids", *roles.sequence,
              *derived("sequence")]
    return names + derived("token")
