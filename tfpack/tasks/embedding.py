"""Sentence embeddings (one vector per sequence): the declaration.

``labels`` [K] are group ids for contrastive fine-tuning (sequences of a
group are each other's positives); inference reads no label. Selected by
name only (``roles="embedding"``): its examples look like classification's.

>>> from tfpack import tasks
>>> tasks.get("embedding").outputs
{'embeddings': 'sequence'}
"""

from tfpack.tasks.base import Feature, TaskSpec, register

__all__ = ["EMBEDDING"]

EMBEDDING = register(TaskSpec(
    name="embedding",
    doc="one embedding per sequence; contrastive fine-tuning on group ids",
    reads=("token_type_ids",),
    features=(
        Feature("labels", "int32", "sequence", "label", 0,
                "group of each sequence (contrastive positives share one)"),
    ),
    outputs={"embeddings": "sequence"},
    detect=None,
))
