"""The pack shapes (L, K, M) an export serves at: stated or certain, never guessed.

Sources, in order of precedence:

1. explicit arguments ``max_length`` / ``max_sequences_per_pack`` /
   ``max_predictions_per_pack`` (CLI ``--max-length``, ``--max-sequences-per-pack``,
   ``--max-predictions``);
2. a dataset's ``element_spec`` (unbatched packed features);
3. the shapes the model was trained at, recorded by ``fit`` / `Trainer`
   (`tfpack.training.trained_lengths`).

A model's build shapes are never used: a smoke call at L=8 or
``from_pretrained`` does not say at which shapes the model works. An
explicit value that contradicts ``element_spec`` is an error; anything the
model's features need and no source gives is a `TfpackError` naming what to
pass.

Example:

>>> import tensorflow as tf
>>> from tfpack.export.shapes import serving_lengths
>>> from tfpack.models import CausalLM
>>> model = CausalLM(vocabulary_size=20, num_layers=1, hidden_dim=8,
...                  num_heads=2, intermediate_dim=16)
>>> serving_lengths(model, max_length=32)
{'L': 32}
"""

from __future__ import annotations

import tensorflow as tf

from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.models.limits import input_limits
from tfpack.params import Anything, InstanceOf, Integer, validate_params
from tfpack.training import trained_lengths
from tfpack.training.validation import lengths_of

# The declared pack sizes (`tfpack.params`) of `serving_lengths` and `export_saved_model`.
SIZE_PARAMETERS = {
    "model": Anything("a tfpack model"),
    "element_spec": [None, InstanceOf(dict, description="a dict of unbatched feature specs")],
    "max_length": [None, Integer(1)], "max_sequences_per_pack": [None, Integer(1)],
    "max_predictions_per_pack": [None, Integer(1)],
}

__all__ = ["serving_lengths", "feature_specs", "feature_kinds"]


def feature_kinds() -> dict:
    """The features a model may read at serving time, their dimension and dtype
    (the inputs of every registered task declaration, `tfpack.features`)."""
    return {name: (dimension, tf.as_dtype(dtype))
            for name, (dimension, dtype) in contract.input_kinds().items()}
_ARGUMENT = {"L": ("max_length", "--max-length"),
             "K": ("max_sequences_per_pack", "--max-sequences-per-pack"),
             "M": ("max_predictions_per_pack", "--max-predictions")}


def _input_features(model, element_spec) -> tuple:
    features = tuple(getattr(model, "input_features", ()) or ())
    if not features and element_spec:
        features = tuple(name for name in element_spec if name in feature_kinds())
    if "input_ids" not in features:
        raise TfpackError("The model must read `input_ids` (`model.input_features`). "
                          f"Received: input_features={features}")
    return tuple(name for name in features if name in feature_kinds())


def _position_capacity(model) -> int | None:
    """Rows of the model's position table (None: rotary positions, no table)."""
    return input_limits(model).get("position_ids")


@validate_params(SIZE_PARAMETERS)
def serving_lengths(model, element_spec: dict | None = None, *, max_length=None,
                    max_sequences_per_pack=None, max_predictions_per_pack=None) -> dict:
    """``{"L": ..., "K": ..., "M": ...}`` (those the model's features need).

    Raises:
        TfpackError: a non-positive value, a value contradicting
            ``element_spec``, L beyond the model's position table, or a size
            no source gives (the message names the argument and CLI flag).
    """
    explicit = {"L": max_length, "K": max_sequences_per_pack, "M": max_predictions_per_pack}
    from_spec = lengths_of(element_spec) if element_spec else {}
    conflicts = [f"{_ARGUMENT[k][0]}={v} but element_spec has {k}={from_spec[k]}"
                 for k, v in explicit.items() if v is not None and k in from_spec
                 and from_spec[k] != v]
    if conflicts:
        raise TfpackError("Explicit sizes must agree with `element_spec`. Received: "
                          + "; ".join(conflicts))
    found = {**(trained_lengths.read(model) or {}), **from_spec,
             **{k: v for k, v in explicit.items() if v is not None}}
    needed = sorted({feature_kinds()[f][0] for f in _input_features(model, element_spec)},
                    key="LKM".index)
    missing = [k for k in needed if k not in found]
    if missing:
        wanted = ", ".join(f"`{_ARGUMENT[k][0]}=` (CLI {_ARGUMENT[k][1]})" for k in missing)
        raise TfpackError(
            f"The served pack shapes must be known: pass {wanted} or an `element_spec`, "
            "or train the model first (fit / Trainer record the shapes they train at). "
            f"Received: model {model.name!r} with no recorded {'/'.join(missing)}")
    capacity = _position_capacity(model)
    if capacity is not None and found["L"] > capacity:
        raise TfpackError(f"`max_length` must be at most the model's max_sequence_length="
                          f"{capacity} (the rows of its position table). "
                          f"Received: max_length={found['L']}")
    return {k: int(found[k]) for k in needed}


def feature_specs(model, lengths: dict, element_spec: dict | None = None) -> dict:
    """Batched ``TensorSpec``s (``[None, L]`` ...) of the packed features served."""
    specs = {}
    for name in _input_features(model, element_spec):
        kind, dtype = feature_kinds()[name]
        specs[name] = tf.TensorSpec([None, lengths[kind]], dtype, name=name)
    return specs
