"""Evaluation per example, never per pack.

`tfpack.evaluation.scores` computes the reference scores in NumPy from one
entry per example (accuracy, macro F1, entity-level F1 over BIO tags, SQuAD
exact match and F1, perplexity); `tfpack.evaluation.metrics` holds the Keras
metrics that accumulate the same counts over packed batches in
``model.evaluate`` and the trainer's periodic evaluation.

Example:

>>> from tfpack.evaluation import macro_f1
>>> round(macro_f1([0, 0, 1, 2], [0, 1, 1, 2]), 4)
0.7778
"""

from tfpack.evaluation.metrics import EntityF1
from tfpack.evaluation.metrics import MacroF1
from tfpack.evaluation.metrics import Perplexity
from tfpack.evaluation.metrics import entity_counts
from tfpack.evaluation.scores import accuracy
from tfpack.evaluation.scores import entity_f1
from tfpack.evaluation.scores import entity_spans
from tfpack.evaluation.scores import macro_f1
from tfpack.evaluation.scores import normalize_answer
from tfpack.evaluation.scores import perplexity
from tfpack.evaluation.scores import squad_exact_match
from tfpack.evaluation.scores import squad_f1
from tfpack.evaluation.scores import squad_scores

__all__ = [
    "EntityF1",
    "MacroF1",
    "Perplexity",
    "accuracy",
    "entity_counts",
    "entity_f1",
    "entity_spans",
    "macro_f1",
    "normalize_answer",
    "perplexity",
    "squad_exact_match",
    "squad_f1",
    "squad_scores",
]
