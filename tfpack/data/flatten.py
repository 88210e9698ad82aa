"""Padding-free minibatch flattening (Hugging Face ``DataCollatorWithFlattening``).

Each group of ``batch_size`` consecutive examples becomes one row: their
tokens back to back, ``sequence_ids`` 1..B and ``position_ids`` restarting per
example, padded to a fixed ``token_budget`` so XLA compiles one shape. No
planning, no reordering: the examples keep their order. It is a pack of
exactly B sequences, so the row has the DESIGN.md features with ``L =
token_budget`` and ``K = batch_size``; the last group may hold fewer.

Example (``batch_size=2``, ``token_budget=6``)::

    [5, 6, 7], [8, 9], [3]
    -> input_ids [5, 6, 7, 8, 9, 0], sequence_ids [1, 1, 1, 2, 2, 0],
       position_ids [0, 1, 2, 0, 1, 0]
       input_ids [3, 0, 0, 0, 0, 0], sequence_ids [1, 0, 0, 0, 0, 0], ...

>>> import tensorflow as tf, tfpack
>>> ds = tf.data.Dataset.from_generator(
...     lambda: ({"input_ids": [1] * n} for n in [3, 2, 1]),
...     output_signature={"input_ids": tf.TensorSpec([None], tf.int32)})
>>> rows = ds.apply(tfpack.data.flatten(batch_size=2, token_budget=6))
>>> [r["sequence_ids"].numpy().tolist() for r in rows]
[[1, 1, 1, 2, 2, 0], [1, 0, 0, 0, 0, 0]]
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from tfpack.data.assemble import assemble
from tfpack.features import FeatureRoles
from tfpack.data.emit import with_static_shapes
from tfpack.data.reading import ragged_rows
from tfpack.errors import TfpackError
from tfpack.formats.rows import dense_rows
from tfpack.params import InstanceOf, Integer, check, validate_params

__all__ = ["flatten"]


@validate_params({"batch_size": Integer(1), "token_budget": [None, Integer(1)],
                  "max_length": [None, Integer(1)], "max_predictions": [None, Integer(1)],
                  "roles": [None, InstanceOf(str, FeatureRoles)]})
def flatten(
    batch_size: int,
    token_budget: int | None = None,
    *,
    max_length: int | None = None,
    max_predictions: int | None = None,
    roles: str | FeatureRoles | None = None,
) -> Callable[[tf.data.Dataset], tf.data.Dataset]:
    """A dataset transformation flattening each minibatch into one row.

    Args:
        batch_size: ``B``, examples per row (``K`` of the row).
        token_budget: ``L`` of the row; default ``batch_size * max_length``,
            which always fits. A group with more tokens fails on iteration.
        max_length: longest example; only used for the default budget.
        max_predictions: ``M`` for masked-LM features (required with them).
        roles: `FeatureRoles`, a preset name, or ``None`` to infer.

    Returns:
        A function for ``dataset.apply`` yielding one row per group.
    """
    if token_budget is None:
        if max_length is None:
            raise TfpackError("`flatten` needs `token_budget` or `max_length`. "
                              "Received: token_budget=None, max_length=None")
        token_budget = batch_size * max_length

    def apply(dataset: tf.data.Dataset) -> tf.data.Dataset:
        dataset = dense_rows(dataset)
        chosen = (FeatureRoles.infer(dataset.element_spec) if roles is None
                  else FeatureRoles.get(roles))
        chosen.validate(dataset.element_spec)
        chosen = chosen.present(dataset.element_spec)
        if chosen.predictions:
            check("max_predictions", max_predictions, Integer(1))

        def row(index, batch):
            batch = ragged_rows(batch)
            n = batch[chosen.length_feature].nrows()
            ids = index * batch_size + tf.range(n, dtype=tf.int64)
            packs = assemble(batch, tf.range(n), tf.stack([tf.constant(0, n.dtype), n]),
                             chosen, token_budget, batch_size, max_predictions,
                             example_ids=ids)
            return {name: t[0] for name, t in packs.items()}

        rows = dataset.ragged_batch(batch_size).enumerate().map(
            tf.autograph.experimental.do_not_convert(row), num_parallel_calls=tf.data.AUTOTUNE)
        return with_static_shapes(rows, chosen, token_budget, batch_size, max_predictions)

    return apply
