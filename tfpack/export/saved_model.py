"""SavedModels that serve packed features and unpacked sequences, in every TF loader.

Signatures of the exported SavedModel (no tfpack import is needed to serve it;
`tf.saved_model.load`, the TF1 session loader, ``saved_model_cli run`` and
TensorFlow Serving all load it):

- ``serving_default``: the packed features the model reads (DESIGN.md, batch
  first, fixed ``L``/``K``/``M``) -> the model's outputs (``[B, K, ...]``
  per-sequence, ``[B, L, ...]`` per-token, ``[B, M, ...]`` per-prediction).
- ``serve_sequences``: ``input_ids`` int32 ``[N, T]`` and ``lengths`` int32
  ``[N]`` (row ``i`` is ``input_ids[i, :lengths[i]]``; what follows is
  ignored, so any id may pad) -> packs the sequences inside the graph
  (best-fit decreasing, `tfpack.export.graph_packing`), runs the model and
  returns, in the caller's order, ``[N, ...]`` for per-sequence outputs and
  ``[N, T, ...]`` for per-token ones (zeros past each length), plus
  ``sequence_mask`` ``[N]`` (0.0 for an empty row, whose outputs are zeros)
  and ``pack_index`` ``[N]`` (-1 for an empty row). Per-prediction outputs
  (MLM logits) need masked positions and are left out.
- ``serve_sequences_with_token_types``: the same with ``token_type_ids``.
- ``serve_padded_sequences`` (only when a padding id is known: the
  ``padding_id`` argument): ``input_ids`` alone; a row ends after its last
  token that is not the padding id.

A request is refused as a whole (``InvalidArgumentError`` naming the rule)
when a length is negative or beyond ``T``, a sequence is longer than ``L``
(no silent truncation: cut it before sending), or an id is negative or not
below the vocabulary size. ``serving_default`` checks every packed feature
the same way before the model runs (`tfpack.export.value_checks`): ids
inside the model's tables, positions inside the pack and the position
table, sequence ids in ``[0, K]``, finite masks; and first the shapes: packs of
another ``L``, ``K`` or ``M`` than exported are refused naming the feature and
the exported width (a signature's ``[None, L]`` is not enforced by every
caller: the model would fail at a Reshape node).

Variables: the served functions capture the model's ``tf.Variable``s, and the
exported object tracks exactly those (as `keras.export.ExportArchive` does).
Tracking the Keras model itself would save copies of its variables that the
graph does not read, which the TF1 loader cannot restore ("Could not find
variable .../kernel").

Example:

>>> from tfpack.export import export_saved_model
>>> path = export_saved_model(model, "saved_models/classifier")  # doctest: +SKIP
>>> import tensorflow as tf
>>> served = tf.saved_model.load(path)  # doctest: +SKIP
>>> served.signatures["serve_sequences"](  # doctest: +SKIP
...     input_ids=tf.constant([[101, 7, 102, 0]]), lengths=tf.constant([3]))
"""

from __future__ import annotations

import functools
import os

import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.export import paths
from tfpack.export.graph_packing import (gather_sequence_outputs, gather_token_outputs,
                                         pack_sequences)
from tfpack.export.shapes import SIZE_PARAMETERS, feature_specs, serving_lengths
from tfpack.export.value_checks import packed_checks, packed_rules, shape_checks
from tfpack.formats import outputs
from tfpack.models.limits import input_limits
from tfpack.params import INT32_MAX, Boolean, Integer, OutputPath, validate_params
from tfpack.version import __version__

__all__ = ["export_saved_model", "DEFAULT_EXPORT_DIR"]

DEFAULT_EXPORT_DIR = "saved_models"
_EXTRA_OUTPUTS = ("sequence_mask", "token_mask", "pack_index")


def _output_kinds(model, specs) -> dict:
    kinds = dict(getattr(model, "packed_outputs", {}) or {})
    if not kinds:  # No declaration: infer from the second dimension of each output.
        dummy = {k: tf.zeros([1] + s.shape.as_list()[1:], s.dtype) for k, s in specs.items()}
        L = specs["input_ids"].shape[1]
        K = specs["sequence_mask"].shape[1] if "sequence_mask" in specs else None
        kinds = {k: ("token" if v.shape[1] == L else "sequence" if v.shape[1] == K else
                     "prediction") for k, v in model(dummy, training=False).items()}
    clash = sorted(set(kinds) & set(_EXTRA_OUTPUTS))
    if clash:
        raise TfpackError(f"Model outputs must not be named {_EXTRA_OUTPUTS} (serve_sequences "
                          f"adds them). Received: outputs named {clash}")
    return kinds


