"""Sequence classification (one class per sequence): the declaration.

>>> from tfpack import tasks
>>> tasks.get("classification").feature("labels").dimension
'K'
"""

from tfpack.tasks.base import Feature, TaskSpec, register

__all__ = ["CLASSIFICATION"]

CLASSIFICATION = register(TaskSpec(
    name="classification",
    doc="one class per sequence",
    reads=("token_type_ids",),
    features=(
        Feature("labels", "int32", "sequence", "label", 0, "class of each sequence"),
    ),
    outputs={"logits": "sequence"},
    detect=(("labels", 0),),
))
