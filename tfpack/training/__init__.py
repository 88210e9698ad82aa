"""Training on packed data: LAMB for packing, batch rules, a tf.distribute loop.

- `Lamb`: LAMB with the BERT recipe and the packing adjustment ``beta ** p``.
- `for_packing`, `BatchRule`, `packing_factor_of`: cut accumulation (or the
  micro-batch) by the packing factor.
- `Trainer`: the `tf.distribute` loop (XLA per-replica step, accumulation,
  global loss denominators, mixed precision, JSON-lines logs, checkpoints);
  given a packed output, each worker reads only its share.
- `packed_dataset_fn`: the same share per worker for `model.fit`.
- `HostPacking`: raw files each worker packs from its own share (`Trainer.fit`).
- `ExactnessCheck`: the Keras callback that refuses, before `model.fit`
  trains, a packed model that is not exact (`Trainer` checks by itself).

`Trainer`, `packed_dataset_fn` and `HostPacking` need TensorFlow (imported on
first use); the rest runs on any Keras backend without it.

Example:

>>> from tfpack.training import Lamb, for_packing
>>> rule = for_packing(micro_batch_size=16, accumulation_steps=4, packing_factor=2.0)
>>> optimizer = Lamb(learning_rate=1e-3, packing_factor=1.0)
>>> rule.accumulation_steps
2
"""

from tfpack import _tensorflow
from tfpack.training.batching import BatchRule, for_packing, packing_factor_of
from tfpack.training.exactness import ExactnessCheck
from tfpack.training.lamb import DEFAULT_EXCLUDE, Lamb
from tfpack.training.results import NonFiniteLossError, TrainResult
from tfpack.training.validation import validate_element_spec

__all__ = [
    "BatchRule",
    "DEFAULT_EXCLUDE",
    "ExactnessCheck",
    "HostPacking",
    "Lamb",
    "NonFiniteLossError",
    "TrainResult",
    "Trainer",
    "for_packing",
    "packed_dataset_fn",
    "packing_factor_of",
    "validate_element_spec",
]

# The tf.distribute loop and its tf.data inputs, imported on first use: the rest
# (and `tfpack.models`, which reads `trained_lengths`) runs without TensorFlow on
# another Keras backend, where these raise `tfpack._tensorflow.TensorFlowMissing`.
__getattr__, __dir__ = _tensorflow.on_first_use(
    globals(), {"HostPacking": "hosts", "packed_dataset_fn": "inputs", "Trainer": "loop"})
