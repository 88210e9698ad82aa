"""Per-example scores in NumPy/Python: the reference every packed metric must equal.

Each function takes one entry per *example* (never per pack), so the score of
a packed run is computed exactly as the score of an unpacked one:

- `accuracy` and `macro_f1` (sequence classification);
- `entity_spans` and `entity_f1`: entity-level precision, recall and F1 over
  IOB1, IOB2 and IOBES tags (typed or bare), as seqeval's default
  (non-strict) mode counts them;
- `normalize_answer`, `squad_exact_match`, `squad_f1` and `squad_scores`: the
  official SQuAD v1.1 evaluation (its normalization, maximum over the
  reference answers, percentages);
- `perplexity`: ``exp`` of the mean negative log-likelihood per target.

Example:

>>> entity_spans(["B-PER", "I-PER", "O", "I-LOC"])
[('PER', 0, 1), ('LOC', 3, 3)]
>>> entity_f1([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])["f1"]
0.0
>>> squad_scores(["the Eiffel tower"], [["Eiffel Tower", "the tower"]])
{'exact_match': 100.0, 'f1': 100.0}
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Sequence

import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import Anything, InstanceOf, Real, validate_params

_PER_EXAMPLE = Anything("one entry per example, checked below")
_TEXT = InstanceOf(str, description="a string")
_ANSWERS = Anything("reference answer strings")

__all__ = [
    "accuracy",
    "entity_f1",
    "entity_spans",
    "macro_f1",
    "normalize_answer",
    "perplexity",
    "split_tag",
    "squad_exact_match",
    "squad_f1",
    "squad_scores",
]


def _same_length(a, b, names):
    if len(a) != len(b):
        raise TfpackError(f"`{names[0]}` and `{names[1]}` must have one entry per example. "
                          f"Received: {len(a)} and {len(b)} entries")


@validate_params({"labels": _PER_EXAMPLE, "predictions": _PER_EXAMPLE})
def accuracy(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Fraction of examples whose prediction equals the label.

    >>> accuracy([0, 1, 2, 2], [0, 1, 1, 2])
    0.75
    """
    _same_length(labels, predictions, ("labels", "predictions"))
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions)) if labels.size else 0.0


@validate_params({"labels": _PER_EXAMPLE, "predictions": _PER_EXAMPLE})
def macro_f1(labels: Sequence[int], predictions: Sequence[int]) -> float:
    """Unweighted mean of the per-class F1 over the classes that occur.

    The classes are those in ``labels`` or ``predictions`` (scikit-learn's
    ``f1_score(average="macro")``); a class with no true positive scores 0.

    >>> round(macro_f1([0, 0, 1, 2], [0, 1, 1, 2]), 4)
    0.7778
    """
    _same_length(labels, predictions, ("labels", "predictions"))
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    classes = np.union1d(labels, predictions)
    if classes.size == 0:
        return 0.0
    scores = []
    for c in classes:
        tp = np.sum((labels == c) & (predictions == c))
        denominator = np.sum(labels == c) + np.sum(predictions == c)
        scores.append(2.0 * tp / denominator)
    return float(np.mean(scores))


_TAG = re.compile(r"[BIES](-.*)?|O", re.DOTALL)


def split_tag(tag) -> tuple[str, str]:
    """``(prefix, type)`` of a tag as seqeval's default mode reads it.

    The prefix is ``O``, ``B``, ``I``, ``E`` or ``S`` (IOB1, IOB2, IOE and
    IOBES tags); the type is what follows the first ``-``, and ``"_"`` for
    ``O`` and for bare ``B``/``I``/``E``/``S`` tags (as seqeval names it).

    >>> split_tag("B-PER"), split_tag("I"), split_tag("O")
    (('B', 'PER'), ('I', '_'), ('O', '_'))

    Raises:
        TfpackError: another tag (seqeval would read ``"PER"`` as a ``P``
            tag of type ``ER``).
    """
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise TfpackError("Every tag must be `O` or B/I/E/S, alone or followed by `-TYPE` "
                          f"(IOB1, IOB2, IOBES). Received: tag={tag!r}")
    return tag[0], tag[2:] or "_"


def chunk_start(previous: str, prefix: str, previous_type: str, kind: str) -> bool:
    """Whether a chunk starts at a word (seqeval's ``start_of_chunk``)."""
    return (prefix in ("B", "S") or (previous in ("E", "S", "O") and prefix in ("E", "I"))
            or (prefix != "O" and previous_type != kind))


def chunk_end(previous: str, prefix: str, previous_type: str, kind: str) -> bool:
    """Whether the chunk of the previous word ends before this one (``end_of_chunk``)."""
    return (previous in ("E", "S") or (previous in ("B", "I") and prefix in ("B", "S", "O"))
            or (previous != "O" and previous_type != kind))


