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
