"""Encoder-decoders packed in pairs (issue 35): each pair's encoder and decoder
outputs, and the gradients of a loss summed over the pairs, equal the
keras-hub backbone's on that pair alone."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.builders import pack_pairs
from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub

from seq2seq_helpers import FAMILIES, JAX_RUNS, LD, LE, PAIRS
from seq2seq_helpers import pair_positions, tolerance
from keras_hub_helpers import right_padded


def _alone(backbone, pairs):
    """The backbone on `pairs`, each pair its own row, right padded on both
    sides with zero padding masks: keras-hub's masks keep padding from the
    pair's tokens (the decoder is causal, padding follows its tokens) and the
    rows of a batch never meet, so row i is pair i alone; one eager call
    instead of one a pair."""
    features = {}
    for k, side in enumerate(("encoder", "decoder")):
        ids, mask = right_padded([pair[k] for pair in pairs])
        features[f"{side}_token_ids"], features[f"{side}_padding_mask"] = ids, mask
    return backbone(features)


def _weights(seed, length, width):
    return tf.constant(np.random.default_rng(seed).normal(size=(length, width)), tf.float32)


def _loss(outputs, row, tokens, pair):
    """A fixed random linear function of one pair's outputs (`tokens`: per
    output, the pair's token indices in `row`)."""
    total = 0.0
    for seed, (name, index) in enumerate(sorted(tokens.items())):
        values = outputs[name][row]
        values = values[index] if isinstance(index, slice) else tf.gather(values, index)
        total += tf.reduce_sum(values * _weights(100 * seed + pair, *values.shape))
    return total


# Per backbone (and pairs): its weights when computed, each pair's outputs
# alone and the sum of the pairs' gradients (test_keras_hub_seq2seq_segmented.py
# checks three adapters of one T5 and two of one T5Gemma 2 against them).
_REFERENCES = {}


def _alone_references(backbone, pairs):
    """Each pair's outputs of `backbone` on that pair alone (numpy, per
    output) and the sum over the pairs of the gradients of `_loss`; computed
    once a backbone and pairs while its weights stay as they were."""
    variables = backbone.trainable_variables
    key = (id(backbone), repr(pairs))
    if key in _REFERENCES:
        owner, weights, result = _REFERENCES[key]
        if owner is backbone and all(np.array_equal(np.asarray(v), w)
                                     for v, w in zip(variables, weights)):
            return result
    # All pairs in one batch (`_alone`), a row each: the summed loss's
    # gradient is the sum of the pairs' own. (On TensorFlow even EdRec's
    # padded rows match its pairs alone to 1.5% of this file's bounds;
    # seq2seq_jax_run.py keeps it unpadded on JAX.)
    with tf.GradientTape() as tape:
        ref = _alone(backbone, pairs)
        loss = sum(_loss(ref, i, {
            "encoder_sequence_output": slice(len(encoder_ids)),
            "decoder_sequence_output": slice(len(decoder_ids))}, i)
            for i, (encoder_ids, decoder_ids) in enumerate(pairs))
    alone_grads = [np.zeros(v.shape, "float32") if g is None
                   else np.asarray(tf.convert_to_tensor(g))
                   for v, g in zip(variables, tape.gradient(loss, variables))]
    references = [{name: np.asarray(ref[name][i, :len(pair[k])])
                   for k, name in enumerate(("encoder_sequence_output",
                                             "decoder_sequence_output"))}
                  for i, pair in enumerate(pairs)]
    _REFERENCES[key] = (backbone, [np.asarray(v) for v in variables],
                        (references, alone_grads))
    return references, alone_grads


