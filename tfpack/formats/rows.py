"""Dense rows from ragged reads: the one place a rank-1 ragged feature becomes dense.

Unbatching or slicing a `tf.RaggedTensor` (a batch of variable-length records,
then ``unbatch``) yields features that hold dense values but carry a
`tf.RaggedTensorSpec`; the readers (`tfpack.formats.records`) and the tf.data
transforms (`tfpack.data.pack`, `tfpack.data.flatten`) turn them dense here.

Example:

>>> import tensorflow as tf
>>> ds = tf.data.Dataset.from_tensor_slices({"x": tf.ragged.constant([[1, 2], [3]])})
>>> dense_rows(ds).element_spec["x"]
TensorSpec(shape=(None,), dtype=tf.int32, name=None)
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["dense_rows"]


def dense_rows(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` with rank-1 ragged features (``ragged_rank`` 0) as dense tensors.

    Unbatching or slicing a `tf.RaggedTensor` yields such features; they hold
    dense values but a `tf.RaggedTensorSpec`.
    """
    spec = dataset.element_spec
    if not isinstance(spec, dict) or not any(
            isinstance(s, tf.RaggedTensorSpec) and s.ragged_rank == 0 for s in spec.values()):
        return dataset
    return dataset.map(tf.autograph.experimental.do_not_convert(lambda x: {
        n: v.to_tensor() if isinstance(v, tf.RaggedTensor) else v for n, v in x.items()}))
