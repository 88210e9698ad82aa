"""Extractive-QA examples: long contexts split into windows, answers mapped back to text.

Every question/context pair becomes one or more *windows*
``[CLS] question [SEP] context[a:b] [SEP]`` of at most ``max_length`` tokens
(with ``tokenizer=``, the model's own start, separator and end tokens)
(``token_type_ids`` 0 for the question part, 1 for the context part);
consecutive windows overlap by ``stride`` context tokens, so an answer near a
window's edge is whole in the next one. Each window keeps, for its context
tokens, their character spans in the context. With answers, every window gets
``start_positions`` and ``end_positions`` (scalars, token indices in the
window; both 0, its ``[CLS]``, when the answer is not wholly inside it);
packing shifts them by the window's offset in the pack (the
``question_answering`` task).

`best_answers` is the post-processing: it scores every span ``start <= end``
of context tokens (at most ``max_answer_length`` tokens, among the
``n_best`` best starts and ends) by ``start_logit + end_logit`` in every
window of a question and returns the text of the best one.

Worked example (``max_length=14``, ``stride=2``): the question ``who wrote
it ?`` (4 tokens) leaves 14 - 4 - 3 = 7 context tokens per window, so windows
start every 7 - 2 = 5 context tokens; the answer (context tokens 4..6) is
whole only in the first window, at positions 6 + 4 = 10 to 12::

    context tokens 0..9 -> windows [0, 7) and [5, 10)
    start/end positions    (10, 12)    and (0, 0)

>>> examples = question_answering_examples(
...     ["who wrote it?"], ["It was written by Ada Lovelace in 1843."],
...     [("Ada Lovelace", 18)], max_length=14, stride=2)
>>> [(w.question, w.start, w.end) for w in examples.windows]
[(0, 0, 7), (0, 5, 10)]
>>> [(int(x["start_positions"]), int(x["end_positions"])) for x in examples.dataset]
[(10, 12), (0, 0)]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, InstanceOf, Integer,
                           declare_fields, validate_params)

__all__ = ["QAExamples", "QAWindow", "best_answers", "question_answering_examples"]


@declare_fields({"question": Integer(0), "start": Integer(0), "end": Integer(0),
                 "context_offset": Integer(0),
                 "spans": InstanceOf(list, description="a list of (begin, end) spans"),
                 "length": [None, Integer(1)]})
class QAWindow(NamedTuple):
    """One window of a context.

    Attributes:
        question: index of its question.
        start, end: the context tokens ``[start, end)`` it holds.
        context_offset: index of its first context token in the window.
        spans: character span ``(begin, end)`` in the context of each of its
            context tokens.
        length: its number of tokens (what its logits must have); None:
            unchecked.
    """

    question: int
    start: int
    end: int
    context_offset: int
    spans: list
    length: int | None = None


@declare_fields({"dataset": InstanceOf(tf.data.Dataset),
                 "windows": InstanceOf(list, description="a list of QAWindow")})
class QAExamples(NamedTuple):
    """What `question_answering_examples` returns.

    Attributes:
        dataset: per window, ``input_ids``, ``token_type_ids`` (int32 [n])
            and, with answers, ``start_positions``, ``end_positions`` (int32
            scalars), in window order.
        windows: one `QAWindow` per element of ``dataset``.
    """

    dataset: tf.data.Dataset
    windows: list


def _check(questions, contexts, answers):
    for name, value in (("questions", questions), ("contexts", contexts)):
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                isinstance(v, str) for v in value):
            raise TfpackError(f"`{name}` must be a list of strings. "
                              f"Received: {name}={value!r:.80}")
    if len(questions) != len(contexts) or (answers is not None
                                           and len(answers) != len(questions)):
        raise TfpackError(
            "`questions`, `contexts` (and `answers`) must have one entry per question. "
            f"Received: {len(questions)}, {len(contexts)}, "
            f"{None if answers is None else len(answers)}")
    if not questions:
        raise TfpackError("`questions` must not be empty. Received: questions=[]")
    for q, answer in enumerate(answers or ()):
        _check_answer(q, answer, contexts[q])


def _check_answer(q, answer, context):
    """An answer is ``(text, start)`` with ``context[start:start + len(text)] == text``."""
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise TfpackError("Every answer must be (answer_text, character_start). "
                          f"Received: answers[{q}]={answer!r:.80}")
    text, first = answer
    if not isinstance(text, str) or not text:
        raise TfpackError("An answer's text must be a non-empty string. "
                          f"Received: answers[{q}]={answer!r:.80}")
    if not isinstance(first, (int, np.integer)) or isinstance(first, bool) or first < 0:
        raise TfpackError("An answer's character start must be a non-negative integer. "
                          f"Received: answers[{q}]={answer!r:.80}")
    if first + len(text) > len(context):
        raise TfpackError(
            f"An answer must lie inside its context. Received: answers[{q}]={answer!r:.80} "
            f"ends at character {first + len(text)} of a context of {len(context)}")
    if context[first:first + len(text)] != text:
        raise TfpackError(
            "An answer's character start must hold the answer text in its context. "
            f"Received: answers[{q}]={answer!r:.80}, where the context holds "
            f"{context[first:first + len(text)]!r:.80}")


@validate_params({
    "questions": Anything("a list of strings, checked below"),
    "contexts": Anything("a list of strings, checked below"),
    "answers": Anything("None or (text, character start) per question, checked below"),
    "max_length": Integer(1), "stride": Integer(0), "max_question_length": Integer(1),
    "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
})
def question_answering_examples(questions: list[str], contexts: list[str],
                                answers: list[tuple[str, int]] | None = None, *,
                                max_length: int = 384, stride: int = 128,
                                max_question_length: int = 64, tokenizer=None,
                                vocab_path: str | None = None,
                                lower_case: bool = True) -> QAExamples:
    """Tokenize question/context pairs into overlapping windows.

    Args:
        questions: the questions.
        contexts: one context per question.
        answers: per question ``(answer_text, character_start)`` in its
            context (SQuAD's ``answer_start``; the context must hold the text
            there), or ``None`` for inference.
        max_length: longest window.
        stride: context tokens shared by consecutive windows.
        max_question_length: questions are cut to this many tokens.
        tokenizer: the model's own tokenizer (`tfpack.builders.text_tokenizer`)
            with character offsets (keras-hub WordPiece, byte-pair and
            SentencePiece tokenizers, a Hugging Face ``tokenizers.Tokenizer``);
            windows are ``start question separator context end`` in its ids.
            None: the WordPiece vocabulary below.
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default), without ``tokenizer``.

    Returns:
        A `QAExamples`.

    Raises:
        TfpackError: an answer whose start does not hold its text, lies past
            its context or is negative; a tokenizer without offsets.
    """
    from tfpack.builders.tokenizers import builder_tokenizer

    _check(questions, contexts, answers)
    tokenizer = builder_tokenizer(tokenizer, vocab_path, lower_case)
    start, separator, end = (list(tokenizer.start_ids), list(tokenizer.separator_ids),
                             list(tokenizer.end_ids))
    context_ids, context_spans = tokenizer.with_offsets(list(contexts))
    question_ids = tokenizer(list(questions))
    rows, windows = [], []
    for q, (question, ids, spans) in enumerate(zip(question_ids, context_ids, context_spans)):
        question = question[:max_question_length]
        offset = len(start) + len(question) + len(separator)
        room = max_length - offset - len(end)
        if room <= stride:
            raise TfpackError(
                "`max_length` must leave more than `stride` context tokens after "
                "the question and the special tokens. Received: "
                f"max_length={max_length!r}, stride={stride}, question {q} of "
                f"{len(question)} tokens")
        begin = 0
        while True:
            stop = min(begin + room, len(ids))
            tokens = start + question + separator + ids[begin:stop] + end
            row = {"input_ids": tokens,
                   "token_type_ids": [0] * offset + [1] * (stop - begin + len(end))}
            if answers is not None:
                row["start_positions"], row["end_positions"] = _positions(
                    answers[q], spans, begin, stop, offset)
            rows.append(row)
            windows.append(QAWindow(q, begin, stop, offset, spans[begin:stop], len(tokens)))
            if stop >= len(ids):
                break
            begin += room - stride
    columns = {name: (tf.ragged.constant([r[name] for r in rows], dtype=tf.int32,
                                         ragged_rank=1)
                      if name in ("input_ids", "token_type_ids")
                      else tf.constant([r[name] for r in rows], tf.int32))
               for name in rows[0]}
    dataset = tf.data.Dataset.range(len(rows)).map(
        lambda i: {name: column[i] for name, column in columns.items()})
    return QAExamples(dataset, windows)


def _positions(answer, spans, begin, end, offset):
    """Token positions of the answer in the window, or (0, 0)."""
    text, first = answer
    last = first + len(text)
    inside = [j for j in range(begin, end) if spans[j][1] > first and spans[j][0] < last]
    if not inside or spans[begin][0] > first or spans[end - 1][1] < last:
        return 0, 0
    return offset + inside[0] - begin, offset + inside[-1] - begin


@validate_params({
    "start_logits": Anything("logits per window, checked below"),
    "end_logits": Anything("logits per window, checked below"),
    "windows": Anything("QAExamples.windows"), "contexts": Anything("the contexts"),
    "n_best": Integer(1), "max_answer_length": Integer(1),
})
def best_answers(start_logits, end_logits, windows, contexts, *, n_best: int = 20,
                 max_answer_length: int = 30) -> list[str]:
    """The best answer text of every question, over all its windows.

    Args:
        start_logits, end_logits: per window (in `QAExamples.windows` order),
            the logits of its tokens (``tfpack.predict``'s per-token outputs).
        windows: `QAExamples.windows`.
        contexts: the contexts the windows were made from.
        n_best: starts and ends considered per window (the highest logits).
        max_answer_length: longest answer, in tokens.

    Returns:
        One string per question (``""`` when no window has a valid span).

    >>> examples = question_answering_examples(["q"], ["one two three"], max_length=12,
    ...                                        stride=0)
    >>> start = [np.array([0., 0., 0., 1., 5., 0., 0.])]
    >>> end = [np.array([0., 0., 0., 0., 1., 4., 0.])]
    >>> best_answers(start, end, examples.windows, ["one two three"])
    ['two three']
    """
    if not (len(start_logits) == len(end_logits) == len(windows)):
        raise TfpackError("`start_logits`, `end_logits` and `windows` must have one entry per "
                          f"window. Received: {len(start_logits)}, {len(end_logits)}, "
                          f"{len(windows)}")
    best = {}
    for w, (starts, ends, window) in enumerate(zip(start_logits, end_logits, windows)):
        n = window.end - window.start
        starts, ends = _window_logits(starts, w, window), _window_logits(ends, w, window)
        starts = starts[window.context_offset:window.context_offset + n]
        ends = ends[window.context_offset:window.context_offset + n]
        for i in np.argsort(-starts, kind="stable")[:n_best]:
            for j in np.argsort(-ends, kind="stable")[:n_best]:
                if j < i or j - i + 1 > max_answer_length:
                    continue
                score = float(starts[i] + ends[j])
                if window.question not in best or score > best[window.question][0]:
                    best[window.question] = (score, window.spans[i][0], window.spans[j][1])
    return [contexts[q][best[q][1]:best[q][2]] if q in best else ""
            for q in range(len(contexts))]


def _window_logits(logits, w, window) -> np.ndarray:
    """One window's logits, checked: one finite number per token of the window."""
    logits = np.asarray(logits)
    need = window.context_offset + window.end - window.start
    if logits.ndim != 1 or not np.issubdtype(logits.dtype, np.number):
        raise TfpackError("Every window's logits must be one number per token. "
                          f"Received: shape {logits.shape} ({logits.dtype}) for window {w}")
    if (window.length is not None and len(logits) != window.length) or len(logits) < need:
        raise TfpackError(
            "Every window's logits must have one value per token of the window. Received: "
            f"{len(logits)} logits for window {w} of "
            f"{window.length if window.length is not None else f'at least {need}'} tokens")
    if not np.all(np.isfinite(logits)):
        raise TfpackError(f"Logits must be finite. Received: NaN or infinity in window {w}")
    return logits
