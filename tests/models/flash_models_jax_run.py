"""Run under KERAS_BACKEND=jax by test_flash_models.py: tfpack's encoder and
decoder with `attention_implementation="flash"` (Pallas interpret mode on the
CPU) equal the same weights under dense attention, outputs and gradients."""

import functools

import jax
import keras
import numpy as np
from jax_env import count_flash_calls

from tfpack import models

assert keras.backend.backend() == "jax"

# "flash" must run the kernel, not a path giving the same numbers.
CALLS = count_flash_calls()
LENGTH = 32
rng = np.random.default_rng(0)
ids = np.zeros((2, LENGTH), np.int32)
# Sequences straddling the 16-token blocks, a one-token one, padding.
for row, lengths in enumerate([(5, 1, 13, 9), (16, 16)]):
    ids[row, :sum(lengths)] = np.repeat(np.arange(1, len(lengths) + 1), lengths)
positions = np.zeros_like(ids)
for row in range(2):
    for k in range(1, ids.max() + 1):
        where = ids[row] == k
        positions[row, where] = np.arange(where.sum())
features = {"input_ids": np.where(ids > 0, rng.integers(1, 30, ids.shape), 0),
            "sequence_ids": ids, "position_ids": positions,
            "token_type_ids": np.zeros_like(ids)}
real = (ids > 0)[..., None]
cotangent = rng.normal(size=(2, LENGTH, 16)).astype("float32")


def outputs_and_gradients(models):
    """Each model's outputs on the real tokens and gradients, in one jitted
    program (one XLA compilation for both), and the kernel calls tracing
    each model made."""
    calls = []

    def loss(model, trainable, non_trainable):
        out, _ = model.stateless_call(trainable, non_trainable, features)
        out = out["sequence_output"]
        return (jax.numpy.where(real, out, 0.0) * cotangent).sum(), out

    def step(weights):
        result = []
        for model, (trainable, non_trainable) in zip(models, weights):
            CALLS.clear()
            result.append(jax.grad(functools.partial(loss, model), has_aux=True)(
                trainable, non_trainable))
            calls.append(len(CALLS))
        return result

    result = jax.jit(step)([([v.value for v in model.trainable_variables],
                             [v.value for v in model.non_trainable_variables])
                            for model in models])
    return [(np.asarray(out)[ids > 0], [np.asarray(g) for g in grads])
            for grads, out in result], calls


def check(make):
    dense = make("dense")
    flash = make("flash")
    # Built symbolically: an eager call on JAX compiles every op on its own.
    for model in (dense, flash):
        model.build({name: value.shape for name, value in features.items()})
    flash.set_weights(dense.get_weights())
    assert flash.transformer_layers[0].attention.implementation_for(LENGTH) == "flash"
    [(want, want_grads), (got, got_grads)], calls = outputs_and_gradients(
        (dense, flash))
    assert calls == [0, 2], calls  # one per layer of the flash model
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert len(got_grads) == len(want_grads) > 0
    for g, w in zip(got_grads, want_grads):
        # A variable's gradient sums terms up to ~1e3 here: float32 rounding
        # of the two summation orders leaves ~1e-5 on its small entries
        # (2.1e-5 on one of 16 in a CI run), so absolute error is measured
        # against the largest entry; a leak across sequences moves entries
        # by their own size.
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, atol=1e-6 * scale, rtol=1e-5)


common = dict(vocabulary_size=30, num_layers=2, hidden_dim=16, num_heads=2,
              intermediate_dim=32, max_sequence_length=LENGTH)
check(lambda implementation: models.BertEncoder(
    **common, attention_implementation=implementation,
    max_sequences_per_pack=4))
check(lambda implementation: models.DecoderBackbone(
    **common, attention_implementation=implementation,
    max_sequences_per_pack=4))
print("ok")
