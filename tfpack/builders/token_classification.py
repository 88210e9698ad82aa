"""Token-classification examples (NER, POS): word labels aligned to sub-word tokens.

Each example is ``[CLS] w1 w2 ... [SEP]`` in WordPiece ids; the first
sub-token of every word carries the word's label and every other token
(``[CLS]``, ``[SEP]``, the rest of a word's sub-tokens) gets ``IGNORE_LABEL``
(-100), so the loss and the metrics count words, not sub-tokens. Packing
concatenates ``labels`` like ``input_ids`` (the ``token_classification``
task). `word_predictions` reads a model's per-token outputs back per word.

Worked example (bert-base-uncased vocabulary)::

    words   ["Embeddings", "help"]            tags [1, 0]
    tokens  [CLS] em ##bed ##ding ##s help [SEP]
    labels  -100  1  -100  -100  -100  0   -100
    word_starts [1, 5]

>>> examples = token_classification_examples([["Embeddings", "help"]], [[1, 0]])
>>> x = next(iter(examples.dataset))
>>> x["labels"].numpy().tolist(), examples.word_starts
([-100, 1, -100, -100, -100, 0, -100], [[1, 5]])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.features import IGNORE_LABEL

__all__ = ["TaggingExamples", "token_classification_examples", "word_predictions"]


class TaggingExamples(NamedTuple):
    """What `token_classification_examples` returns.

    Attributes:
        dataset: ``{"input_ids": int32 [n], "labels": int32 [n]}`` per
            example, in input order (``labels`` only when tags were given).
        word_starts: per example, the token index of each word's first
            sub-token; -1 for a word that was cut off (``max_length``) or has
            no token.
    """

    dataset: tf.data.Dataset
    word_starts: list


def token_classification_examples(words: list[list[str]], tags: list[list[int]] | None = None,
                                  *, max_length: int = 128, vocab_path: str | None = None,
                                  lower_case: bool = True) -> TaggingExamples:
    """Tokenize pre-split words and align their tags to the first sub-token.

    Args:
        words: per example, its words.
        tags: per example, one class id per word; ``None`` for inference.
        max_length: longest example; words that do not fit before the final
            ``[SEP]`` are cut (their ``word_starts`` are -1).
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default).

    Returns:
        A `TaggingExamples`.
    """
    from tfpack.builders.bert import load_vocab
    from tfpack.builders.wordpiece import wordpiece_with_offsets

    if tags is not None and (len(tags) != len(words) or any(
            len(t) != len(w) for t, w in zip(tags, words))):
        raise TfpackError("`tags` must have one class per word of every example. Received: "
                          f"{len(words)} examples, {None if tags is None else len(tags)} tag "
                          "lists (or a tag list of another length than its words)")
    if not words:
        raise TfpackError("`words` must not be empty. Received: words=[]")
    if not isinstance(max_length, int) or max_length < 3:
        raise TfpackError(f"`max_length` must be an integer of at least 3. "
                          f"Received: max_length={max_length!r}")
    vocab = load_vocab(vocab_path)
    cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")
    flat = [w for example in words for w in example]
    pieces, _ = wordpiece_with_offsets(flat, vocab_path=vocab_path, lower_case=lower_case)
    ids, labels, starts, cursor = [], [], [], 0
    for i, example in enumerate(words):
        tokens, token_labels, example_starts = [cls_id], [IGNORE_LABEL], []
        for j in range(len(example)):
            piece = pieces[cursor + j]
            if not piece or len(tokens) + len(piece) > max_length - 1:
                example_starts.append(-1)
                continue
            example_starts.append(len(tokens))
            tokens += piece
            first = IGNORE_LABEL if tags is None else int(tags[i][j])
            token_labels += [first] + [IGNORE_LABEL] * (len(piece) - 1)
        cursor += len(example)
        ids.append(tokens + [sep_id])
        labels.append(token_labels + [IGNORE_LABEL])
        starts.append(example_starts)
    columns = {"input_ids": tf.ragged.constant(ids, dtype=tf.int32)}
    if tags is not None:
        columns["labels"] = tf.ragged.constant(labels, dtype=tf.int32)
    dataset = tf.data.Dataset.range(len(ids)).map(
        lambda i: {name: column[i] for name, column in columns.items()})
    return TaggingExamples(dataset, starts)


def word_predictions(token_logits, word_starts) -> list[np.ndarray]:
    """Per example, the predicted class of every word (-1 for words without a token).

    Args:
        token_logits: per example, ``[n_i, num_classes]`` logits of its tokens
            (``tfpack.predict``'s per-token output, or a served model's).
        word_starts: `TaggingExamples.word_starts`.

    >>> logits = [np.array([[0., 0.], [1., 3.], [2., 0.], [0., 0.]])]
    >>> word_predictions(logits, [[1, 2, -1]])[0].tolist()
    [1, 0, -1]
    """
    if len(token_logits) != len(word_starts):
        raise TfpackError("`token_logits` and `word_starts` must have one entry per example. "
                          f"Received: {len(token_logits)} and {len(word_starts)}")
    result = []
    for logits, starts in zip(token_logits, word_starts):
        classes = np.argmax(np.asarray(logits), axis=-1)
        starts = np.asarray(starts, np.int64)
        result.append(np.where(starts >= 0, classes[np.maximum(starts, 0)], -1))
    return result
