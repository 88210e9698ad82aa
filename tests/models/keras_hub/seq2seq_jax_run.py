"""Run under KERAS_BACKEND=jax by test_keras_hub_seq2seq.py: for each
encoder-decoder family named on the command line, two pairs packed in one
pair pack give each pair's encoder and decoder outputs equal to the keras-hub
backbone on that pair alone, and the gradients of a loss summed over the
pairs equal the sum of the per-pair gradients, under jax.jit, float32.
A name followed by ":segmented" runs the family with segmented attention
(every kind, `K=2`): the two pairs rank differently on the two sides.

The loss is a fixed random linear function of each pair's outputs, so the
gradients reach every variable that the outputs depend on."""

import sys

import jax
import keras
import numpy as np

from seq2seq_helpers import FAMILIES, LD, LE, pair_positions, tolerance
from seq2seq_helpers import PAIRS as ALL_PAIRS
from keras_hub_helpers import built_with, right_padded
from tfpack.builders import pack_pairs
from tfpack.models import from_keras_hub

assert keras.backend.backend() == "jax"

PAIRS = ALL_PAIRS[:2]  # One pack of two pairs (7 encoder, 7 decoder tokens).
NAMES = ("encoder_sequence_output", "decoder_sequence_output")

# The families whose layers are all alike run here with one layer a side
# (the same code compiles and is compared, at about half the compilation of
# two; their two-layer backbones: the TensorFlow tests). T5 keeps its two (the
# relative-position bias lives in layer 0 only), T5Gemma and T5Gemma 2 theirs
# (a windowed and a full layer a side).
ONE_LAYER = {"bart": dict(num_layers=1),
             "edrec": dict(num_layers_enc=1, num_layers_dec=1)}


def _backbone(name):
    """The family's tiny backbone; one layer a side in `ONE_LAYER`."""
    keras.utils.set_random_seed(0)
    return built_with(FAMILIES[name], **ONE_LAYER.get(name, {}))


def _run(model, fixed, features, weights):
    """`jit(value_and_grad)` of `sum(outputs * weights)` over both outputs."""
    def loss(trainable):
        out, _ = model.stateless_call(trainable, fixed, features)
        return sum((out[n] * weights[n]).sum() for n in NAMES), out
    return jax.jit(jax.value_and_grad(loss, has_aux=True))


# EdRec (no final norm: outputs up to 16.6) padded is 4.0e-4 off its unpadded
# self on an output of 2.9 (float32 rounding; over this run's bound).
UNPADDED = ("edrec",)


def _padded_batch(group, pair_weights):
    """The pairs `group` (indices into `PAIRS`), one a row, right padded: the
    backbone's features and the loss weights (zero on padding)."""
    features = {}
    for k, side in enumerate(("encoder", "decoder")):
        ids, mask = right_padded([PAIRS[i][k] for i in group])
        features[f"{side}_token_ids"], features[f"{side}_padding_mask"] = ids, mask
    weights = {n: np.zeros(features[f"{n.split('_')[0]}_token_ids"].shape + (8,),
                           "float32") for n in NAMES}
    for row, i in enumerate(group):
        for n, w in pair_weights[i].items():
            weights[n][row, :len(w)] = w
    return features, weights


# Per family: its trainable weights and loss weights, and the backbone's
# outputs and gradient sums on each pair alone (the same for every attention
# implementation of the family: computed once, the pairs in one batch).
_ALONE = {}


