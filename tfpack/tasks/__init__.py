"""Task declarations: each task's features and outputs, one file each.

Importing this package registers the built-in tasks, in this order:
``pretraining`` (preset ``bert``), ``classification``, ``causal_lm`` (preset
``sft``), ``embedding``, ``token_classification``, ``question_answering``,
``preference``, ``seq2seq_lm`` (pair packs). A new task is one file here
declaring a `TaskSpec` with `register`, plus its import line below; see `tfpack.tasks.base` and
docs/model.md ("Adding a task").

Example:

>>> from tfpack import tasks
>>> tasks.names()[:3]
('pretraining', 'classification', 'causal_lm')
>>> tasks.get("causal_lm").outputs
{'logits': 'token'}
"""

from tfpack.tasks.base import (
    BACKBONE_OUTPUTS,
    CORE_FEATURES,
    IGNORE_LABEL,
    PACKINGS,
    SOURCES,
    TOKEN_PACKINGS,
    Feature,
    Preset,
    TaskSpec,
    detect,
    get,
    names,
    preset,
    preset_names,
    register,
    specs,
)
from tfpack.tasks import pretraining, classification, causal_lm  # noqa: E402,F401  (register)
from tfpack.tasks import embedding, token_classification, question_answering  # noqa: E402,F401,I001
from tfpack.tasks import preference, seq2seq  # noqa: E402,F401  (register)

__all__ = [
    "BACKBONE_OUTPUTS",
    "CORE_FEATURES",
    "IGNORE_LABEL",
    "PACKINGS",
    "SOURCES",
    "TOKEN_PACKINGS",
    "Feature",
    "Preset",
    "TaskSpec",
    "detect",
    "get",
    "names",
    "preset",
    "preset_names",
    "register",
    "specs",
]
