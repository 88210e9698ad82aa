"""The run-time exactness check: one probe pack, packed against each sequence alone.

`check_packing_exact(model)` runs one small probe pack (sequences of 5, 1 and
3 tokens from the model's own vocabulary, fixed seed) through the packed
backbone of `model` and each of its sequences alone through the unpacked
reference, under the model's own precision, attention implementation and
Keras backend, and compares:

1. the output of every transformer layer, where the backbone can return them
   (`layer_outputs`), in order, then ``sequence_output``;
2. the gradient, with respect to every trainable weight, of a fixed random
   projection of ``sequence_output`` summed over the probe's sequences.

The reference "alone" is the keras-hub backbone itself on each sequence with
its padding mask, for a `from_keras_hub` adapter (whatever subclass it is,
so a subclass that changes the computation, or an adapter a keras-hub
release broke, shows in the numbers): the probe's sequences in one call,
each its own row right padded to the longest (rows never meet; the padding
mask keeps the padding out), or one call a sequence where padding changes
what a sequence computes (`padded_batch_reason`: a backbone without a
padding mask, Phi-3's LongRoPE, keras-hub's XLNet). For the others, and
for an adapter whose `keras_hub_known_wrong` says why keras-hub is not the
model there (Qwen's sliding window, dropped by keras-hub's fused attention
on JAX), the reference is the same backbone on packs of one sequence. A
difference beyond the tolerance of the compute dtype (`TOLERANCES`,
relative to the largest magnitude of the reference value) raises
`PackingNotExactError` in one line naming the first layer, output or weight
that differs and by how much.

`Trainer.fit`, `tfpack train`, `from_keras_hub` and the
`tfpack.training.ExactnessCheck` callback run it before anything trains.

Example:

>>> from tfpack.models import CausalLM, DecoderBackbone
>>> model = CausalLM(DecoderBackbone(vocabulary_size=30, num_layers=1,
...                                  hidden_dim=8, num_heads=2,
...                                  intermediate_dim=16))
>>> result = check_packing_exact(model)
>>> result.lengths, result.reference
((5, 1, 3), 'packs of one')
"""

from __future__ import annotations

import inspect
import time
import warnings

import keras
import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import Anything
from tfpack.params import InstanceOf
from tfpack.params import Integer
from tfpack.params import Real
from tfpack.params import validate_params
from tfpack.testing.exactness_result import ExactnessResult
from tfpack.testing.exactness_result import PackingNotExactError
from tfpack.testing._comparison import (PADDED_BATCH_DIFFERS, SEED, TOLERANCES,
                                        backend_gradients, compare_gradients, compare_outputs,
                                        keras_hub_reference, padded_batch_differs)
from tfpack.testing.packer import pack_examples
from tfpack.testing.pair_exactness import check_pairs_exact, reads_pairs

__all__ = ["ExactnessResult", "PackingNotExactError", "PROBE_LENGTHS",
           "PADDED_BATCH_DIFFERS", "TOLERANCES", "check_packing_exact",
           "keras_hub_batch", "keras_hub_inputs", "packed_backbone",
           "padded_batch_reason", "unchecked_reason"]

# A one-token sequence and two longer ones of different lengths.
PROBE_LENGTHS = (5, 1, 3)
# The features a probe pack has.
_PROBE_FEATURES = ("input_ids", "sequence_ids", "position_ids", "token_type_ids")


def packed_backbone(model):
    """The packed backbone of `model`: a task's (a preference model's
    policy's) backbone, or `model` itself.

    >>> from tfpack.models import BertClassifier, BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> packed_backbone(BertClassifier(encoder, num_classes=2)) is encoder
    True
    """
    while hasattr(model, "loss_terms") and hasattr(model, "backbone"):
        model = model.backbone
    return model


def unchecked_reason(model):
    """Why `check_packing_exact` cannot probe `model`, or None.

    The probe needs a packed backbone that follows the backbone protocol
    (`tfpack.models.backbone`: `hidden_dim`, `vocabulary_size`, a dict with
    ``sequence_output``); a model of the bare training contract (a loss, no
    backbone) cannot be probed.

    >>> unchecked_reason(object())
    'object has no packed backbone with `hidden_dim` and `vocabulary_size`'
    """
    backbone = packed_backbone(model)
    if not callable(backbone) or any(getattr(backbone, name, None) is None for name in
                                     ("hidden_dim", "vocabulary_size")):
        return (f"{type(model).__name__} has no packed backbone with `hidden_dim` "
                "and `vocabulary_size`")
    if reads_pairs(backbone) and keras_hub_reference(backbone) is not None:
        return None  # The pair probe (`pair_exactness`).
    other = sorted(set(getattr(backbone, "input_features", ())) - set(_PROBE_FEATURES))
    if other:  # An encoder-decoder's second stream, say.
        return (f"{type(backbone).__name__} reads {other}, which the probe (one "
                "stream of tokens) does not build")
    return None


