"""Causal-LM examples: tokenized documents cut into pieces of at most ``L`` tokens.

Each piece is one unpacked example ``{"input_ids": int32 [n]}``, ``n <= L``.
Packing (`tfpack.data.pack` with the ``causal_lm`` roles) derives ``labels``
per sequence, so no target crosses a piece boundary: the last token of a piece
and padding get -100 (DESIGN.md, causal-LM ``labels``).

Example (``max_length=4``)::

    document [1, 2, 3, 4, 5, 6] -> pieces [1, 2, 3, 4], [5, 6]
    packed with L=8: input_ids [1, 2, 3, 4, 5, 6, 0, 0]
                     labels    [2, 3, 4, -100, 6, -100, -100, -100]

>>> import tensorflow as tf, tfpack
>>> docs = tf.data.Dataset.from_generator(
...     lambda: iter([{"input_ids": [1, 2, 3, 4, 5, 6]}]),
...     output_signature={"input_ids": tf.TensorSpec([None], tf.int32)})
>>> pieces = tfpack.data.causal_lm_examples(docs, max_length=4)
>>> [p["input_ids"].numpy().tolist() for p in pieces]
[[1, 2, 3, 4], [5, 6]]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.data.features import FeatureRoles
from tfpack.errors import TfpackError

__all__ = ["causal_lm_examples"]


def causal_lm_examples(
    documents,
    max_length: int,
    *,
    vocab_path: str | None = None,
    lower_case: bool = True,
    min_length: int = 1,
) -> tf.data.Dataset:
    """Split documents into causal-LM pieces of at most ``max_length`` tokens.

    Args:
        documents: a `tf.data.Dataset` of ``{"input_ids": [n]}`` (already
            tokenized), or a list of documents, each a string or a list of
            sentences, tokenized here with the WordPiece `BertTokenizer`
            (bundled bert-base-uncased vocabulary unless ``vocab_path``).
        max_length: ``L``, the longest piece.
        min_length: drop pieces shorter than this (e.g. 2: a piece of one
            token has no target).

    Returns:
        A dataset of ``{"input_ids": int32 [n]}``, ``min_length <= n <= L``,
        in document order.
    """
    if not isinstance(max_length, int) or max_length < 1:
        raise TfpackError("`max_length` must be a positive integer. "
                          f"Received: max_length={max_length!r}")
    if not isinstance(documents, tf.data.Dataset):
        documents = _tokenized(documents, vocab_path, lower_case)
    FeatureRoles.causal_lm().validate(documents.element_spec)

    def pieces(example):
        ids = tf.cast(example["input_ids"], tf.int32)
        count = (tf.size(ids, out_type=tf.int64) + max_length - 1) // max_length
        return tf.data.Dataset.range(count).map(
            lambda i: {"input_ids": ids[i * max_length:(i + 1) * max_length]})

    out = documents.flat_map(pieces)
    if min_length > 1:
        out = out.filter(lambda x: tf.size(x["input_ids"]) >= min_length)
    return out


def _tokenized(documents, vocab_path, lower_case) -> tf.data.Dataset:
    from tfpack.data.bert import tokenize_documents

    as_sentences = [[d] if isinstance(d, str) else list(d) for d in documents]
    tokenized = tokenize_documents(as_sentences, vocab_path, lower_case=lower_case)
    if not tokenized:
        raise TfpackError("`documents` must hold some text. Received: no tokens")
    ragged = tf.ragged.constant([[t for s in d for t in s.tolist()] for d in tokenized],
                                dtype=tf.int32)
    return tf.data.Dataset.range(ragged.nrows()).map(lambda i: {"input_ids": ragged[i]})
