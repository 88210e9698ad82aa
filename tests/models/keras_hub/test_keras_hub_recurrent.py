"""Qwen3.5, Qwen3.5-MoE and RWKV-7 packed: each sequence as keras-hub computes it alone.

Rows of 130 tokens hold sequences that straddle keras-hub's chunk of 64
(70 and 64 tokens), a one-token sequence and sequences shorter than the
convolution's kernel of 4 (1, 2, 3 tokens). For every family: each
sequence's outputs are the keras-hub backbone's on that sequence alone, and
the gradient of a loss summed over the packs' sequences is the sum of the
per-sequence gradients (TensorFlow here, JAX in a subprocess); the causal
LM trains a step and `tfpack.predict` scores.
"""

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from jax_env import run_jax_check
from recurrent_helpers import FAMILIES, VOCAB, alone, examples
from recurrent_helpers import implementations, make, packed_examples
from recurrent_helpers import packed_output, returns_logits, spans
from tfpack import models, predict
from tfpack.errors import TfpackError
from tfpack.testing import assert_no_cross_contamination, next_token_labels
from tfpack.testing import pack_examples


def _numpy(gradients):
    return [None if g is None else np.asarray(tf.convert_to_tensor(g))
            for g in gradients]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_equals_each_sequence_alone_with_gradients(family):
    backbone = make(family)
    data, packed = examples(), packed_examples()
    variables = backbone.trainable_variables
    rng = np.random.default_rng(1)
    with tf.GradientTape() as tape:
        references = [alone(backbone, e["input_ids"]) for e in data]
        weights = [rng.normal(size=r.shape).astype("float32")
                   for r in references]
        loss = sum(tf.reduce_sum(r * w) for r, w in zip(references, weights))
    expected_grads = _numpy(tape.gradient(loss, variables))
    for options in implementations(family):
        adapter = models.from_keras_hub(backbone, **options)
        with tf.GradientTape() as tape:
            output = packed_output(adapter, packed)
            outputs = [tf.gather(output[row], tokens)
                       for row, tokens in spans(packed)]
            loss = sum(tf.reduce_sum(o * w) for o, w in zip(outputs, weights))
        grads = _numpy(tape.gradient(loss, variables))
        for got, reference in zip(outputs, references):
            reference = np.asarray(reference)
            np.testing.assert_allclose(
                got, reference, rtol=0, err_msg=str(options),
                atol=1e-4 * max(1.0, np.abs(reference).max()))
        for variable, got, reference in zip(variables, grads, expected_grads):
            assert (got is None) == (reference is None), variable.path
            if got is None:  # Off the output's path (the output head).
                continue
            np.testing.assert_allclose(
                got, reference, rtol=0,
                atol=1e-4 * max(1.0, np.abs(reference).max()),
                err_msg=f"{options} {variable.path}")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_cross_contamination(family):
    backbone = make(family)
    for options in implementations(family):
        adapter = models.from_keras_hub(backbone, **options)
        result = assert_no_cross_contamination(adapter, packed_examples())
        assert result.max_output_difference["sequence_output"] == 0.0


