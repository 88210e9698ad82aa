"""Inference on packs: `predict` and mapping packed outputs back to examples.

- `predict` (also `tfpack.predict`): unpacked examples in, per-example
  outputs out, in input order, computed on packs.
- `reference_log_likelihoods`: a preference reference model's scores of
  every pair, computed once through `predict`.
- `Collector`, `unpack_batch`: cut packed outputs into examples through the
  packs' ``example_ids`` and the task contract's output declarations.

Example:

>>> import numpy as np
>>> from tfpack.inference import Collector
>>> c = Collector({"logits": "sequence"})
>>> _ = c.add({"example_ids": np.array([[1, 0], [2, -1]])},
...           {"logits": np.array([[[1.0], [0.0]], [[2.0], [9.0]]])})
>>> c.result()["logits"].ravel().tolist()
[0.0, 1.0, 2.0]
"""

from tfpack import _tensorflow

_tensorflow.require("tfpack.inference (tfpack.predict packs with tf.data)")

from tfpack.inference.predict import output_kinds, predict
from tfpack.inference.preference import reference_log_likelihoods
from tfpack.inference.unpack import Collector, unpack_batch

__all__ = ["Collector", "output_kinds", "predict", "reference_log_likelihoods", "unpack_batch"]