def _probe(backbone, length, lengths):
    """The probe's examples (fixed seed) and the row length."""
    limits = [length, getattr(backbone, "segment_length", None),
              getattr(backbone, "max_sequence_length", None)]
    longest = min((n for n in limits if n), default=max(lengths))
    lengths = tuple(min(n, longest) for n in lengths)
    k = getattr(backbone, "max_sequences_per_pack", None) or len(lengths)
    lengths = lengths[:k]
    if not length:
        length = min([sum(lengths) + 3] + [n for n in limits[1:] if n])
    while sum(lengths) > length:  # A short L (or position table) of training.
        lengths = lengths[:-1]
    vocabulary = int(getattr(backbone, "vocabulary_size"))
    excluded = {getattr(getattr(backbone, "backbone", None), "pad_token_id", None)}
    tokens = np.array([t for t in range(1, vocabulary) if t not in excluded])
    rng = np.random.default_rng(SEED)
    examples = []
    for n in lengths:
        example = {"input_ids": rng.choice(tokens, n).astype("int32")}
        if "token_type_ids" in getattr(backbone, "input_features", ()):
            example["token_type_ids"] = (np.arange(n) >= n // 2).astype("int32")
        examples.append(example)
    return examples, length


def _implementation(backbone, length):
    """The attention implementation `backbone` runs at row length `length`."""
    if hasattr(backbone, "implementation"):
        return backbone.implementation(length)
    layers = getattr(backbone, "transformer_layers", None) or ()
    attention = getattr(layers[0], "attention", None) if layers else None
    if hasattr(attention, "implementation_for"):
        return attention.implementation_for(length)
    return getattr(backbone, "attention_implementation", "unknown")


def _flat_layers(layers):
    """The layers of a (nested: ALBERT's groups) list of layers."""
    for layer in layers or ():
        if isinstance(layer, (list, tuple)):
            yield from _flat_layers(layer)
        elif isinstance(layer, keras.layers.Layer):
            yield layer


class _Recorder:
    """Records the output of every call of `layers` (in call order) while
    active, by wrapping each layer's `call` on the instance."""

    def __init__(self, layers):
        self.layers = list(_flat_layers(layers))
        self.outputs = []
        self.calls = {}

    def __enter__(self):
        self.saved = [vars(layer).get("call") for layer in self.layers]
        for layer in self.layers:
            call = layer.call

            def recording(*args, _call=call, _name=layer.name, **kwargs):
                output = _call(*args, **kwargs)
                calls = self.calls[_name] = self.calls.get(_name, 0) + 1
                # A layer called again (ALBERT's shared groups) is told apart.
                suffix = f" (call {calls})" if calls > 1 else ""
                self.outputs.append((f"layer {_name!r}{suffix}", output))
                return output

            object.__setattr__(layer, "call", recording)
        return self

    def __exit__(self, *exc):
        for layer, saved in zip(self.layers, self.saved):
            if saved is None:
                object.__delattr__(layer, "call")
            else:
                object.__setattr__(layer, "call", saved)


def _projection_loss(outputs, projections):
    """Sum over sequences of ``<output, projection>``, in float32."""
    total = 0.0
    for output, projection in zip(outputs, projections):
        total = total + keras.ops.sum(keras.ops.cast(output, "float32") * projection)
    return total


def keras_hub_inputs(backbone, example):
    """The inputs of keras-hub `backbone` for one unpadded sequence: token ids,
    an all-ones padding mask, and positions and segment ids where it takes them.

    >>> import keras_hub
    >>> bert = keras_hub.models.BertBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=8)
    >>> sorted(keras_hub_inputs(bert, {"input_ids": [5, 6]}))
    ['padding_mask', 'segment_ids', 'token_ids']
    """
    ids = np.asarray(example["input_ids"], "int32")[None]
    names = backbone.input if isinstance(backbone.input, dict) else {}
    inputs = {"token_ids": ids}
    if "padding_mask" in names:  # RoFormer-V2 has none.
        inputs["padding_mask"] = np.ones_like(ids)
    if "position_ids" in names:  # Gemma 4
        inputs["position_ids"] = np.arange(ids.shape[1], dtype="int32")[None]
    if "segment_ids" in names:
        inputs["segment_ids"] = np.asarray(
            example.get("token_type_ids", np.zeros_like(ids[0])), "int32")[None]
    return inputs


def _as_sequence_output(output):
    if isinstance(output, dict):
        output = output["sequence_output"]
    return output


def _layer_records(records):
    """Records of per-token layer outputs only (``[B, n, H]``)."""
    kept = []
    for name, value in records:
        if isinstance(value, (tuple, list)):
            value = value[0]
        if len(getattr(value, "shape", ())) == 3:
            kept.append((name, value))
    return kept


def _packed_run(backbone, variables, examples, length, projections, layers):
    """``(records, gradients)`` of the probe packed in one row: the real
    tokens of every record, concatenated in pack order."""
    features = pack_examples(examples, length, packs=[list(range(len(examples)))])
    inputs = {n: features[n] for n in backbone.input_features if n in features}
    real = int((features["sequence_ids"][0] > 0).sum())
    weights = np.zeros((1, length, backbone.hidden_dim), "float32")
    weights[0, :real] = np.concatenate(projections)

    def fn():
        records = _run_backbone(backbone, inputs, layers)
        return _projection_loss([records[-1][1]], [weights]), records

    records, gradients = backend_gradients(fn, variables)
    return [(name, value[0, :real]) for name, value in records], gradients


def _run_backbone(backbone, inputs, layers):
    """``[(name or None, [B, L, H])]``: each transformer layer's output, then
    ``sequence_output`` (a keras-hub adapter's own layer loop gives its
    layers unnamed; other backbones' `layers` are recorded)."""
    if _keeps_layers(backbone):
        output, kept = backbone.forward(inputs, training=False, keep_layers=True)
        blocks = backbone.layers() if callable(getattr(backbone, "layers", None)) else []
        names = [f"layer {b.name!r}" for b in blocks] if len(blocks) == len(kept) else []
        # Unnamed where a block repeats (ALBERT): the reference's names win.
        records = [(None if names.count(n) > 1 else n, x)
                   for n, x in zip(names or [None] * len(kept), kept)]
    else:
        with _Recorder(layers) as recorder:
            output = _as_sequence_output(backbone(inputs, training=False))
        records = _layer_records(recorder.outputs)
    return records + [("output 'sequence_output'", output)]


def _keeps_layers(backbone):
    """Whether `backbone.forward(inputs, training, keep_layers=True)` returns
    `(sequence_output, each transformer layer's output)` (the keras-hub
    adapters' one layer loop)."""
    forward = getattr(backbone, "forward", None)
    return callable(forward) and "keep_layers" in inspect.signature(forward).parameters


def _packs_of_one_run(backbone, variables, examples, length, projections,
                      layers):
    """The same for every sequence alone in a pack of one (one row each)."""
    k = len(examples)
    features = pack_examples(examples, length, packs=[[i] for i in range(k)],
                             max_sequences_per_pack=k)
    inputs = {n: features[n] for n in backbone.input_features if n in features}
    weights = np.zeros((k, length, backbone.hidden_dim), "float32")
    for i, projection in enumerate(projections):
        weights[i, :len(projection)] = projection

    def fn():
        records = _run_backbone(backbone, inputs, layers)
        return _projection_loss([records[-1][1]], [weights]), records

    records, gradients = backend_gradients(fn, variables)
    lengths = [len(p) for p in projections]
    return [(name, np.concatenate([value[i, :n] for i, n in enumerate(lengths)]))
            for name, value in records], gradients


def _reference_layers(backbone, reference):
    """The keras-hub layers whose outputs the reference records: its
    `transformer_layers`, else the blocks the adapter runs (RWKV-7's)."""
    layers = getattr(reference, "transformer_layers", None)
    if not layers and callable(getattr(backbone, "layers", None)):
        layers = backbone.layers()
    return layers or ()


def padded_batch_reason(reference):
    """Why keras-hub `reference` must run each probe sequence in a call of
    its own, or None where one right-padded batch gives each sequence as
    alone: it takes a padding mask (which keeps the padding out of every
    real token; rows of a batch never meet) and no class of its own or of
    its layers is in `PADDED_BATCH_DIFFERS`.

    >>> import keras_hub
    >>> llama = keras_hub.models.LlamaBackbone(
    ...     vocabulary_size=30, num_layers=1, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)
    >>> padded_batch_reason(llama) is None
    True
    >>> padded_batch_reason(keras_hub.models.Phi3Backbone(
    ...     vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...     intermediate_dim=16, num_query_heads=2, num_key_value_heads=1,
    ...     max_sequence_length=64, pretraining_sequence_length=4,
    ...     rope_scaling_type="su", rope_scaling_short_factor=[1.0, 1.0],
    ...     rope_scaling_long_factor=[2.0, 2.0]))
    "Phi3SuScaledRotaryEmbedding takes its rotary factor from the row's length"
    """
    if "padding_mask" not in (reference.input if isinstance(reference.input, dict) else {}):
        return f"{type(reference).__name__} takes no padding mask"
    return padded_batch_differs(reference)


def keras_hub_batch(backbone, examples):
    """`keras_hub_inputs` of each of `examples`, one row each, right padded
    with zeros (a zero padding mask) to the longest.

    >>> import keras_hub
    >>> bert = keras_hub.models.BertBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=8)
    >>> keras_hub_batch(bert, [{"input_ids": [5, 6]}, {"input_ids": [7]}])["padding_mask"]
    array([[1, 1],
           [1, 0]], dtype=int32)
    >>> keras_hub_batch(bert, [])
    Traceback (most recent call last):
    tfpack.errors.TfpackError: keras_hub_batch needs at least one example; got none.
    """
    if not examples:
        raise TfpackError("keras_hub_batch needs at least one example; got none.")
    rows = [keras_hub_inputs(backbone, example) for example in examples]
    longest = max(row["token_ids"].shape[1] for row in rows)
    return {name: np.concatenate([
        np.pad(row[name], [(0, 0), (0, longest - row[name].shape[1])])
        for row in rows]) for name in rows[0]}


def _keras_hub_run(variables, backbone, reference, examples, projections):
    """The same for every sequence alone through the keras-hub backbone, with
    the outputs of its layers (`_reference_layers`); `sequence_output` is
    the output of the adapter's `keras_hub_output_layer` where it declares
    one (keras-hub's RWKV-7 returns logits), else the backbone's. All the
    sequences in one right-padded batch (`keras_hub_batch`), or one call
    each where the padding would change them (`padded_batch_reason`)."""
    layers = _reference_layers(backbone, reference)
    final = getattr(backbone, "keras_hub_output_layer", None)
    batches = ([examples] if padded_batch_reason(reference) is None
               else [[example] for example in examples])
    weights = np.concatenate(projections)

    def fn():
        per_batch = []
        for batch in batches:
            with _Recorder(layers) as recorder, _Recorder([final] if final else []) as last:
                output = _as_sequence_output(reference(
                    keras_hub_batch(reference, batch), training=False))
            if final is not None:
                output = last.outputs[-1][1]
            per_batch.append(_layer_records(recorder.outputs)
                             + [("output 'sequence_output'", output)])
        # (a batch's records, row, length) of each sequence, in probe order.
        rows = [(records, row, len(example["input_ids"]))
                for batch, records in zip(batches, per_batch)
                for row, example in enumerate(batch)]
        # Each record: the real tokens of every sequence, concatenated.
        records = [(name, keras.ops.concatenate([r[i][1][row, :n] for r, row, n in rows]))
                   for i, (name, _) in enumerate(per_batch[0])]
        return _projection_loss([records[-1][1]], [weights]), records

    return backend_gradients(fn, variables)


def _keras_hub_alone(variables, backbone, reference, examples, projections):
    """`_keras_hub_run`, or None with a warning where the keras-hub backbone
    cannot run the probe's sequences alone (keras-hub 0.32's sliding windows
    of Qwen-MoE fail on a row of one token): the packs of one are
    then the reference."""
    try:
        return _keras_hub_run(variables, backbone, reference, examples, projections)
    except Exception as error:  # noqa: BLE001  (keras-hub's own failure)
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        warnings.warn(
            f"tfpack's exactness check compares {type(reference).__name__}'s adapter "
            "with packs of one instead of the keras-hub backbone, which failed on "
            f"the probe's sequences alone: {type(error).__name__}: {first}", stacklevel=4)
        return None


@validate_params({
    "model": Anything("a tfpack task or backbone; `unchecked_reason` says why not"),
    "length": [None, Integer(1)],
    "lengths": InstanceOf(tuple, list, description="a tuple of sequence lengths"),
    "tolerance": [None, Real(0)]})
def check_packing_exact(model, *, length=None, lengths=PROBE_LENGTHS,
                        tolerance=None):
    """Refuses a packed model that does not compute each sequence as alone.

    See the module docstring for what is compared. Cheap: one forward and
    backward pass of one probe pack and of its sequences (a second or two
    for the small models of tfpack's tests, on a CPU).

    Example (a backbone whose output leaks across the row is refused):

    >>> import keras
    >>> from tfpack.models import BertEncoder
    >>> class Leaky(BertEncoder):
    ...     def call(self, inputs, training=None):
    ...         out = super().call(inputs, training)["sequence_output"]
    ...         return {"sequence_output": keras.ops.cumsum(out, axis=1)}
    >>> leaky = Leaky(vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...               num_heads=2, intermediate_dim=16)
    >>> check_packing_exact(leaky)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tfpack.testing.exactness_result.PackingNotExactError: A packed model must ... Received: output 'sequence_output' (probe sequence ...

    Args:
        model: a tfpack task (its backbone is checked; a preference model's
            policy's), or a backbone (`tfpack.models.backbone`).
        length: the probe pack's length `L` (`Trainer.fit` passes the
            training packs' `L`, so that `"auto"` attention picks what
            training runs); default ``sum(lengths) + 3``.
        lengths: the probe's sequence lengths, cut to the backbone's
            `max_sequences_per_pack`, `segment_length` and position table.
        tolerance: relative tolerance; default `TOLERANCES` of the compute
            dtype.

    Returns:
        `ExactnessResult`.

    Raises:
        PackingNotExactError: one line naming the first layer (or output, or
            weight gradient) that differs, by how much, and the tolerance.
    """
    start = time.perf_counter()
    if not lengths or any(isinstance(n, bool) or not isinstance(n, (int, np.integer))
                          or n < 1 for n in lengths):
        raise TfpackError("`lengths` must be a tuple of positive integers. "
                          f"Received: lengths={lengths!r}")
    reason = unchecked_reason(model)
    if reason is not None:
        raise TfpackError("The exactness check needs a model with a packed backbone "
                          "(the backbone protocol, tfpack.models.backbone). "
                          f"Received: {reason}")
    backbone = packed_backbone(model)
    if reads_pairs(backbone):  # An encoder-decoder: a pair probe.
        return check_pairs_exact(backbone, tolerance=tolerance)
    examples, length = _probe(backbone, length, lengths)
    lengths = tuple(len(e["input_ids"]) for e in examples)
    dtype = keras.backend.standardize_dtype(backbone.compute_dtype)
    rtol = TOLERANCES.get(dtype, TOLERANCES["float32"]) if tolerance is None \
        else float(tolerance)
    rng = np.random.default_rng(SEED + 1)
    projections = [rng.normal(size=(n, backbone.hidden_dim)).astype("float32")
                   for n in lengths]
    if not backbone.built:  # Built outside the recorded calls.
        features = pack_examples(examples, length)
        backbone({n: features[n] for n in backbone.input_features
                  if n in features}, training=False)
    # Taken once: a layer the packed model builds on its first call (a
    # user's swapped layer) is not the reference's, and must not shift the
    # list (its gradient then shows on the reference's layer).
    variables = list(backbone.trainable_variables)
    reference = keras_hub_reference(backbone)
    with warnings.catch_warnings():
        # Keras warns on the softmax over the one-token sequence's one key.
        warnings.filterwarnings("ignore", "You are using a softmax over axis")
        alone, kind, layers = None, "packs of one", ()
        # Where keras-hub is known to compute something else (the adapter
        # says why), the adapter's own packs of one are the reference.
        if reference is not None and not getattr(backbone, "keras_hub_known_wrong", None):
            layers = _reference_layers(backbone, reference)
            alone = _keras_hub_alone(variables, backbone, reference, examples,
                                     projections)
            kind = "keras-hub backbone"
        if alone is None:
            layers = getattr(backbone, "transformer_layers", None)
            # Rows just long enough: the reference needs no padding of L.
            alone = _packs_of_one_run(backbone, variables, examples,
                                      min(length, sum(lengths) + 3), projections,
                                      layers)
            kind = "packs of one"
        packed = _packed_run(backbone, variables, examples, length,
                             projections, layers)
    implementation = _implementation(backbone, length)
    context = (f"{dtype}, {implementation} attention, "
               f"{keras.backend.backend()}, L={length}, reference: {kind}")
    differences = {}
    compare_outputs(packed[0], alone[0], lengths, rtol, context, differences)
    compare_gradients(variables, packed[1], alone[1],
                       rtol, context, differences)
    return ExactnessResult(lengths, length, kind, dtype, implementation, rtol,
                           differences, time.perf_counter() - start)
