"""Per-sequence classification examples (GLUE-like: a text or a text pair + label).

Each example is ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` in WordPiece
ids, with ``token_type_ids`` 0 for the first segment and 1 for the second and
an int ``labels`` scalar. With ``tokenizer=`` (the model's own) it is
``start a separator b end`` with that tokenizer's ids, as keras-hub's
``TextClassifierPreprocessor`` packs it (``<s> a </s></s> b </s>`` for a
RoBERTa preprocessor). Packing stacks the labels to ``[K]`` in pack order
(the ``classification`` roles).

Example:

>>> import tfpack
>>> ds = tfpack.builders.classification_examples(["a fine film", "dull"], [1, 0])
>>> x = next(iter(ds))
>>> x["input_ids"].numpy().tolist(), int(x["labels"])
([101, 1037, 2986, 2143, 102], 1)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfpack.builders.tokenizers import builder_tokenizer
from tfpack.errors import TfpackError
from tfpack.params import Anything, Boolean, ExistingFile, Integer, validate_params

__all__ = ["classification_examples"]

@validate_params({
    "texts": Anything("first segments, as many as labels: checked below"),
    "labels": Anything("one int per text"), "pairs": Anything("None or one text per text"),
    "max_length": Integer(1), "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
})
def classification_examples(
    texts: list[str],
    labels: list[int],
    *,
    pairs: list[str] | None = None,
    max_length: int = 128,
    tokenizer=None,
    vocab_path: str | None = None,
    lower_case: bool = True,
) -> tf.data.Dataset:
    """Tokenize texts (or text pairs) with labels into unpacked examples.

    Args:
        texts: first segments.
        labels: one int per text.
        pairs: optional second segments, one per text.
        max_length: longest example; the longer segment (the second of
            two equal ones) is cut from its end until ``[CLS] a [SEP] b
            [SEP]`` fits, as keras-hub's ``round_robin`` truncation.
        tokenizer: the model's tokenizer: a keras-hub `Tokenizer` or
            `Preprocessor`, a callable from a string to ids, or a
            `TextTokenizer` (`tfpack.builders.text_tokenizer`); None: the
            WordPiece vocabulary below.
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default), without ``tokenizer``.

    Returns:
        A dataset of ``input_ids``, ``token_type_ids`` (int32 ``[n]``) and
        ``labels`` (int32 scalar), in input order.
    """
    if len(texts) != len(labels) or (pairs is not None and len(pairs) != len(texts)):
        raise TfpackError(
            "`texts`, `labels` (and `pairs`) must have the same length. Received: "
            f"len(texts)={len(texts)}, len(labels)={len(labels)}, "
            f"len(pairs)={None if pairs is None else len(pairs)}")
    if not texts:
        raise TfpackError("`texts` must not be empty. Received: texts=[]")
    tokenizer = builder_tokenizer(tokenizer, vocab_path, lower_case)
    start, separator, end = (list(tokenizer.start_ids), list(tokenizer.separator_ids),
                             list(tokenizer.end_ids))
    special = len(start) + len(end) + (len(separator) if pairs is not None else 0)
    if max_length <= special:
        raise TfpackError(f"`max_length` must be more than {special}. "
                          f"Received: max_length={max_length}")
    segments = [texts] if pairs is None else [texts, pairs]
    tokenized = [tokenizer(list(column)) for column in segments]
    ids, types = [], []
    for row in zip(*tokenized):
        row = [list(s) for s in row]
        while sum(len(s) for s in row) > max_length - special:
            # The last of the longest: keras-hub's round robin (and Google BERT's
            # truncate_seq_pair) keep the first segment whole on a tie.
            longest = max(len(s) for s in row)
            [s for s in row if len(s) == longest][-1].pop()
        tokens = start + row[0]
        if len(row) == 2:
            tokens += separator
            kinds = [0] * len(tokens) + [1] * (len(row[1]) + len(end))
            tokens += row[1]
        else:
            kinds = [0] * (len(tokens) + len(end))
        ids.append(tokens + end)
        types.append(kinds)
    ragged_ids = tf.ragged.constant(ids, dtype=tf.int32)
    ragged_types = tf.ragged.constant(types, dtype=tf.int32)
    label_tensor = tf.constant(np.asarray(labels, np.int32))
    return tf.data.Dataset.range(len(ids)).map(lambda i: {
        "input_ids": ragged_ids[i], "token_type_ids": ragged_types[i],
        "labels": label_tensor[i]})
