"""Token classification (tagging: NER, POS): the declaration.

``labels`` hold one class per token: the first sub-token of each word
carries the word's class and every other token `IGNORE_LABEL`
(`tfpack.builders.token_classification_examples`).

>>> from tfpack import tasks
>>> tasks.get("token_classification").feature("labels").dimension
'L'
"""

from tfpack.tasks.base import IGNORE_LABEL, Feature, TaskSpec, register

__all__ = ["TOKEN_CLASSIFICATION"]

TOKEN_CLASSIFICATION = register(TaskSpec(
    name="token_classification",
    doc="one class per word, at its first sub-token",
    reads=("token_type_ids",),
    features=(
        Feature("labels", "int32", "token", "label", IGNORE_LABEL,
                "class of each token; IGNORE_LABEL off a word's first sub-token"),
    ),
    outputs={"logits": "token"},
    detect=(("labels", 1),),
))