def _alone(name, backbone, trainable, pair_weights):
    """`backbone`'s outputs on each pair alone (per pair, per output) and the
    sum over the pairs of its gradients; a second run of the family `name`
    reuses them after checking that it built the same weights and loss
    weights."""
    if name in _ALONE:
        weights, losses, result = _ALONE[name]
        for a, b in zip(trainable, weights, strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
        for i, per_output in pair_weights.items():
            for n, w in per_output.items():
                np.testing.assert_array_equal(w, losses[i][n])
        return result
    # Every pair alone in its own row, right padded, all in one batch (one
    # compilation; the padding masks keep padding from the pairs' tokens and
    # the rows never meet, so the summed loss's gradient is the sum of the
    # pairs' own); `UNPADDED` families each pair in a batch of its own.
    groups = ([[i] for i in range(len(PAIRS))] if name in UNPADDED
              else [list(range(len(PAIRS)))])
    references, alone_grads = {}, [np.zeros(np.shape(v), "float32") for v in trainable]
    for group in groups:
        features, weights = _padded_batch(group, pair_weights)
        (_, ref), grads = _run(backbone, [], features, weights)(trainable)
        alone_grads = [a + np.asarray(g) for a, g in zip(alone_grads, grads)]
        for row, i in enumerate(group):
            references[i] = {n: np.asarray(ref[n][row, :len(pair_weights[i][n])])
                             for n in NAMES}
    _ALONE[name] = ([np.asarray(v) for v in trainable], pair_weights,
                    (references, alone_grads))
    return references, alone_grads


def check(argument):
    name, _, implementation = argument.partition(":")
    backbone = _backbone(name)
    options = {} if not implementation else dict(
        attention_implementation=implementation, max_sequences_per_pack=len(PAIRS))
    # Compared with keras-hub on each pair below: the run-time pair probe would
    # compile each family again on JAX.
    adapter = from_keras_hub(backbone, check_exact=False, **options)
    packs = pack_pairs(PAIRS, max_encoder_length=LE, max_decoder_length=LD)
    assert len(packs["example_ids"]) == 1 and packs["sequence_mask"].sum() == len(PAIRS)
    where = pair_positions(packs)
    rng = np.random.default_rng(1)
    # Per pair, the loss weights of its own outputs; scattered into the pack.
    pair_weights = {i: {n: rng.normal(size=(len(index), 8)).astype("float32")
                        for n, index in zip(NAMES, (enc, dec))}
                    for i, (_, enc, dec) in where.items()}
    packed_weights = {"encoder_sequence_output": np.zeros((1, LE, 8), "float32"),
                      "decoder_sequence_output": np.zeros((1, LD, 8), "float32")}
    for i, (row, enc, dec) in where.items():
        for n, index in zip(NAMES, (enc, dec)):
            packed_weights[n][row, index] = pair_weights[i][n]
    variables = backbone.trainable_variables
    assert {id(v) for v in adapter.trainable_variables} == {id(v) for v in variables}
    # The adapter's variables in the backbone's order.
    order = {id(v): k for k, v in enumerate(variables)}
    permutation = [order[id(v)] for v in adapter.trainable_variables]
    trainable = [v.value for v in variables]
    fixed = [v.value for v in backbone.non_trainable_variables]
    assert not fixed
    features = {k: packs[k] for k in adapter.input_features}
    (_, out), packed_grads = _run(adapter, [], features, packed_weights)(
        [trainable[k] for k in permutation])
    packed_grads = dict(zip(permutation, packed_grads))
    references, alone_grads = _alone(name, backbone, trainable, pair_weights)
    scale = 0.0
    for i in range(len(PAIRS)):
        row, enc, dec = where[i]
        for n, index in zip(NAMES, (enc, dec)):
            want = references[i][n]
            scale = max(scale, float(np.abs(want).max()))
            np.testing.assert_allclose(np.asarray(out[n][row])[index], want,
                                       atol=tolerance(want), rtol=0,
                                       err_msg=f"{argument} pair {i} {n}")
    compared = 0
    for k, want in enumerate(alone_grads):
        compared += bool(np.any(want))
        np.testing.assert_allclose(np.asarray(packed_grads[k]), want,
                                   atol=1e-4 * max(1.0, float(np.abs(want).max())),
                                   rtol=0, err_msg=f"{argument} {variables[k].path}")
    assert compared >= 10, (argument, compared)
    assert scale > 0


for family in sys.argv[1:]:
    check(family)
print("ok")
