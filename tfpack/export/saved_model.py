"""SavedModels that serve packed features and unpacked sequences.

Signatures of the exported SavedModel (load it with `tf.saved_model.load`; no
tfpack import is needed to serve it):

- ``serving_default``: the packed features the model reads (DESIGN.md, batch
  first, fixed ``L``/``K``/``M``) -> the model's outputs (``[B, K, ...]``
  per-sequence, ``[B, L, ...]`` per-token, ``[B, M, ...]`` per-prediction).
- ``serve_sequences``: ``input_ids`` int32 ``[N, T]``, unpacked sequences
  padded with 0 (and optionally ``token_type_ids`` ``[N, T]``) -> packs them
  inside the graph (next-fit, ``tfpack.export.graph_packing``), runs the model
  and returns per-sequence outputs in the caller's order: ``[N, ...]`` for the
  model's per-sequence outputs and ``[N, min(T, L), ...]`` for per-token ones
  (per-prediction outputs such as MLM logits need masked positions and are
  left out).

The same function for ragged input is kept on the loaded object as
``serve_ragged(input_ids: tf.RaggedTensor)``.

Export policy (where, overwrite) is kept apart from the mechanics: the
SavedModel is written to a temporary directory next to ``path`` and renamed
into place, so an interrupted or failed export never leaves a half-written
directory at ``path``.

Example:

>>> from tfpack.export import export_saved_model
>>> path = export_saved_model(model, "saved_models/classifier")  # doctest: +SKIP
>>> import tensorflow as tf
>>> served = tf.saved_model.load(path)  # doctest: +SKIP
>>> served.signatures["serve_sequences"](input_ids=tf.constant([[101, 7, 102, 0]]))  # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
import uuid

import tensorflow as tf

from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.export.graph_packing import (gather_sequence_outputs, gather_token_outputs,
                                         pack_sequences)
from tfpack.training.validation import build_shapes

__all__ = ["export_saved_model", "DEFAULT_EXPORT_DIR"]

DEFAULT_EXPORT_DIR = "saved_models"
# Labels are never serving inputs (the feature contract says which are).
_LABELS = frozenset(f.name for f in contract.FEATURES if f.role == "label")


def _dtype(name: str) -> tf.DType:
    return tf.as_dtype(contract.dtype_of(name) if name in contract.names() else "int32")


def _feature_specs(model, element_spec) -> dict:
    """Per-example TensorSpecs of the features the model reads (no labels)."""
    if element_spec is None:
        shapes = build_shapes(model)
        if shapes is None:
            raise TfpackError(
                "The model must have been called on packed features (so L, K and M are "
                "known), or `element_spec` must be given. Received: an unbuilt model "
                f"{model.name!r}")
        element_spec = {k: tf.TensorSpec(list(s)[1:], _dtype(k))
                        for k, s in shapes.items()}
    wanted = tuple(getattr(model, "input_features", ())) or tuple(element_spec)
    specs = {}
    for name in wanted:
        if name in element_spec and name not in _LABELS:
            spec = element_spec[name]
            specs[name] = tf.TensorSpec([None] + list(spec.shape), spec.dtype, name=name)
    if "input_ids" not in specs:
        raise TfpackError(
            "The packed features must include `input_ids`. "
            f"Received: features={sorted(element_spec)}")
    return specs


def _output_kinds(model, specs) -> dict:
    kinds = dict(getattr(model, "packed_outputs", {}) or {})
    if kinds:
        return kinds
    # No declaration: infer from the second dimension of each output.
    dummy = {k: tf.zeros([1] + s.shape.as_list()[1:], s.dtype) for k, s in specs.items()}
    L = specs["input_ids"].shape[1]
    K = specs["sequence_mask"].shape[1] if "sequence_mask" in specs else None
    out = model(dummy, training=False)
    return {k: ("token" if v.shape[1] == L else "sequence" if v.shape[1] == K else
                "prediction") for k, v in out.items()}


class _Serving(tf.Module):
    def __init__(self, model, specs, kinds):
        super().__init__()
        self.model = model
        self._names = list(specs)
        self._kinds = kinds
        self._L = specs["input_ids"].shape[1]
        self._K = specs["sequence_mask"].shape[1] if "sequence_mask" in specs else 1
        self._M = specs["masked_lm_positions"].shape[1] if "masked_lm_positions" in specs else 0
        self._specs = specs
        self.serve_packed = tf.function(self._serve_packed, input_signature=list(specs.values()))
        self.serve_ragged = tf.function(
            lambda input_ids: self._serve_ragged(input_ids, tf.zeros_like(input_ids)),
            input_signature=[tf.RaggedTensorSpec([None, None], tf.int32)])
        self.serve_sequences = tf.function(self._serve_padded, input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="input_ids"),
            tf.TensorSpec([None, None], tf.int32, name="token_type_ids")])
        self.serve_sequences_ids_only = tf.function(
            lambda input_ids: self._serve_padded(input_ids, tf.zeros_like(input_ids)),
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="input_ids")])

    def _serve_packed(self, *features):
        outputs = self.model(dict(zip(self._names, features)), training=False)
        return {k: tf.convert_to_tensor(v) for k, v in outputs.items()}

    def _serve_ragged(self, input_ids, token_type_ids):
        features, placement = pack_sequences(input_ids, self._L, self._K, token_type_ids)
        packs = tf.shape(features["input_ids"])[0]
        if "masked_lm_positions" in self._specs:
            features["masked_lm_positions"] = tf.zeros([packs, self._M], tf.int32)
        features = {k: tf.cast(features[k], s.dtype) for k, s in self._specs.items()}
        outputs = self.model(features, training=False)
        width = tf.minimum(tf.cast(input_ids.bounding_shape()[1], tf.int32), self._L)
        result = {}
        for name, value in outputs.items():
            kind = self._kinds.get(name)
            if kind == "sequence":
                result[name] = gather_sequence_outputs(value, placement)
            elif kind == "token":
                result[name] = gather_token_outputs(value, placement, width)
        result["pack_index"] = placement["pack"]
        return result

    def _serve_padded(self, input_ids, token_type_ids):
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(input_ids, 0), tf.int32), axis=1)
        return self._serve_ragged(tf.RaggedTensor.from_tensor(input_ids, lengths=lengths),
                                  tf.RaggedTensor.from_tensor(token_type_ids, lengths=lengths))


def _check_writable(path: str) -> str:
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    try:
        os.makedirs(parent, exist_ok=True)
        probe = os.path.join(parent, f".tfpack-write-test-{uuid.uuid4().hex[:8]}")
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as error:
        raise TfpackError(
            "The export path must be in a writable directory. "
            f"Received: path={path!r} ({error.strerror})") from None
    if os.path.exists(path) and not os.path.isdir(path):
        raise TfpackError(f"The export path must be a directory or not exist yet. "
                          f"Received: path={path!r} (a file)")
    return path


def export_saved_model(model, path: str | os.PathLike | None = None, *,
                       element_spec: dict | None = None, overwrite: bool = True) -> str:
    """Export a tfpack model as a SavedModel serving packed and unpacked inputs.

    Args:
        model: a tfpack model (called once on packed features, or pass
            ``element_spec``).
        path: the SavedModel directory; default ``saved_models/<model.name>``.
        element_spec: unbatched packed features (e.g. ``dataset.element_spec``)
            giving L, K and M; default: the shapes the model was built with.
        overwrite: replace an existing SavedModel at ``path``.

    Returns:
        The absolute path of the SavedModel.

    Raises:
        TfpackError: unwritable ``path``, an existing one with
            ``overwrite=False``, or a model whose input shapes are unknown.
    """
    path = _check_writable(path if path is not None else
                           os.path.join(DEFAULT_EXPORT_DIR, model.name))
    if os.path.exists(path) and not overwrite:
        raise TfpackError("The export path must not exist when overwrite=False. "
                          f"Received: path={path!r}")
    specs = _feature_specs(model, element_spec)
    module = _Serving(model, specs, _output_kinds(model, specs))
    signatures = {
        "serving_default": module.serve_packed.get_concrete_function(),
        "serve_sequences": module.serve_sequences_ids_only.get_concrete_function(),
        "serve_sequences_with_token_types": module.serve_sequences.get_concrete_function(),
    }
    parent, name = os.path.split(path)
    tmp = os.path.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:8]}")
    old = None
    try:
        tf.saved_model.save(module, tmp, signatures=signatures)
        if os.path.exists(path):
            old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(path, old)
        os.rename(tmp, path)
    except OSError as error:
        if old is not None and not os.path.exists(path):
            os.rename(old, path)
            old = None
        raise TfpackError(f"The export path must be writable. Received: path={path!r} "
                          f"({error.strerror})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return path
