"""Gradient accumulation in graph loops: an update's cost to trace does not grow with it.

`Trainer` needs the GLOBAL target counts of all ``accumulation_steps``
micro-batches of an update before the first backward pass (each replica
divides its local loss sums by them), so an update runs in two passes over its
micro-batches, each a `tf.while_loop`, never a Python loop unrolled into the
graph (115,260 unrolled micro-batches took over 10 minutes and 12 GB to trace):

1. `read_micro_batches` (cross-replica context): the update's micro-batches
   from the distributed iterator into one `tf.TensorArray` per feature and
   local replica, on the replica's device; `stacked_micro_batches` hands each
   replica its ``[accumulation_steps, micro_batch_size, ...]`` tensors.
2. `fold_micro_batches` (replica context): counting, then forward/backward,
   one micro-batch per loop iteration, in order.

The update then holds its micro-batches' features (not their activations) at
once, as the unrolled graph did. Each micro-batch meets the same ops in the
same order as before, so results are bitwise those of the unrolled loop.

>>> import tensorflow as tf
>>> strategy = tf.distribute.get_strategy()
>>> iterator = iter(tf.data.Dataset.range(4).map(lambda i: {"x": tf.fill([2], i)}))
>>> @tf.function
... def read():
...     complete, arrays = read_micro_batches(
...         strategy, iterator, 3, {"x": tf.TensorSpec([2], tf.int64)})
...     return complete, stacked_micro_batches(strategy, arrays)["x"]
>>> complete, x = read()
>>> bool(complete), x.numpy().tolist()
(True, [[0, 0], [1, 1], [2, 2]])
>>> bool(read()[0])  # one micro-batch left: no complete update
False
"""

from __future__ import annotations

from tfpack import _tensorflow

tf = _tensorflow.require("tfpack.training.accumulation (the Trainer's accumulation)")

__all__ = ["read_micro_batches", "micro_batch_spec", "stacked_micro_batches",
           "fold_micro_batches", "sum_micro_batches"]


def _fill(value, spec: tf.TensorSpec):
    # A replica whose stream ran out before another's gets a short (empty)
    # micro-batch: its missing rows become empty packs (all zeros), which
    # hold no targets and no tokens, as the empty batch held none.
    missing = spec.shape[0] - tf.shape(value)[0]
    value = tf.pad(value, [[0, missing]] + [[0, 0]] * (spec.shape.rank - 1))
    return tf.ensure_shape(value, spec.shape)


def read_micro_batches(strategy, iterator, steps: int, spec: dict):
    """Read one update's micro-batches (cross-replica context, inside `tf.function`).

    Args:
        strategy: the `tf.distribute.Strategy` of ``iterator``.
        iterator: a distributed iterator of micro-batches (dicts of features).
        steps: micro-batches per update (``accumulation_steps``).
        spec: one replica's micro-batch, a dict of `tf.TensorSpec`.

    Returns:
        ``(complete, arrays)``: whether all ``steps`` micro-batches came (a
        finite stream stops reading at the first missing one), and for each
        local replica a dict of `tf.TensorArray` of ``steps`` micro-batches.
    """
    replicas = len(strategy.experimental_local_results(
        strategy.experimental_distribute_values_from_function(lambda _: tf.constant(0))))
    arrays = [{k: tf.TensorArray(s.dtype, size=steps, element_shape=s.shape)
               for k, s in spec.items()} for _ in range(replicas)]

    def body(j, complete, arrays):
        optional = iterator.get_next_as_optional()

        def write():
            values = strategy.experimental_local_results(optional.get_value())
            out = []
            for array, value in zip(arrays, values):
                with tf.device(next(iter(value.values())).device):
                    out.append({k: array[k].write(j, _fill(value[k], spec[k])) for k in spec})
            return out

        arrays = tf.cond(optional.has_value(), write, lambda: arrays)
        return j + 1, optional.has_value(), arrays

    _, complete, arrays = tf.while_loop(
        lambda j, complete, _: tf.logical_and(j < steps, complete), body,
        (tf.constant(0), tf.constant(True), arrays), parallel_iterations=1)
    return complete, arrays


def micro_batch_spec(element_spec: dict, micro_batch_size: int) -> dict:
    """One replica's micro-batch of unbatched examples ``element_spec``.

    >>> micro_batch_spec({"ids": tf.TensorSpec([4], tf.int32)}, 2)["ids"]
    TensorSpec(shape=(2, 4), dtype=tf.int32, name=None)
    """
    return {k: tf.TensorSpec([micro_batch_size] + s.shape.as_list(), s.dtype)
            for k, s in element_spec.items()}


def stacked_micro_batches(strategy, arrays):
    """Each replica's ``[steps, ...]`` features (a per-replica value for `strategy.run`)."""
    stacked = [{k: array.stack() for k, array in replica.items()} for replica in arrays]
    return strategy.experimental_distribute_values_from_function(
        lambda context: stacked[context.replica_id_in_sync_group % len(stacked)])


def fold_micro_batches(fn, batches: dict, initial, steps: int, start: int = 0):
    """``state = fn(micro_batch, state)`` for micro-batches ``start..steps-1``, in order.

    ``batches`` holds ``[steps, ...]`` features; one `tf.while_loop`, so the
    graph holds ``fn`` once whatever ``steps`` is.

    >>> batches = {"x": tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])}
    >>> float(fold_micro_batches(lambda x, s: s + tf.reduce_sum(x["x"]), batches,
    ...                          tf.constant(0.0), steps=3))
    21.0
    """
    def body(j, state):
        return j + 1, fn({k: v[j] for k, v in batches.items()}, state)

    return tf.while_loop(lambda j, _: j < steps, body, (tf.constant(start), initial),
                         parallel_iterations=1)[1]


def sum_micro_batches(fn, batches: dict, steps: int) -> dict:
    """The sum over micro-batches of ``fn(micro_batch)``, a dict of tensors, in order.

    >>> batches = {"x": tf.constant([[1.0, 2.0], [3.0, 4.0]])}
    >>> float(sum_micro_batches(lambda x: {"n": tf.reduce_sum(x["x"])}, batches, 2)["n"])
    10.0
    """
    def add(x, totals):
        values = fn(x)
        return {k: totals[k] + values[k] for k in values}

    # The first micro-batch starts the sums (no zeros to add), as a Python sum would.
    first = fn({k: v[0] for k, v in batches.items()})
    return fold_micro_batches(add, batches, first, steps, start=1)
