"""Feature roles: how each feature of an unpacked example enters a pack.

An unpacked example is a dict of tensors. Every feature plays one *role*:

- token features (``input_ids``, ``token_type_ids``, and the float
  ``loss_weights`` of supervised fine-tuning): shape ``[length]``;
  concatenated pack by pack into ``[L]`` and padded (contract padding).
- per-sequence features (``next_sentence_labels``, ``labels``): int scalars;
  stacked into ``[K]`` and padded with 0.
- masked-LM features (``masked_lm_positions``, ``masked_lm_ids``,
  ``masked_lm_weights``): shape ``[num_predictions]``; concatenated into
  ``[M]``, positions shifted by the offset of their sequence in the pack.
- causal-LM labels: not read from the input; derived from ``input_ids`` as the
  next token of the same sequence, -100 elsewhere.

The first token feature (``input_ids``) defines the length of an example.
Packs always also hold ``sequence_ids``, ``position_ids``, ``cls_positions``
and ``sequence_mask``. Every name, dtype, shape and padding value of a pack
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
from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL

__all__ = ["FeatureRoles", "packed_feature_spec", "dense_rows", "IGNORE_LABEL"]


@dataclasses.dataclass(frozen=True)
class FeatureRoles:
    """Which input features are token-level, per-sequence or masked-LM.

    Attributes:
        name: a short name for messages (``"bert"``, ``"causal_lm"``, ...).
        tokens: token-level features; the first one defines the length.
        sequence: per-sequence scalar features, stacked to ``[K]``.
        masked_lm: ``(positions, ids, weights)`` feature names, or ``None``.
            The weights feature may be absent from the input (then 1.0).
        causal_labels: derive causal-LM ``labels`` ``[L]`` from ``input_ids``.
        optional: features of ``tokens``/``masked_lm`` that may be absent from
            the input; they are then left out of the packs (weights: 1.0).
    """

    name: str
    tokens: tuple[str, ...] = ("input_ids",)
    sequence: tuple[str, ...] = ()
    masked_lm: tuple[str, str, str] | None = None
    causal_labels: bool = False
    optional: tuple[str, ...] = ()

    def __post_init__(self):
        contract.check_names(
            self.tokens + self.sequence + tuple(self.masked_lm or ()),
            f"the {self.name!r} feature roles")

    @classmethod
    def bert(cls) -> "FeatureRoles":
        """BERT pre-training: tokens, token types, masked LM and NSP labels."""
        return cls(
            name="bert",
            tokens=("input_ids", "token_type_ids"),
            sequence=("next_sentence_labels",),
            masked_lm=("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"),
            optional=("token_type_ids", "masked_lm_weights"),
        )

    @classmethod
    def causal_lm(cls) -> "FeatureRoles":
        """Causal LM: tokens only; ``labels`` [L] derived per sequence."""
        return cls(name="causal_lm", tokens=("input_ids",), causal_labels=True)

    @classmethod
    def sft(cls) -> "FeatureRoles":
        """Supervised fine-tuning of a causal LM: tokens and the weight of each
        position's target (``loss_weights``, 0.0 on prompts); ``labels`` derived."""
        return cls(name="sft", tokens=("input_ids", "loss_weights"), causal_labels=True)

    @classmethod
    def classification(cls) -> "FeatureRoles":
        """Per-sequence classification: tokens, token types, ``labels`` [K]."""
        return cls(
            name="classification",
            tokens=("input_ids", "token_type_ids"),
            sequence=("labels",),
            optional=("token_type_ids",),
        )

    @classmethod
    def get(cls, roles: "str | FeatureRoles") -> "FeatureRoles":
        """``roles`` itself, or the preset named ``roles``."""
        if isinstance(roles, FeatureRoles):
            return roles
        presets = {"bert": cls.bert, "causal_lm": cls.causal_lm,
                   "classification": cls.classification, "sft": cls.sft}
        if roles not in presets:
            raise TfpackError(
                f"`roles` must be a FeatureRoles or one of {sorted(presets)}. "
                f"Received: roles={roles!r}"
            )
        return presets[roles]()

    @classmethod
    def infer(cls, element_spec) -> "FeatureRoles":
        """The preset matching a dataset's features.

        ``bert`` when ``masked_lm_positions`` is present, ``classification``
        when a scalar ``labels`` is, ``sft`` when ``loss_weights`` is, else
        ``causal_lm``.
        """
        if isinstance(element_spec, dict):
            if "masked_lm_positions" in element_spec:
                return cls.bert()
            if "loss_weights" in element_spec:
                return cls.sft()
            labels = element_spec.get("labels")
            if labels is not None and labels.shape.rank == 0:
                return cls.classification()
        return cls.causal_lm()

    @property
    def length_feature(self) -> str:
        return self.tokens[0]

    def present(self, element_spec) -> "FeatureRoles":
        """These roles without the optional token features the input lacks."""
        tokens = tuple(
            n for n in self.tokens if n in element_spec or n not in self.optional
        )
        return dataclasses.replace(self, tokens=tokens)

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

        def check(name, rank, kind):
            spec = element_spec.get(name)
            if spec is None:
                if name not in self.optional:
                    problems.append(f"missing feature {name!r}")
                return
            if not isinstance(spec, tf.TensorSpec):
                problems.append(
                    f"feature {name!r} must be a dense tensor, not {type(spec).__name__}")
                return
            good_dtype = spec.dtype.is_integer if kind == "int" else spec.dtype.is_floating
            if not good_dtype or spec.shape.rank != rank:
                want = "an integer" if kind == "int" else "a float"
                shape = "a scalar" if rank == 0 else "of rank 1 ([length])"
                problems.append(
                    f"feature {name!r} must be {want} tensor {shape}, "
                    f"got {spec.dtype.name} with shape {spec.shape}"
                )

        for name in self.tokens:
            check(name, 1, "float" if contract.dtype_of(name) == "float32" else "int")
        for name in self.sequence:
            check(name, 0, "int")
        if self.masked_lm is not None:
            positions, ids, weights = self.masked_lm
            check(positions, 1, "int")
            check(ids, 1, "int")
            if weights in element_spec:
                check(weights, 1, "float")
        if problems:
            raise TfpackError(
                f"The dataset's features must match the {self.name!r} feature roles: "
                + "; ".join(problems)
                + f". Received: element_spec={_describe(element_spec)}"
            )


