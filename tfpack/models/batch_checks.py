"""Keras `fit`, `evaluate` and `predict` of a task check each batch of packs before its step.

The rules are `tfpack.training.validation`'s (class labels past ``num_classes``,
shared prompts for a model without ``share_prompt``, positions past the learned
position table), written once; where they run depends on the backend:

- TensorFlow: as named assertions in the step's graph, on the batch, before the
  step proper (`graph_checked`), which Keras compiles with XLA under
  ``jit_compile=True``; XLA drops assertions, the graph around it keeps them.
  Under a distribution strategy (batches split over replicas) they run in each
  replica's `Task.compute_loss` (`checked_loss`, which also checks a loss computed
  in the user's own loop). A failed assertion leaves the
  step as one `TfpackError` (`refusing`).
- JAX: Keras jits its whole step, so each batch is checked on the host before it
  (`host_checked`).

A refused batch updates no weight: the assertions run before the step reads it.

Example: a step compiled with XLA, its batch checked around it (a task's Keras steps
are wrapped so):

>>> import tensorflow as tf
>>> class Tagger:
...     task, num_classes = "token_classification", 3
>>> xla_step = tf.function(lambda x: x["labels"] * 2, jit_compile=True)
>>> step = refusing(tf.function(graph_checked(Tagger(), xla_step)))
>>> step({"labels": tf.constant([[0, 2, -100]])}).numpy().tolist()
[[0, 4, -200]]
>>> step({"labels": tf.constant([[0, 5, -100]])})
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `labels` must be class ids in [0, 3) (num_classes of the model). Received: labels=5
"""

import functools
import itertools

import keras

from tfpack.errors import TfpackError

__all__ = ["checked_loss", "graph_checked", "refusing", "host_checked"]


def _packs(data):
    """The features of a Keras batch: ``x`` or the first item of ``(x, y, ...)``."""
    return data[0] if isinstance(data, (tuple, list)) and data else data


def checked_loss(model, x, loss):
    """``loss`` after the batch's named assertions, on TensorFlow: under a distribution
    strategy each replica reads its share of the batch here, and a loss computed in the
    user's own loop is checked too (XLA drops them: Keras steps rely on `graph_checked`)."""
    if keras.backend.backend() != "tensorflow":
        return loss
    import tensorflow as tf

    from tfpack.training.validation import batch_checks

    checks = batch_checks(model, x)
    if not checks:
        return loss
    with tf.control_dependencies(checks):
        return tf.identity(loss)


def graph_checked(model, step):
    """TensorFlow: ``step(data)`` with the batch's named assertions run first, outside the
    step, so that XLA (``jit_compile=True``) cannot drop them. Batches split over replicas
    (distributed values) are left to `checked_loss`."""
    import tensorflow as tf

    from tfpack.training.validation import batch_checks, check_batch

    @functools.wraps(step)
    def checked(data):
        x = _packs(data)
        if not isinstance(x, dict) or not all(isinstance(v, tf.Tensor) for v in x.values()):
            return step(data)
        if tf.executing_eagerly():  # `run_eagerly=True`: the host's check, as on JAX.
            check_batch(model, x)
            return step(data)
        checks = batch_checks(model, x)
        if not checks:
            return step(data)
        with tf.control_dependencies(checks):
            x = {name: tf.identity(value) for name, value in x.items()}
        if isinstance(data, (tuple, list)):
            return step(type(data)([x, *data[1:]]))
        return step(x)

    return checked


def refusing(function):
    """TensorFlow: ``function`` (a Keras step) whose failed `graph_checked` assertion leaves
    as the one `TfpackError` `check_batch` raises on the host (any other error as it was)."""
    if function is None or getattr(function, "refusing", False):
        return function
    import tensorflow as tf

    from tfpack.training.validation import refusal

    @functools.wraps(function)
    def refused(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except tf.errors.InvalidArgumentError as error:
            found = refusal(error)
            if found is None:
                raise
            raise found from None

    refused.refusing = True
    return refused


# The variables in a Keras JAX step's ``state``, by step.
_STATE = {"train": ("trainable_variables", "non_trainable_variables", "optimizer_variables",
                    "metrics_variables"),
          "test": ("trainable_variables", "non_trainable_variables", "metrics_variables"),
          "predict": ("trainable_variables", "non_trainable_variables")}


def host_checked(model, step, kind: str):
    """Keras on JAX: ``step(state, iterator)`` with the batches it takes checked on the
    host first (`check_batch`): no assertion runs inside the jitted step. Keras takes
    the variables' values out for the loop (``state``); a refused batch puts them back
    before the error leaves, so the model stays usable. Wrapped once a model."""
    if step is None or getattr(step, "checked", False):
        return step
    from tfpack.training.validation import check_batch

    def checked(state, iterator):
        batches = list(itertools.islice(iterator, model.steps_per_execution))
        try:
            for data in batches:
                x = _packs(data)
                if isinstance(x, dict):
                    check_batch(model, x)
        except TfpackError:
            model._jax_state, model._jax_state_synced = dict(zip(_STATE[kind], state)), False
            model.jax_state_sync()
            raise
        return step(state, iter(batches))

    checked.checked = True
    return checked