def _serving_module(model, specs, kinds, sizes, padding_id):
    """``(module, signatures)``: the variables the served functions read, and the functions."""
    module = tf.__internal__.tracking.AutoTrackable()
    # The model stays out of the tracked attributes (see the module docstring).
    call = model.__call__
    names, L = list(specs), sizes["L"]
    # Without per-sequence features (a causal LM) a pack holds as many sequences as fit.
    K, M = sizes.get("K", L), sizes.get("M", 0)
    limits = input_limits(model)
    vocabulary = limits.get("input_ids")
    types = limits.get("token_type_ids")
    rules = packed_rules(limits, L, sizes.get("K"))

    def packed(*features):
        features = dict(zip(names, features))
        # Shapes first: a value check of a pack of another length would name a value.
        with tf.control_dependencies(shape_checks(features, specs)):
            features = {k: tf.identity(v) for k, v in features.items()}
        with tf.control_dependencies(packed_checks(features, rules)):
            features = {k: tf.identity(v) for k, v in features.items()}
        outputs = call(features, training=False)
        return {k: tf.convert_to_tensor(v) for k, v in outputs.items()}

    def sequences(input_ids, token_type_ids, row_lengths):
        width = tf.shape(input_ids)[1]
        checks = [
            tf.debugging.assert_equal(tf.shape(row_lengths)[0], tf.shape(input_ids)[0],
                                      message="lengths must have one entry per row"),
            tf.debugging.assert_non_negative(row_lengths, message="lengths must be >= 0"),
            tf.debugging.assert_less_equal(
                row_lengths, width, message="lengths must be at most the width of input_ids"),
            tf.debugging.assert_less_equal(
                row_lengths, L, message=f"every sequence must have at most max_length={L} "
                                     "tokens (cut longer ones before sending)"),
        ]
        with tf.control_dependencies(checks):
            ids = tf.RaggedTensor.from_tensor(input_ids, lengths=row_lengths)
            types_ = tf.RaggedTensor.from_tensor(token_type_ids, lengths=row_lengths)
        checks = (_id_checks(ids.values, vocabulary, "input_ids")
                  + _id_checks(types_.values, types, "token_type_ids"))
        with tf.control_dependencies(checks):
            features, placement = pack_sequences(ids, L, K, types_)
        packs = tf.shape(features["input_ids"])[0]
        features["masked_lm_positions"] = tf.zeros([packs, M], tf.int32)
        features = {k: tf.cast(features[k], s.dtype) for k, s in specs.items()}
        outputs = call(features, training=False)
        result = {}
        for name, value in outputs.items():
            if kinds.get(name) == "sequence":
                result[name] = gather_sequence_outputs(value, placement)
            elif kinds.get(name) == "token":
                result[name] = gather_token_outputs(value, placement, width)
                result["token_mask"] = tf.cast(
                    tf.range(width)[None, :] < row_lengths[:, None], tf.float32)
        result["sequence_mask"] = tf.cast(row_lengths > 0, tf.float32)
        result["pack_index"] = placement["pack"]
        return result

    def ids_spec():
        return tf.TensorSpec([None, None], tf.int32, name="input_ids")

    row_lengthsspec = tf.TensorSpec([None], tf.int32, name="lengths")
    # The functions reach the SavedModel as its signatures only. As attributes of
    # the module, `tf.saved_model.save` would trace each again (its save context is
    # part of a function's cache key) and write every graph twice. No AutoGraph:
    # the served code has no Python control flow on tensors (a tensor used as a
    # Python bool would fail the trace loudly), and converting the model's and
    # the in-graph packer's source cost more than the rest of the trace.
    function = functools.partial(tf.function, autograph=False)
    serve_sequences = function(
        lambda input_ids, lengths: sequences(input_ids, tf.zeros_like(input_ids), lengths),
        input_signature=[ids_spec(), row_lengthsspec])
    serve_sequences_with_token_types = function(
        sequences, input_signature=[
            ids_spec(), tf.TensorSpec([None, None], tf.int32, name="token_type_ids"),
            row_lengthsspec])
    signatures = {
        "serving_default": function(
            packed, input_signature=list(specs.values())).get_concrete_function(),
        "serve_sequences": serve_sequences.get_concrete_function(),
        "serve_sequences_with_token_types":
            serve_sequences_with_token_types.get_concrete_function(),
    }
    if padding_id is not None:
        def padded(input_ids):
            return sequences(input_ids, tf.zeros_like(input_ids),
                             _unpadded_lengths(input_ids, padding_id))

        signatures["serve_padded_sequences"] = function(
            padded, input_signature=[ids_spec()]).get_concrete_function()
    # Track exactly the variables the graphs read (their own tf.Variables).
    module.served_variables = list({id(v): v for function in signatures.values()
                                    for v in function.variables}.values())
    return module, signatures


