"""The run-time exactness check of an encoder-decoder: one probe pair pack.

`check_packing_exact` hands a backbone that reads a pair pack (the encoder
and decoder rows of `tfpack.tasks.seq2seq`, the keras-hub T5, BART and
T5Gemma adapters) to `check_pairs_exact`: three probe pairs (encoder and
decoder lengths `PAIR_PROBE_LENGTHS`, a one-token source and a one-token
target among them, fixed seed) packed in one pair of rows go through the
packed backbone, and each pair alone through the keras-hub backbone (one
right-padded row a pair, all in one batch: its padding masks keep the
padding out), under the model's precision and backend.
It compares ``encoder_sequence_output``, ``decoder_sequence_output`` and the
gradient, for every trainable weight, of a fixed random projection of both
summed over the pairs; a difference beyond `TOLERANCES` refuses the model
in one line (`PackingNotExactError`), as for one stream of tokens.

Example:

>>> import keras_hub
>>> from tfpack.models import from_keras_hub
>>> t5 = keras_hub.models.T5Backbone(vocabulary_size=30, num_layers=1,
...                                  num_heads=2, hidden_dim=8,
...                                  intermediate_dim=16, dropout=0.0)
>>> result = check_pairs_exact(from_keras_hub(t5, check_exact=False))
>>> result.lengths, result.reference
(((5, 2), (1, 3), (3, 1)), 'keras-hub backbone')
"""

import time

import keras
import numpy as np

from tfpack.errors import TfpackError
from tfpack.tasks.seq2seq import DECODER_FEATURES
from tfpack.tasks.seq2seq import ENCODER_FEATURES
from tfpack.testing import _comparison as comparison
from tfpack.testing.exactness_result import ExactnessResult

__all__ = ["PAIR_PROBE_LENGTHS", "check_pairs_exact", "reads_pairs"]

# (encoder, decoder) lengths: a one-token source and a one-token target.
PAIR_PROBE_LENGTHS = ((5, 2), (1, 3), (3, 1))
_OUTPUTS = ("encoder_sequence_output", "decoder_sequence_output")
_PADDING = 2  # Padding after the probe in both rows.
_GRADIENT_FLOOR = 1e-2  # Of the largest gradient (see `check_pairs_exact`).


def reads_pairs(backbone):
    """Whether `backbone` reads a pair pack (both rows' features).

    >>> reads_pairs(object())
    False
    """
    features = set(getattr(backbone, "input_features", ()))
    return set(ENCODER_FEATURES + DECODER_FEATURES) <= features


def _pair_pack(pairs):
    """The probe pairs in one pair of rows, with `_PADDING` after each."""
    pack = {}
    for side, features in ((0, ENCODER_FEATURES), (1, DECODER_FEATURES)):
        lengths = [len(pair[side]) for pair in pairs]
        width = sum(lengths) + _PADDING
        ids = np.zeros((1, width), "int32")
        ids[0, :sum(lengths)] = np.concatenate([pair[side] for pair in pairs])
        sequence_ids = np.zeros((1, width), "int32")
        sequence_ids[0, :sum(lengths)] = np.repeat(np.arange(1, len(pairs) + 1), lengths)
        positions = np.zeros((1, width), "int32")
        positions[0, :sum(lengths)] = np.concatenate([np.arange(n) for n in lengths])
        pack.update(zip(features, (ids, sequence_ids, positions)))
    return pack


def _projection(shape, stream):
    """A fixed random `[n, width]` projection of one stream's outputs."""
    rng = np.random.default_rng(comparison.SEED + 1 + stream)
    return rng.normal(size=shape).astype("float32")


def _loss(outputs):
    """``<output, projection>`` of both streams (`outputs`: `[n, width]` each)."""
    return sum(keras.ops.sum(keras.ops.cast(o, "float32")
                             * _projection(tuple(o.shape), i))
               for i, o in enumerate(outputs))


def _packed(backbone, variables, pairs):
    pack = _pair_pack(pairs)
    real = [sum(len(pair[side]) for pair in pairs) for side in (0, 1)]

    def fn():
        out = backbone(pack, training=False)
        outputs = [out[name][0, :n] for name, n in zip(_OUTPUTS, real)]
        return _loss(outputs), list(zip(_OUTPUTS, outputs))

    return comparison.backend_gradients(fn, variables)


def _padded_pairs(pairs):
    """The keras-hub inputs of `pairs`, one a row, each side right padded to
    its longest with zeros (a zero padding mask: from the lengths, whatever
    the token ids)."""
    batch = {}
    for side, name in enumerate(("encoder", "decoder")):
        ids = np.zeros((len(pairs), max(len(pair[side]) for pair in pairs)), "int32")
        mask = np.zeros_like(ids)
        for row, pair in enumerate(pairs):
            ids[row, :len(pair[side])] = pair[side]
            mask[row, :len(pair[side])] = 1
        batch[f"{name}_token_ids"] = ids
        batch[f"{name}_padding_mask"] = mask
    return batch