@pytest.mark.slow  # XLA compiles the training step (RWKV-7's loop).
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_causal_lm_trains_a_step_and_predict_scores(family):
    # Short rows (the long ones are above): XLA compiles RWKV-7's loop
    # over the row.
    backbone = make(family)
    model = models.CausalLM(models.from_keras_hub(backbone))
    rng = np.random.default_rng(3)
    data = [{"input_ids": rng.integers(1, VOCAB, n)} for n in (5, 1, 2, 4, 3)]
    scored = predict(model, [e["input_ids"] for e in data], max_length=8,
                     max_sequences_per_pack=3, batch_size=2,
                     jit_compile=False)
    for e, got in zip(data, scored):
        got = got["logits"] if isinstance(got, dict) else got
        reference = alone(backbone, e["input_ids"])
        if not returns_logits(backbone):
            reference = backbone.token_embedding(reference, reverse=True)
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-4)
    for e in data:
        e["labels"] = next_token_labels(e["input_ids"])
    packed = pack_examples(data, 8, packs=[[0, 1, 2], [3, 4]])
    before = [np.array(v) for v in backbone.trainable_variables]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=True)
    history = model.fit(tf.data.Dataset.from_tensor_slices(packed).batch(2),
                        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    moved = [np.abs(np.asarray(v) - b).max() > 0
             for v, b in zip(backbone.trainable_variables, before)]
    assert sum(moved) >= len(moved) - 2


@pytest.mark.parametrize("family", ["qwen3_5", "rwkv7"])
def test_keras_file_round_trip(family, tmp_path):
    adapter = models.from_keras_hub(make(family))
    packed = pack_examples(examples()[1:4], 64)
    path = str(tmp_path / f"{family}.keras")
    adapter.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(adapter)
    np.testing.assert_array_equal(loaded(packed)["sequence_output"],
                                  adapter(packed)["sequence_output"])


def test_a_qwen3_5_with_a_vision_encoder_is_refused():
    backbone = make("qwen3_5")
    backbone.vision_encoder = object()  # Stands in for a vision encoder.
    with pytest.raises(TfpackError, match="Only text Qwen3.5.*vision"):
        models.from_keras_hub(backbone)


_JAX_CHECK = """
import jax, numpy as np, keras
assert keras.backend.backend() == "jax"
from tfpack.models import from_keras_hub
from recurrent_helpers import FAMILIES, make, examples, packed_examples
from recurrent_helpers import spans, returns_logits
# Packed outputs against keras-hub's backbone on each sequence alone (jit);
# the gradient of the packed loss against the sum of the adapter's gradients
# on each sequence alone (keras-hub's gated delta rule compiles for minutes
# under jax.grad; the TensorFlow test compares gradients with keras-hub's).
for family in sorted(FAMILIES):
    backbone = make(family)
    adapter = from_keras_hub(backbone, attention_implementation="dense")
    trainable = [v.value for v in backbone.trainable_variables]
    fixed = [v.value for v in backbone.non_trainable_variables]
    packed = packed_examples()
    where = spans(packed)

    def forward(weights, features):
        out, _ = adapter.stateless_call(weights, fixed, features)
        return out["sequence_output"]

    def packed_loss(weights):
        out = forward(weights, packed)
        return sum(jax.numpy.sin(out[row, tokens]).sum()
                   for row, tokens in where)

    def alone_loss(weights):
        total = 0.0
        for e in examples():
            n = len(e["input_ids"])
            one = {"input_ids": e["input_ids"][None].astype("int32"),
                   "sequence_ids": np.ones((1, n), "int32"),
                   "position_ids": np.arange(n, dtype="int32")[None]}
            total = total + jax.numpy.sin(forward(weights, one)).sum()
        return total

    out = np.asarray(jax.jit(forward)(trainable, packed))
    if returns_logits(backbone):
        out = np.asarray(adapter.logits(out))
    hub = jax.jit(lambda w, ids: backbone.stateless_call(
        w, fixed, {"token_ids": ids, "padding_mask": jax.numpy.ones_like(ids)}
    )[0])
    # keras-hub compiles once per length: the sequences straddling a chunk
    # (70), of one token and shorter than the kernel (3).
    for i in (0, 1, 5):
        e, (row, tokens) = examples()[i], where[i]
        ids = e["input_ids"][None].astype("int32")
        reference = np.asarray(hub(trainable, ids))[0]
        np.testing.assert_allclose(out[row, tokens], reference, rtol=0,
                                   atol=1e-4 * max(1, np.abs(reference).max()),
                                   err_msg=family)
    grads = jax.jit(jax.grad(packed_loss))(trainable)
    expected = jax.jit(jax.grad(alone_loss))(trainable)
    for g, e in zip(grads, expected):
        e = np.asarray(e)
        np.testing.assert_allclose(np.asarray(g), e, rtol=0,
                                   atol=1e-4 * max(1, np.abs(e).max()),
                                   err_msg=family)
print("ok")
"""


@pytest.mark.slow
def test_packed_equals_each_sequence_alone_on_jax_under_jit():
    pytest.importorskip("jax")
    here = pathlib.Path(__file__).parent
    run_jax_check(_JAX_CHECK, [here, here.parents[1], here.parents[2]],
                  timeout=900)
