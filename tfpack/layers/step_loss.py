"""The ``loss`` that `fit` and `evaluate` report, exact under `tf.distribute`."""

import keras
from keras import ops

from tfpack.layers.arguments import DTYPE, NAME
from tfpack.layers.losses import global_sum
from tfpack.layers.losses import num_replicas
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class StepLoss(keras.metrics.Mean):
    """Keras's loss tracker for losses whose denominators are global already.

    Keras's `fit` hands its loss tracker each replica's loss multiplied by the
    number of replicas ``R`` (undoing the ``1 / R`` of per-replica means) and
    weighted by the replica's batch size. A tfpack task's replica loss is
    its share of the step's loss instead (local sum / global count): the
    step's loss is the *sum* over replicas, and an uneven split (6 + 5 packs)
    made the reported mean wrong. This tracker adds, on each replica, its
    share times the global batch size and its own batch size to the count;
    after the sum over replicas the result is the one-device value, the mean
    of step losses weighted by packs. With one replica it is `keras.metrics.Mean`.

    Example:

    >>> tracker = StepLoss(name="loss")
    >>> tracker.update_state(2.0, sample_weight=3)
    >>> tracker.update_state(4.0, sample_weight=1)
    >>> float(tracker.result())
    2.5

    Args:
        name: metric name.
        dtype: dtype of the accumulators.

    Call arguments of `update_state`:
        values: the loss as Keras's train/test step passes it.
        sample_weight: the replica's batch size.
    """

    @validate_params({"name": NAME, "dtype": DTYPE})
    def __init__(self, name="mean", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, values, sample_weight=None):
        replicas = num_replicas()
        if replicas == 1 or sample_weight is None:
            return super().update_state(values, sample_weight=sample_weight)
        share = ops.cast(values, self.dtype) / replicas  # Keras multiplied by R
        batch = ops.cast(sample_weight, self.dtype)
        self.total.assign_add(share * global_sum.__wrapped__(batch))
        self.count.assign_add(batch)


class EvaluationLoss(StepLoss):
    """`StepLoss` whose `evaluate` result is exact per target (per pair, per token).

    `fit` reports the mean of its step losses, as Keras does. An evaluation's
    loss is a property of the examples, not of how they were packed or
    batched: averaging each batch's loss weights a batch of few pairs like a
    full one (0.70524 where the pairs' mean is 0.70621). A task's
    ``compute_metrics`` hands this tracker each evaluated batch's
    ``{t}_loss_sum`` and ``{t}_count`` (`add_statistics`); its result is then
    ``sum_t (sum of loss_sum_t) / (sum of count_t)``, plus the batches' mean
    regularization loss where the model has one. ``evaluating`` is set by the
    task's ``compute_loss`` (``training=False``) as the step is traced.
    Not part of the public API: `tfpack.models.Task.compile` installs it.

    >>> tracker = EvaluationLoss(("preference",))
    >>> tracker.add_statistics({"preference_loss_sum": 3.0, "preference_count": 4.0}, rows=1)
    >>> tracker.add_statistics({"preference_loss_sum": 1.0, "preference_count": 1.0}, rows=1)
    >>> round(float(tracker.result()), 6)  # 4 / 5, not (0.75 + 1.0) / 2
    0.8
    """

    def __init__(self, terms, name="loss", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.terms = tuple(terms)
        self.evaluating = False
        self.regularized = False
        shape = (len(self.terms),)
        self.term_sums = self.add_variable(shape=shape, initializer="zeros", dtype=self.dtype,
                                           name="term_sums")
        self.term_counts = self.add_variable(shape=shape, initializer="zeros",
                                             dtype=self.dtype, name="term_counts")
        # Sum over batches of their data loss times their rows: what `total` holds
        # beyond it is the regularization, averaged as Keras averages it.
        self.data_total = self.add_variable(shape=(), initializer="zeros", dtype=self.dtype,
                                            name="data_total")

    def add_statistics(self, statistics, rows, regularized=False):
        """Accumulate one evaluated batch's ``{t}_loss_sum`` and ``{t}_count``."""
        sums = ops.stack([ops.cast(statistics[f"{t}_loss_sum"], self.dtype)
                          for t in self.terms])
        counts = ops.stack([ops.cast(statistics[f"{t}_count"], self.dtype) for t in self.terms])
        self.term_sums.assign_add(sums)
        self.term_counts.assign_add(counts)
        if regularized:
            self.regularized = True
            self.data_total.assign_add(ops.sum(sums / ops.maximum(counts, 1.0))
                                       * ops.cast(rows, self.dtype))

    def result(self):
        counts = self.term_counts
        exact = ops.sum(self.term_sums / ops.maximum(counts, 1.0))
        if self.regularized:
            exact = exact + (self.total - self.data_total) / ops.maximum(self.count, 1e-12)
        return ops.where(ops.sum(counts) > 0, exact, super().result())

    def reset_state(self):
        super().reset_state()
        for variable in (self.term_sums, self.term_counts, self.data_total):
            variable.assign(ops.zeros(variable.shape, variable.dtype))