def _padded_batch_reason(reference):
    """Why keras-hub `reference` runs each probe pair in a call of its own, or
    None where one right-padded batch gives each pair as alone (both sides
    take a padding mask; no class of `PADDED_BATCH_DIFFERS`, as
    `exactness.padded_batch_reason`).

    >>> _padded_batch_reason(object())
    'object takes no padding masks'
    """
    inputs = getattr(reference, "input", None)
    if not isinstance(inputs, dict) or not {
            "encoder_padding_mask", "decoder_padding_mask"} <= set(inputs):
        return f"{type(reference).__name__} takes no padding masks"
    return comparison.padded_batch_differs(reference)


def _alone(variables, reference, pairs):
    """Each pair alone through keras-hub `reference`: all in one right-padded
    batch (rows never meet; the padding masks keep the padding out), or one
    call each where `_padded_batch_reason` says why not."""
    batches = ([pairs] if _padded_batch_reason(reference) is None
               else [[pair] for pair in pairs])

    def fn():
        per_pair = []
        for batch in batches:
            out = reference(_padded_pairs(batch), training=False)
            per_pair += [[out[name][row, :len(pair[side])]
                          for side, name in enumerate(_OUTPUTS)]
                         for row, pair in enumerate(batch)]
        outputs = [keras.ops.concatenate([p[i] for p in per_pair]) for i in range(2)]
        return _loss(outputs), list(zip(_OUTPUTS, outputs))

    return comparison.backend_gradients(fn, variables)


def check_pairs_exact(backbone, *, tolerance=None):
    """`check_packing_exact` for a `from_keras_hub` encoder-decoder adapter
    (see the module docstring); returns an `ExactnessResult` whose `lengths`
    are the probe's `(encoder, decoder)` lengths."""
    start = time.perf_counter()
    reference = comparison.keras_hub_reference(backbone)
    if reference is None:
        raise TfpackError("The exactness check probes an encoder-decoder against its "
                          "keras-hub backbone. Received: a "
                          f"{type(backbone).__name__} without one")
    k = getattr(backbone, "max_sequences_per_pack", None) or len(PAIR_PROBE_LENGTHS)
    lengths = PAIR_PROBE_LENGTHS[:k]
    limit = getattr(reference, "max_sequence_length", None)  # BART's positions
    while limit and len(lengths) > 1 and any(
            sum(pair[side] for pair in lengths) + _PADDING > limit for side in (0, 1)):
        lengths = lengths[:-1]
    vocabulary = int(backbone.vocabulary_size)
    excluded = {getattr(reference, "pad_token_id", None), 0}
    tokens = np.array([t for t in range(1, vocabulary) if t not in excluded])
    rng = np.random.default_rng(comparison.SEED)
    pairs = [tuple(rng.choice(tokens, n).astype("int32") for n in pair) for pair in lengths]
    dtype = keras.backend.standardize_dtype(backbone.compute_dtype)
    rtol = comparison.TOLERANCES.get(dtype, comparison.TOLERANCES["float32"]) \
        if tolerance is None else float(tolerance)
    if not backbone.built:
        backbone(_pair_pack(pairs), training=False)
    variables = list(backbone.trainable_variables)
    alone = _alone(variables, reference, pairs)
    packed = _packed(backbone, variables, pairs)
    width = sum(n for pair in lengths for n in pair) + 2 * _PADDING
    rows = [sum(pair[side] for pair in lengths) + _PADDING for side in (0, 1)]
    chosen = backbone.implementations(*rows) if hasattr(backbone, "implementations") else {}
    implementation = "/".join(sorted(set(chosen.values()))) or "dense"
    context = (f"{dtype}, {implementation} attention, {keras.backend.backend()}, "
               f"Le+Ld={width}, reference: keras-hub backbone")
    differences = {}
    for stream in (0, 1):
        comparison.compare_outputs(
            [(f"output {_OUTPUTS[stream]!r}", packed[0][stream][1])],
            [(f"output {_OUTPUTS[stream]!r}", alone[0][stream][1])],
            [pair[stream] for pair in lengths], rtol, context, differences)
    # T5 does not scale its scores: its cross-attention query gradient is a
    # difference of near-equal softmax terms, and float32 leaves it 1.4e-4 of
    # its own scale apart between packed and alone (seen at 1e-2 of the
    # largest gradient); the floor is 1e-2 of the largest gradient here.
    comparison.compare_gradients(variables, packed[1], alone[1], rtol, context,
                                 differences, floor=_GRADIENT_FLOOR)
    return ExactnessResult(lengths, width, "keras-hub backbone", dtype, implementation, rtol,
                           differences, time.perf_counter() - start)