def _describe(element_spec) -> str:
    return "{" + ", ".join(
        f"{k!r}: {getattr(v, 'dtype', None) and v.dtype.name}{list(getattr(v, 'shape', []))}"
        for k, v in sorted(element_spec.items())
    ) + "}"


def packed_feature_spec(
    roles: FeatureRoles, max_length: int, max_sequences_per_pack: int, max_predictions: int | None
) -> dict[str, tf.TensorSpec]:
    """The contract features (`tfpack.features`) of one pack under ``roles``, unbatched.

    >>> spec = packed_feature_spec(FeatureRoles.causal_lm(), 8, 2, None)
    >>> sorted(spec)
    ['cls_positions', 'input_ids', 'labels', 'position_ids', 'sequence_ids', 'sequence_mask']
    """
    sizes = {"L": max_length, "K": max_sequences_per_pack, "M": max_predictions}
    names = [*roles.tokens, "sequence_ids", "position_ids"]
    if roles.masked_lm is not None:
        names += [*roles.masked_lm, "masked_lm_sequence_ids"]
    names += ["cls_positions", "sequence_mask", *roles.sequence]
    if roles.causal_labels:
        names.append("labels")
    return {name: _spec(name, roles, sizes) for name in names}


def _spec(name: str, roles: FeatureRoles, sizes: dict) -> tf.TensorSpec:
    # `labels` is [L] next-token targets for a causal LM, one class per sequence else.
    task = ("causal_lm" if roles.causal_labels else "classification") if name == "labels" else None
    entry = contract.feature(name, task)
    return tf.TensorSpec([sizes[entry.dimension]], tf.as_dtype(entry.dtype))


def dense_rows(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` with rank-1 ragged features (``ragged_rank`` 0) as dense tensors.

    Unbatching or slicing a `tf.RaggedTensor` yields such features; they hold
    dense values but a `tf.RaggedTensorSpec`.
    """
    spec = dataset.element_spec
    if not isinstance(spec, dict) or not any(
            isinstance(s, tf.RaggedTensorSpec) and s.ragged_rank == 0 for s in spec.values()):
        return dataset
    return dataset.map(tf.autograph.experimental.do_not_convert(lambda x: {
        n: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v for n, v in x.items()}))
