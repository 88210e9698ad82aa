"""`Task.fit` and `Task.evaluate` trace their step once on TensorFlow.

Keras's TensorFlow trainer, without a `tf.distribute` strategy, builds the
model, metrics and optimizer inside the step's first trace, and a
`tf.function` that made variables traces itself again; tfpack's tasks build
them first from the dataset's element spec. Counted: the Python calls of
``train_step`` / ``test_step`` (one per trace), on a tiny causal LM whose
model was never called before ``fit``.
"""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.models import CausalLM, DecoderBackbone
from tfpack.testing import next_token_labels, pack_examples


def _packs():
    rng = np.random.default_rng(0)
    examples = [{"input_ids": rng.integers(1, 20, size=n).tolist()} for n in (3, 4, 5, 2)]
    for e in examples:
        e["labels"] = next_token_labels(e["input_ids"])
    packed = pack_examples(examples, 8, packs=[[0, 1], [2, 3]])
    return tf.data.Dataset.from_tensor_slices(packed).batch(2)


def _model(counts):
    keras.utils.set_random_seed(0)
    model = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16))
    for step in ("train_step", "test_step"):
        original = getattr(model, step)

        def counted(data, step=step, original=original):
            counts[step] = counts.get(step, 0) + 1
            return original(data)

        setattr(model, step, counted)
    return model


@functools.cache
def _fitted(jit_compile):
    """A `_model` fitted 2 epochs on `_packs()` and its step counts: shared by
    the trace-count test and the build-order test below (one XLA fit fewer;
    `evaluate` after it moves no weight)."""
    counts = {}
    model = _model(counts)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=jit_compile)
    history = model.fit(_packs(), epochs=2, verbose=0)
    return model, counts, history


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_and_evaluate_trace_their_step_once(jit_compile):
    model, counts, history = _fitted(jit_compile)
    assert np.isfinite(history.history["loss"]).all()
    assert counts["train_step"] == 1
    model.evaluate(_packs(), verbose=0)
    assert counts == {"train_step": 1, "test_step": 1}


def test_a_model_built_by_fit_first_equals_one_built_inside_the_step():
    """The same updates as Keras's own order (built inside the first trace),
    both compiled as `compile()`'s default resolves (no XLA on a CPU-only
    machine): the model built first is `_fitted`'s at that setting."""
    model = _model({})
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model._build_before_tracing = lambda x: None
    model.fit(_packs(), epochs=2, verbose=0)
    built_first = _fitted(bool(model.jit_compile))[0]
    for a, b in zip(built_first.trainable_variables, model.trainable_variables):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
