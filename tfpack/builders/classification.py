"""Per-sequence classification examples (GLUE-like: a text or a text pair + label).

Each example is ``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` in WordPiece
ids, with ``token_type_ids`` 0 for the first segment and 1 for the second and
an int ``labels`` scalar. Packing stacks the labels to ``[K]`` in pack order
(the ``classification`` roles).

Example:

>>> import tfpack
>>> ds = tfpack.data.classification_examples(["a fine film", "dull"], [1, 0])
>>> x = next(iter(ds))
>>> x["input_ids"].numpy().tolist(), int(x["labels"])
([101, 1037, 2986, 2143, 102], 1)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError

__all__ = ["classification_examples"]

_CLS, _SEP = "[CLS]", "[SEP]"


def classification_examples(
    texts: list[str],
    labels: list[int],
    *,
    pairs: list[str] | None = None,
    max_length: int = 128,
    vocab_path: str | None = None,
    lower_case: bool = True,
) -> tf.data.Dataset:
    """Tokenize texts (or text pairs) with labels into unpacked examples.

    Args:
        texts: first segments.
        labels: one int per text.
        pairs: optional second segments, one per text.
        max_length: longest example; the longer segment is cut from its end
            until ``[CLS] a [SEP] b [SEP]`` fits.
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default).

    Returns:
        A dataset of ``input_ids``, ``token_type_ids`` (int32 ``[n]``) and
        ``labels`` (int32 scalar), in input order.
    """
    from tfpack.builders.bert import load_vocab

    if len(texts) != len(labels) or (pairs is not None and len(pairs) != len(texts)):
        raise TfpackError(
            "`texts`, `labels` (and `pairs`) must have the same length. Received: "
            f"len(texts)={len(texts)}, len(labels)={len(labels)}, "
            f"len(pairs)={None if pairs is None else len(pairs)}")
    if not texts:
        raise TfpackError("`texts` must not be empty. Received: texts=[]")
    special = 3 if pairs is not None else 2
    if max_length <= special:
        raise TfpackError(f"`max_length` must be more than {special}. "
                          f"Received: max_length={max_length}")
    vocab = load_vocab(vocab_path)
    cls_id, sep_id = vocab.index(_CLS), vocab.index(_SEP)
    segments = [texts] if pairs is None else [texts, pairs]
    tokenized = [_tokenize(column, vocab_path, lower_case) for column in segments]
    ids, types = [], []
    for row in zip(*tokenized):
        row = [list(s) for s in row]
        while sum(len(s) for s in row) > max_length - special:
            max(row, key=len).pop()
        tokens = [cls_id] + row[0] + [sep_id]
        kinds = [0] * len(tokens)
        if len(row) == 2:
            tokens += row[1] + [sep_id]
            kinds += [1] * (len(row[1]) + 1)
        ids.append(tokens)
        types.append(kinds)
    ragged_ids = tf.ragged.constant(ids, dtype=tf.int32)
    ragged_types = tf.ragged.constant(types, dtype=tf.int32)
    label_tensor = tf.constant(np.asarray(labels, np.int32))
    return tf.data.Dataset.range(len(ids)).map(lambda i: {
        "input_ids": ragged_ids[i], "token_type_ids": ragged_types[i],
        "labels": label_tensor[i]})


def _tokenize(texts, vocab_path, lower_case):
    import tensorflow_text as tf_text

    from tfpack.datasets import bert_vocab_path

    tokenizer = tf_text.BertTokenizer(vocab_path or bert_vocab_path(), lower_case=lower_case,
                                      token_out_type=tf.int32)
    return tokenizer.tokenize(tf.constant(list(texts))).merge_dims(1, 2).to_list()
