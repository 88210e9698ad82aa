"""A metric that divides two accumulated statistics."""

import keras
from keras import ops

from tfpack.layers.arguments import DTYPE, NAME
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class StatisticRatio(keras.metrics.Metric):
    """Running `sum(numerator) / sum(denominator)` over batches.

    Accuracy of a packed batch is `correct / count` with counts that vary
    from batch to batch; averaging per-batch ratios would weight a batch with
    few real items like a full one. This metric accumulates both sums, so its
    result is the exact accuracy over everything seen since the last reset.

    Example:

    >>> metric = StatisticRatio(name="nsp_accuracy")
    >>> metric.update_state(3.0, 4.0)
    >>> metric.update_state(1.0, 4.0)
    >>> float(metric.result())
    0.5

    Args:
        name: metric name.
        dtype: dtype of the accumulators.

    Call arguments of `update_state`:
        numerator: scalar, e.g. `mlm_correct` of a batch.
        denominator: scalar, e.g. `mlm_count` of the batch.
    """

    @validate_params({"name": NAME, "dtype": DTYPE})
    def __init__(self, name="ratio", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.numerator = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="numerator")
        self.denominator = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="denominator")

    def update_state(self, numerator, denominator):
        self.numerator.assign_add(ops.cast(numerator, self.dtype))
        self.denominator.assign_add(ops.cast(denominator, self.dtype))

    def result(self):
        return self.numerator / ops.maximum(self.denominator, 1e-12)

    def reset_state(self):
        self.numerator.assign(0.0)
        self.denominator.assign(0.0)