@validate_params({"tags": Anything("one example's tags, read by split_tag")})
def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities ``(type, first, last)`` (inclusive) of one example's tags.

    Read as seqeval's default mode (``seqeval.metrics.sequence_labeling.
    get_entities``) reads IOB1, IOB2 and IOBES tags, typed (``B-PER``) or
    bare (``B``, type ``"_"``): an entity starts at ``B``/``S``, at
    ``I``/``E`` after ``O``, ``E`` or ``S``, or where the type changes, and
    ends after ``E``/``S``, before ``B``/``S``/``O`` or where the type changes.

    >>> entity_spans(["I-PER", "B-PER", "I-LOC", "I-LOC"])
    [('PER', 0, 0), ('PER', 1, 1), ('LOC', 2, 3)]
    >>> entity_spans(["S-PER", "B-LOC", "E-LOC", "O", "B", "I"])
    [('PER', 0, 0), ('LOC', 1, 2), ('_', 4, 5)]
    """
    spans = []
    previous, previous_type, begin = "O", "_", 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, kind = split_tag(tag)
        if chunk_end(previous, prefix, previous_type, kind):
            spans.append((previous_type, begin, i - 1))
        if chunk_start(previous, prefix, previous_type, kind):
            begin = i
        previous, previous_type = prefix, kind
    return spans


@validate_params({"gold": _PER_EXAMPLE, "predicted": _PER_EXAMPLE})
def entity_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """Entity-level micro precision, recall and F1 over examples (seqeval's default).

    Equal to ``seqeval.metrics.f1_score(gold, predicted)`` (default mode) for
    every tag scheme it reads (`entity_spans`). An entity counts as found
    only when type, first and last word all match.

    Args:
        gold: per example, the true tag of every word.
        predicted: per example, the predicted tag of every word.

    Returns:
        ``{"precision", "recall", "f1", "true_positives", "gold", "predicted"}``.

    >>> entity_f1([["B-PER", "O", "B-LOC"]], [["B-PER", "O", "B-PER"]])["f1"]
    0.5
    """
    _same_length(gold, predicted, ("gold", "predicted"))
    tp = n_gold = n_predicted = 0
    for g, p in zip(gold, predicted):
        _same_length(g, p, ("gold", "predicted"))
        g_spans, p_spans = set(entity_spans(g)), set(entity_spans(p))
        tp += len(g_spans & p_spans)
        n_gold += len(g_spans)
        n_predicted += len(p_spans)
    return _f1_result(tp, n_gold, n_predicted)


def _f1_result(tp, n_gold, n_predicted) -> dict:
    precision = tp / n_predicted if n_predicted else 0.0
    recall = tp / n_gold if n_gold else 0.0
    # seqeval's formula (not 2 tp / (gold + predicted)), so the floats are equal too.
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "true_positives": tp, "gold": n_gold, "predicted": n_predicted}


@validate_params({"text": _TEXT})
def normalize_answer(text: str) -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles, single spaces.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


@validate_params({"prediction": _TEXT, "answers": _ANSWERS})
def squad_exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalized prediction equals a normalized answer, else 0.0."""
    return float(max(normalize_answer(prediction) == normalize_answer(a) for a in answers))


def _token_f1(prediction: str, answer: str) -> float:
    predicted = normalize_answer(prediction).split()
    truth = normalize_answer(answer).split()
    common = collections.Counter(predicted) & collections.Counter(truth)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(truth)
    return 2 * precision * recall / (precision + recall)


@validate_params({"prediction": _TEXT, "answers": _ANSWERS})
def squad_f1(prediction: str, answers: Sequence[str]) -> float:
    """The best token-overlap F1 of the prediction against the answers.

    >>> round(squad_f1("Paris France", ["Paris"]), 4)
    0.6667
    """
    return max(_token_f1(prediction, a) for a in answers)


@validate_params({"predictions": _PER_EXAMPLE, "answers": _PER_EXAMPLE})
def squad_scores(predictions: Sequence[str], answers: Sequence[Sequence[str]]) -> dict:
    """SQuAD v1.1 ``exact_match`` and ``f1`` in percent, averaged over questions.

    Args:
        predictions: one answer text per question.
        answers: per question, the reference answers (at least one each).
    """
    _same_length(predictions, answers, ("predictions", "answers"))
    if any(not a for a in answers):
        raise TfpackError("Every question must have at least one reference answer. "
                          "Received: an empty list in `answers`")
    n = max(len(predictions), 1)
    return {"exact_match": 100.0 * sum(map(squad_exact_match, predictions, answers)) / n,
            "f1": 100.0 * sum(map(squad_f1, predictions, answers)) / n}


@validate_params({"negative_log_likelihood": Real(0),
                  "count": Real(0, None, closed="neither")})
def perplexity(negative_log_likelihood: float, count: float) -> float:
    """``exp(negative_log_likelihood / count)``: the perplexity of ``count`` targets.

    >>> perplexity(2 * math.log(4.0), 2)
    4.0
    """
    return math.exp(negative_log_likelihood / count)