def _id_checks(ids, limit, what):
    """Assertions that ``ids`` are >= 0 and below ``limit`` (the vocabulary, if known)."""
    checks = [tf.debugging.assert_non_negative(ids, message=f"{what} must be >= 0")]
    if limit is not None:
        checks.append(tf.debugging.assert_less(
            ids, tf.constant(limit, ids.dtype),
            message=f"{what} must be < {limit} (the model's vocabulary)"))
    return checks


def _unpadded_lengths(input_ids, padding_id):
    """Per row: the position after its last token that is not ``padding_id`` (0 if none)."""
    width = tf.shape(input_ids)[1]
    last = tf.where(tf.not_equal(input_ids, padding_id), tf.range(1, width + 1)[None, :], 0)
    return tf.reduce_max(tf.concat([last, tf.zeros_like(last[:, :1])], 1), axis=1)


@validate_params({**SIZE_PARAMETERS, "path": [None, OutputPath("directory")],
                  "padding_id": [None, Integer(0, INT32_MAX)], "overwrite": Boolean()})
def export_saved_model(model, path: str | os.PathLike | None = None, *,
                       element_spec: dict | None = None, max_length: int | None = None,
                       max_sequences_per_pack: int | None = None,
                       max_predictions_per_pack: int | None = None,
                       padding_id: int | None = None, overwrite: bool = True) -> str:
    """Export a tfpack model as a SavedModel serving packed and unpacked inputs.

    Args:
        model: a tfpack model.
        path: the SavedModel directory; default ``saved_models/<model.name>``.
            It must not exist, be empty, or hold a tfpack SavedModel (replaced
            atomically if ``overwrite``); anything else is refused untouched.
        element_spec: unbatched packed features (e.g. ``dataset.element_spec``)
            giving L, K and M.
        max_length, max_sequences_per_pack, max_predictions_per_pack: L, K, M
            stated explicitly; default: ``element_spec``, else the shapes the
            model was trained at (`tfpack.export.shapes`).
        padding_id: the id that pads rows of ``input_ids``; adds the
            ``serve_padded_sequences`` signature.
        overwrite: replace an existing tfpack SavedModel at ``path``.

    Returns:
        The absolute path of the SavedModel.

    Raises:
        TfpackError: unwritable or foreign ``path``, an existing one with
            ``overwrite=False``, or L/K/M that no source gives.
    """
    path = paths.prepare(path if path is not None else
                         os.path.join(DEFAULT_EXPORT_DIR, model.name), overwrite=overwrite)
    lengths = serving_lengths(model, element_spec, max_length=max_length,
                              max_sequences_per_pack=max_sequences_per_pack,
                              max_predictions_per_pack=max_predictions_per_pack)
    specs = feature_specs(model, lengths, element_spec)
    module, signatures = _serving_module(model, specs, _output_kinds(model, specs), lengths,
                                         padding_id)
    tmp = None
    try:
        tmp = paths.temporary_sibling(path)
        tf.saved_model.save(module, tmp, signatures=signatures)
        marker = {"format": "tfpack-saved-model", "tfpack_version": __version__,
                  "lengths": lengths, "padding_id": padding_id,
                  "signatures": sorted(signatures)}
        paths.write_marker(tmp, marker)  # Written last.
        paths.install(tmp, path)
    except OSError as error:
        raise TfpackError(f"The export path must be writable. Received: path={path!r} "
                          f"({error.strerror})") from None
    except tf.errors.OpError as error:  # e.g. a full disk while TensorFlow writes
        raise TfpackError(f"The export path must be writable. Received: path={path!r} "
                          f"({type(error).__name__}: {error.message.splitlines()[0]})"
                          ) from None
    finally:
        if tmp is not None:
            outputs.discard(tmp)  # gone after an install; a failed export's staging
    return path
