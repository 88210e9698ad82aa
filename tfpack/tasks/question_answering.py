"""Extractive question answering (a span per sequence): the declaration.

``start_positions`` and ``end_positions`` are token indices inside the
example; packing adds the sequence's offset in the pack (``shift``), so they
index the pack, and an unanswerable window points at its own ``[CLS]``.

>>> from tfpack import tasks
>>> tasks.get("question_answering").feature("start_positions").shift
True
"""

from tfpack.tasks.base import Feature, TaskSpec, register

__all__ = ["QUESTION_ANSWERING"]

QUESTION_ANSWERING = register(TaskSpec(
    name="question_answering",
    doc="extractive QA: start and end token of the answer in each sequence",
    reads=("token_type_ids",),
    features=(
        Feature("start_positions", "int32", "sequence", "label", 0,
                "answer's first token (pack index; the sequence's [CLS] if none)",
                shift=True),
        Feature("end_positions", "int32", "sequence", "label", 0,
                "answer's last token (pack index; the sequence's [CLS] if none)",
                shift=True),
    ),
    outputs={"start_logits": "token", "end_logits": "token"},
    detect=(("start_positions", 0),),
))
