"""tfpack: sequence packing without cross-contamination for TensorFlow and Keras.

Subpackages, top to bottom of the data flow (see DESIGN.md):

- `tfpack.packing`: lengths -> histogram -> `PackingPlan` (numpy/scipy only).
- `tfpack.data`: the tf.data transform: apply plans to `tf.data` pipelines.
- `tfpack.builders`: example builders (BERT pre-training, causal LM, SFT,
  classification, embedding, tagging, extractive QA).
- `tfpack.formats`: Google BERT TFRecords in, the packed-output format out.
- `tfpack.engines`: ``tfpack pack`` on one machine or on Apache Beam.
- `tfpack.layers`, `tfpack.models`: Keras 3 layers and models for packed inputs.
- `tfpack.tasks`: task declarations: each task's features and outputs, and
  how they pack (the open feature contract; no TensorFlow).
- `tfpack.testing`: equivalence checks for packed models.
- `tfpack.inference`: `tfpack.predict`: per-example outputs computed on packs.
- `tfpack.training`: LAMB for packing, batch rules, a distributed training loop.
- `tfpack.evaluation`: per-example scores and the Keras metrics that compute
  them on packed batches (macro F1, entity F1, SQuAD EM/F1, perplexity).
- `tfpack.export`: SavedModels that serve packed and unpacked inputs.

Subpackages are imported on first use, so `import tfpack` and
`tfpack.packing` never import TensorFlow.

Example:

>>> import tfpack
>>> plan = tfpack.packing.plan(
...     tfpack.datasets.histogram("wikipedia_512"), max_length=512,
...     max_sequences_per_pack=3, algorithm="spfhp")
>>> round(plan.metrics["efficiency"], 4)
0.8944
"""

import importlib

from tfpack.version import __version__

__all__ = [
    "__version__",
    "builders",
    "data",
    "engines",
    "datasets",
    "errors",
    "evaluation",
    "export",
    "formats",
    "inference",
    "layers",
    "models",
    "packing",
    "predict",
    "tasks",
    "testing",
    "training",
]

_SUBPACKAGES = frozenset(__all__) - {"__version__", "predict"}


def __getattr__(name):
    if name == "predict":  # `tfpack.predict` (imports TensorFlow on first use).
        return importlib.import_module("tfpack.inference").predict
    if name in _SUBPACKAGES:
        return importlib.import_module(f"tfpack.{name}")
    raise AttributeError(f"module 'tfpack' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
