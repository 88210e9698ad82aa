"""The pack shapes (L, K, M) a model has certainly been trained at.

A model's first call does not say at which shapes it will serve (a smoke call
at L=8 before training at L=128, or `from_pretrained` building on a toy
shape); the shapes of the batches it was *trained* on do. `record` is called
by `Trainer.fit` (from the dataset's ``element_spec``) and by the tfpack
models' ``compute_loss`` when Keras ``fit`` traces a training step; `read`
gives them back, e.g. to `tfpack.export.export_saved_model`. They travel in
``.keras`` files inside the model's build config (see
`tfpack.models.task.Task.get_build_config`).

Example:

>>> import tensorflow as tf
>>> from tfpack.training import trained_lengths
>>> class Model:  # any object with attributes
...     pass
>>> model = Model()
>>> trained_lengths.record(model, {"input_ids": tf.TensorSpec([64], tf.int32),
...                                "sequence_mask": tf.TensorSpec([4], tf.float32)})
{'L': 64, 'K': 4}
>>> trained_lengths.read(model)
{'L': 64, 'K': 4}
"""

from __future__ import annotations

from tfpack import features as contract

__all__ = ["record", "read", "restore", "ATTRIBUTE"]

# Stored with object.__setattr__ so that Keras / tf.train tracking never sees it.
ATTRIBUTE = "_tfpack_trained_lengths"

# Which of L, K, M each input feature's last dimension gives (the feature
# contract; labels are left out: `labels` is [K] or [L] depending on the task).
def _kind(name: str) -> str | None:
    entry = contract.input_kinds().get(name)
    return entry and entry[0]


def _last_dim(value) -> int | None:
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    dims = list(shape)
    if not dims or dims[-1] is None:
        return None
    return int(dims[-1])


def record(model, features) -> dict:
    """Record L/K/M from ``features`` (tensors or TensorSpecs, batched or not).

    Later records replace earlier ones (the latest training shapes win).
    Returns the recorded ``{"L": ..., "K": ..., "M": ...}``.
    """
    found = {}
    for name, value in dict(features).items():
        kind = _kind(name)
        size = _last_dim(value)
        if kind is not None and size is not None:
            found.setdefault(kind, size)
    if "L" in found:
        object.__setattr__(model, ATTRIBUTE, found)
    return found


def read(model) -> dict | None:
    """The recorded ``{"L": ..., "K": ..., "M": ...}``, or `None`."""
    value = getattr(model, ATTRIBUTE, None)
    return dict(value) if value else None


def restore(model, lengths) -> None:
    """Set the record from a saved ``{"L": ..., ...}`` (``.keras`` loading)."""
    if lengths:
        object.__setattr__(model, ATTRIBUTE, {k: int(v) for k, v in dict(lengths).items()})
