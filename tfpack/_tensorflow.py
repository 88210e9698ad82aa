"""TensorFlow for the parts of tfpack that need it, or one clear error where it is absent.

The model side of tfpack (`tfpack.layers`, `tfpack.models`, `tfpack.testing`,
`tfpack.evaluation`, and `tfpack.training`'s optimizer, batch rules and
exactness callback) runs on Keras 3 with any backend, so Keras on JAX needs no
TensorFlow installed. What reads or writes tf.data pipelines, TFRecords or
SavedModels (`tfpack.data`, `tfpack.formats`, `tfpack.builders`,
`tfpack.inference`, `tfpack.export`, `tfpack.training.Trainer` and its input
functions) asks for TensorFlow here first, so that without it the call (or the
import) raises one `TfpackError` naming what needs TensorFlow, instead of an
ImportError from deep inside.

Example:

>>> from tfpack import _tensorflow
>>> _tensorflow.require("tfpack.data").__name__
'tensorflow'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tfpack.errors import TfpackError

__all__ = ["TensorFlowMissing", "require", "on_first_use"]


class TensorFlowMissing(TfpackError, ImportError):
    """A part of tfpack that needs TensorFlow was used where TensorFlow is not
    installed (a `TfpackError`, and an `ImportError` for code that imports
    optional parts under ``except ImportError``)."""


def require(what: str) -> ModuleType:
    """The ``tensorflow`` module, imported for ``what`` (the tfpack part that needs
    it); `TensorFlowMissing` naming ``what`` where TensorFlow cannot be imported."""
    try:
        return importlib.import_module("tensorflow")
    except ImportError as error:
        raise TensorFlowMissing(
            f"{what} needs TensorFlow, which cannot be imported here: install it "
            "(`pip install tensorflow`); Keras on another backend runs tfpack.layers, "
            "tfpack.models, tfpack.testing, tfpack.evaluation and tfpack.packing without "
            f"it. Received: {error}"
        ) from None


def on_first_use(namespace: dict, modules: dict[str, str]):
    """``(__getattr__, __dir__)`` for a package whose names in ``modules`` (name ->
    the package's module defining it) need TensorFlow: each is imported on first use,
    after `require`, so the rest of the package imports without TensorFlow.

    ``namespace``: the package's ``globals()`` (its ``__name__`` and ``__all__``).

    >>> namespace = {"__name__": "tfpack.training", "__all__": ["Trainer"]}
    >>> getattr_, dir_ = on_first_use(namespace, {"Trainer": "loop"})
    >>> getattr_("Trainer").__name__, dir_()
    ('Trainer', ['Trainer', '__all__', '__name__'])
    """
    package = namespace["__name__"]

    def __getattr__(name):
        if name in modules:
            require(f"{package}.{name}")
            return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(namespace["__all__"]))

    return __getattr__, __dir__
