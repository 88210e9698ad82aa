"""A clean `TfpackError` where a tf.data pipeline meets Python.

Streaming packing checks each window in Python (`tf.numpy_function`); tf.data
turns a `TfpackError` raised there into a `tf.errors.InvalidArgumentError`
whose message holds a Python traceback. `raising_tfpack_errors` wraps the
dataset that `tfpack.data.pack` returns so that iterating it eagerly (``for``,
``next``, ``as_numpy_iterator``) raises the original one-line `TfpackError`
instead. Iterators stay checkpointable. Datasets derived from it with further
transformations (``.batch()``...) raise TensorFlow's error again: use
``pack(batch_size=...)`` for batches.

Example:

>>> import tensorflow as tf
>>> from tfpack.errors import TfpackError
>>> def check(x):
...     if x > 1:
...         raise TfpackError("Every value must be at most 1. Received: 2")
...     return x
>>> ds = tf.data.Dataset.range(3).map(lambda x: tf.numpy_function(check, [x], tf.int64))
>>> try:
...     list(raising_tfpack_errors(ds))
... except TfpackError as error:
...     print(error)
Every value must be at most 1. Received: 2
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, iterator_ops

from tfpack.errors import TfpackError

__all__ = ["raising_tfpack_errors", "tfpack_message"]

_MARK = "TfpackError: "


def tfpack_message(error: Exception) -> str | None:
    """The `TfpackError` message inside a TensorFlow error, or ``None``."""
    text = getattr(error, "message", None) or str(error)
    if _MARK not in text:
        return None
    return text.split(_MARK, 1)[1].split("\n", 1)[0].strip()


class _Iterator(iterator_ops.OwnedIterator):
    def _next_internal(self):
        try:
            return super()._next_internal()
        except tf.errors.InvalidArgumentError as error:
            message = tfpack_message(error)
            if message is None:
                raise
            raise TfpackError(message) from None


class _RaisingDataset(dataset_ops.UnaryUnchangedStructureDataset):
    def __init__(self, dataset: tf.data.Dataset):
        super().__init__(dataset, dataset._variant_tensor)  # noqa: SLF001 - same graph node

    def __iter__(self):
        if tf.executing_eagerly():
            return _Iterator(self)
        return super().__iter__()


def raising_tfpack_errors(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset``, whose eager iterators raise `TfpackError` instead of wrapping it."""
    return _RaisingDataset(dataset)
