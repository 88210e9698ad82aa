"""Gradient accumulation in graph loops: the update of Python-unrolled micro-batches,
and a traced update that does not grow with ``accumulation_steps``."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.training import Trainer
from tinymodels import TinyPretrainer, dataset, packed_examples

MICRO = 2


def _trainer(acc, jit_compile=False):
    keras.utils.set_random_seed(0)
    return Trainer(TinyPretrainer(), keras.optimizers.SGD(1.0), micro_batch_size=MICRO,
                   accumulation_steps=acc, jit_compile=jit_compile, progress=False,
                   log_every=1, check_exact=False)


def _unrolled_update(acc):
    """One SGD(1.0) update written out: a Python loop over the micro-batches, each
    micro-batch's loss sums over the update's counts, gradients summed."""
    keras.utils.set_random_seed(0)
    model = TinyPretrainer()
    examples = packed_examples(MICRO * acc)
    batches = [{k: tf.constant(v[i * MICRO:(i + 1) * MICRO]) for k, v in examples.items()}
               for i in range(acc)]
    model(batches[0])
    counts = {t: sum(float(model.target_counts(x)[t]) for x in batches) for t in model.loss_terms}
    total, reference_loss = None, 0.0
    for x in batches:
        with tf.GradientTape() as tape:
            stats = model.loss_statistics(x, model(x, training=True))
            loss = sum(stats[f"{t}_loss_sum"] / counts[t] for t in model.loss_terms)
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
        total = grads if total is None else [a + g for a, g in zip(total, grads)]
        reference_loss += float(loss)
    weights = [v.numpy() - g.numpy() for v, g in zip(model.trainable_variables, total)]
    masked = examples["masked_lm_weights"].reshape(acc, MICRO, -1).sum(axis=(1, 2))
    return weights, reference_loss, masked


@pytest.mark.parametrize("acc, jit_compile", [(1, False), (2, False), (3, True)])
def test_update_equals_the_unrolled_update(acc, jit_compile):
    trainer = _trainer(acc, jit_compile)
    result = trainer.fit(dataset(MICRO * acc), 1)
    assert result.step == 1
    expected, loss, masked = _unrolled_update(acc)
    # Uneven micro-batches: a per-micro-batch mean would give another update.
    assert len(set(masked.tolist())) == acc
    # Float32 rounding only: the eager reference and the traced (or XLA) step may
    # fuse and order the same float32 sums differently.
    for ours, theirs in zip(trainer.model.trainable_variables, expected):
        np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-6, atol=1e-6)
    assert result.history[-1]["loss"] == pytest.approx(loss, rel=1e-6)


def _graph_nodes(acc):
    trainer = _trainer(acc)
    trainer.fit(dataset(MICRO * acc).repeat(), 0)  # Sets up the iterator, runs nothing.
    graph = trainer._loop.get_concrete_function(
        trainer._iterator, tf.constant(1, tf.int64)).graph.as_graph_def()
    return len(graph.node) + sum(len(f.node_def) for f in graph.library.function)


def test_traced_update_does_not_grow_with_accumulation_steps():
    # The Python loop this replaced traced every micro-batch: 276 nodes for 2, 2,198 for 64.
    assert _graph_nodes(2) == _graph_nodes(64)


def test_accumulation_steps_beyond_the_int32_loop_counters_are_refused():
    with pytest.raises(TfpackError,
                       match=r"accumulation_steps.*Received: accumulation_steps=2147483648"):
        _trainer(2**31)