def check_pairs_alone(backbone, adapter, pairs=PAIRS, le=LE, ld=LD):
    """Outputs and gradients of the packed adapter == the backbone per pair."""
    packs = pack_pairs(pairs, max_encoder_length=le, max_decoder_length=ld)
    assert packs["sequence_mask"].sum() == len(pairs) and len(packs["example_ids"]) < len(pairs)
    where = pair_positions(packs)
    inputs = {k: tf.constant(v) for k, v in packs.items() if k in adapter.input_features}
    variables = backbone.trainable_variables
    with tf.GradientTape() as tape:
        out = adapter(inputs)
        packed_loss = sum(
            _loss(out, row, {"encoder_sequence_output": enc, "decoder_sequence_output": dec}, i)
            for i, (row, enc, dec) in where.items())
    packed_grads = tape.gradient(packed_loss, variables)
    references, alone_grads = _alone_references(backbone, pairs)
    scale = 0.0
    for i, ref in enumerate(references):
        row, enc, dec = where[i]
        for name, index in (("encoder_sequence_output", enc), ("decoder_sequence_output", dec)):
            got = np.asarray(out[name][row])[index]
            want = ref[name]
            scale = max(scale, np.abs(want).max())
            np.testing.assert_allclose(got, want, atol=tolerance(want), rtol=0, err_msg=name)
    compared = 0
    for variable, got, want in zip(variables, packed_grads, alone_grads):
        got = np.zeros(variable.shape) if got is None else np.asarray(tf.convert_to_tensor(got))
        want = np.asarray(want)
        compared += bool(np.any(want))
        np.testing.assert_allclose(got, want, atol=tolerance(want) * 10, rtol=0,
                                   err_msg=variable.path)
    assert compared >= 10
    return scale


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    keras.utils.set_random_seed(0)
    backbone = FAMILIES[request.param]()
    return backbone, from_keras_hub(backbone)


def test_packed_pairs_equal_each_pair_alone(family):
    backbone, adapter = family
    assert check_pairs_alone(backbone, adapter) > 0


def test_the_adapter_shares_the_backbone_variables(family):
    backbone, adapter = family
    assert {id(v) for v in adapter.weights} == {id(v) for v in backbone.weights}


def test_missing_pair_features_are_named(family):
    _, adapter = family
    with pytest.raises(TfpackError, match=r"missing \['decoder_position_ids'\]"):
        adapter({n: np.ones((1, 3), "int32") for n in adapter.input_features
                 if n != "decoder_position_ids"})


def test_t5gemma2_with_a_vision_encoder_is_refused_by_name():
    backbone = FAMILIES["t5gemma2"]()
    backbone.vision_encoder = object()  # Stands in for a Gemma3VisionEncoder.
    with pytest.raises(TfpackError, match=r"pair pack carries no images.*"
                                          r"Received: backbone.vision_encoder of type object"):
        from_keras_hub(backbone)


def test_edrec_has_no_tied_head_to_score_with():
    from tfpack.models import Seq2SeqLM

    model = Seq2SeqLM(from_keras_hub(FAMILIES["edrec"]()))
    packs = pack_pairs(PAIRS[:2], max_encoder_length=LE, max_decoder_length=LD)
    with pytest.raises(TfpackError, match=r"EdRec's LM head is a Dense layer of keras-hub's "
                                          r"EdRecSeq2SeqLM.*Received: backbone of type"):
        model({k: packs[k] for k in model.input_features})


@pytest.mark.slow
def test_packed_pairs_equal_each_pair_alone_on_jax():
    """Outputs and gradients of every family on Keras's JAX backend, under
    jit (`seq2seq_jax_run.py`, one subprocess for all `JAX_RUNS`: 77 s of
    CPU, 95 s with a compilation for each reference pair)."""
    import os
    import pathlib
    import subprocess
    import sys

    from jax_env import jax_env

    here = pathlib.Path(__file__).parent
    path = os.pathsep.join([str(here), str(here.parents[1]), str(here.parents[2])] + [
        p for p in (os.environ.get("PYTHONPATH"),) if p])
    done = subprocess.run(
        [sys.executable, str(here / "seq2seq_jax_run.py"), *JAX_RUNS],
        env=jax_env(PYTHONPATH=path), capture_output=True, text=True,
        timeout=600,
        cwd=here.parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout
