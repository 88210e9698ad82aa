"""Token-classification examples (NER, POS): word labels aligned to sub-word tokens.

Each example is ``[CLS] w1 w2 ... [SEP]`` in WordPiece ids (with
``tokenizer=``, the model's own start and end tokens around its tokens of
the sentence ``" ".join(words)``); the first
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

import dataclasses
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, InstanceOf, Integer,
                           declare_fields, validate_params)
from tfpack.features import IGNORE_LABEL

__all__ = ["TaggingExamples", "token_classification_examples", "word_predictions"]


@declare_fields({"dataset": InstanceOf(tf.data.Dataset),
                 "word_starts": InstanceOf(list, description="token indices per example")})
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


def _check_words(words, tags, num_classes):
    if isinstance(words, str) or not isinstance(words, (list, tuple)) or not words:
        raise TfpackError("`words` must be a non-empty list of examples, each a list of words. "
                          f"Received: words={words!r:.80}")
    for i, example in enumerate(words):
        if isinstance(example, str) or not isinstance(example, (list, tuple)) or not all(
                isinstance(w, str) for w in example):
            raise TfpackError(
                "`words` must be a list of examples, each a list of word strings (a flat "
                f"list of words would be read as characters). Received: words[{i}]="
                f"{example!r:.80}")
    if tags is None:
        return
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)) or len(tags) != len(words):
        raise TfpackError("`tags` must have one list of classes per example. Received: "
                          f"{len(words)} examples and tags={tags!r:.80}")
    for i, (example, example_tags) in enumerate(zip(words, tags)):
        if not isinstance(example_tags, (list, tuple, np.ndarray)) or (
                len(example_tags) != len(example)):
            raise TfpackError("`tags` must have one class per word of every example. "
                              f"Received: tags[{i}]={example_tags!r:.80} for "
                              f"{len(example)} words")
        for j, tag in enumerate(example_tags):
            if not isinstance(tag, (int, np.integer)) or isinstance(tag, bool) or (
                    tag != IGNORE_LABEL and (tag < 0 or (num_classes is not None
                                                         and tag >= num_classes))):
                bound = "" if num_classes is None else f", below num_classes={num_classes}"
                raise TfpackError(
                    f"Every tag must be a class id (an integer >= 0{bound}; "
                    f"{IGNORE_LABEL} leaves the word out of the loss). "
                    f"Received: tags[{i}][{j}]={tag!r}")


def _word_tokens(tokenizer, words):
    """Per example, per word, its token ids (the model's tokenization of the sentence)."""
    if tokenizer.offsets is None:
        # Without offsets each word is tokenized alone (as WordPiece would).
        flat = tokenizer([w for example in words for w in example])
        it = iter(flat)
        return [[next(it) for _ in example] for example in words]
    texts, spans = [], []
    for example in words:
        begins = np.cumsum([0] + [len(w) + 1 for w in example])
        texts.append(" ".join(example))
        spans.append([(int(b), int(b) + len(w)) for b, w in zip(begins, example)])
    ids, offsets = tokenizer.with_offsets(texts)
    result = []
    for row, row_offsets, word_spans in zip(ids, offsets, spans):
        per_word = [[] for _ in word_spans]
        # A token belongs to the first word it overlaps; a token over spaces alone
        # (a lone SentencePiece "▁") goes with the next word.
        pending = []
        for token, (a, b) in zip(row, row_offsets):
            owner = next((k for k, (ws, we) in enumerate(word_spans)
                          if a < we and b > ws), None)
            if owner is None:
                pending.append(token)
                continue
            per_word[owner] += pending + [token]
            pending = []
        if pending and per_word:
            per_word[-1] += pending
        result.append(per_word)
    return result


@validate_params({
    "words": Anything("lists of words, checked below"),
    "tags": Anything("None or one class id per word, checked below"),
    "max_length": Integer(1), "num_classes": [None, Integer(1)],
    "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
})
def token_classification_examples(words: list[list[str]], tags: list[list[int]] | None = None,
                                  *, max_length: int = 128, num_classes: int | None = None,
                                  tokenizer=None, vocab_path: str | None = None,
                                  lower_case: bool = True) -> TaggingExamples:
    """Tokenize pre-split words and align their tags to the first sub-token.

    Args:
        words: per example, its words (a list of lists of strings).
        tags: per example, one class id per word (``IGNORE_LABEL``, -100,
            leaves a word out of the loss); ``None`` for inference.
        max_length: longest example; words that do not fit before the end
            tokens are cut (their ``word_starts`` are -1).
        num_classes: when given, every tag must be below it (a larger one
            gives a NaN loss).
        tokenizer: the model's own tokenizer (`tfpack.builders.text_tokenizer`);
            with character offsets (keras-hub and Hugging Face tokenizers) the
            words are tokenized as the sentence ``" ".join(words)`` and each
            token goes to the word it overlaps; a callable without offsets
            tokenizes each word alone. None: the WordPiece vocabulary below.
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default), without ``tokenizer``.

    Returns:
        A `TaggingExamples`.

    Raises:
        TfpackError: a string where a list of words is expected, tags of
            another length than their words, a tag that is not a class id.
    """
    from tfpack.builders.tokenizers import builder_tokenizer, special_ids

    _check_words(words, tags, num_classes)
    if tokenizer is None:
        from tfpack.builders.tokenizers import wordpiece_text_tokenizer

        # BERT's pre-split words are each tokenized alone (Hugging Face's
        # is_split_into_words): a word never merges with its neighbour.
        tokenizer = dataclasses.replace(
            wordpiece_text_tokenizer(vocab_path, lower_case=lower_case), offsets=None)
    else:
        tokenizer = builder_tokenizer(tokenizer, vocab_path, lower_case)
    start, end = special_ids(tokenizer, max_length)
    ids, labels, starts = [], [], []
    for i, (example, pieces) in enumerate(zip(words, _word_tokens(tokenizer, words))):
        tokens, token_labels, example_starts = list(start), [IGNORE_LABEL] * len(start), []
        full = False
        for j, piece in enumerate(pieces):
            full = full or len(tokens) + len(piece) > max_length - len(end)
            if not piece or full:
                example_starts.append(-1)
                continue
            example_starts.append(len(tokens))
            tokens += piece
            first = IGNORE_LABEL if tags is None else int(tags[i][j])
            token_labels += [first] + [IGNORE_LABEL] * (len(piece) - 1)
        ids.append(tokens + end)
        labels.append(token_labels + [IGNORE_LABEL] * len(end))
        starts.append(example_starts)
    columns = {"input_ids": tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)}
    if tags is not None:
        columns["labels"] = tf.ragged.constant(labels, dtype=tf.int32, ragged_rank=1)
    dataset = tf.data.Dataset.range(len(ids)).map(
        lambda i: {name: column[i] for name, column in columns.items()})
    return TaggingExamples(dataset, starts)


@validate_params({"token_logits": Anything("[tokens, classes] per example, checked below"),
                  "word_starts": Anything("token indices per example, checked below")})
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
    for i, (logits, starts) in enumerate(zip(token_logits, word_starts)):
        logits = np.asarray(logits)
        if logits.ndim != 2 or not np.issubdtype(logits.dtype, np.number):
            raise TfpackError("Every entry of `token_logits` must be [tokens, classes] numbers. "
                              f"Received: shape {logits.shape} ({logits.dtype}) at example {i}")
        starts = np.asarray(starts)
        if starts.ndim != 1 or (starts.size and not np.issubdtype(starts.dtype, np.integer)):
            raise TfpackError("Every entry of `word_starts` must be a list of token indices. "
                              f"Received: {starts!r:.80} at example {i}")
        bad = (starts < -1) | (starts >= len(logits))
        if bad.any():
            raise TfpackError(
                f"`word_starts` must index the tokens of their example (or be -1). Received: "
                f"{int(starts[bad][0])} at example {i}, which has {len(logits)} tokens")
        classes = np.argmax(logits, axis=-1)
        starts = starts.astype(np.int64)
        result.append(np.where(starts >= 0, classes[np.maximum(starts, 0)], -1))
    return result
