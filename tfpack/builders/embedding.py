"""Sentence-embedding examples: ``[CLS] text [SEP]``, optionally with a group id.

Inference embeds texts (`tfpack.models.TextEmbedder`); contrastive
fine-tuning gives each text a group id (``labels``, a scalar): texts of one
group are each other's positives. Packing stacks the group ids to ``[K]``
(the ``embedding`` task).

>>> ds = embedding_examples(["a fine film", "dull"], groups=[0, 0])
>>> [(x["input_ids"].numpy().tolist(), int(x["labels"])) for x in ds]
[([101, 1037, 2986, 2143, 102], 0), ([101, 10634, 102], 0)]
"""

from __future__ import annotations

import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, InstanceOf, Integer,
                           validate_params)

__all__ = ["embedding_examples"]


@validate_params({
    "texts": InstanceOf(list, tuple, description="a list of strings"),
    "groups": Anything("None or one group id per text: checked below"),
    "max_length": Integer(1), "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
})
def embedding_examples(texts: list[str], groups: list[int] | None = None, *,
                       max_length: int = 128, tokenizer=None, vocab_path: str | None = None,
                       lower_case: bool = True) -> tf.data.Dataset:
    """Tokenize texts into unpacked embedding examples.

    Args:
        texts: the texts.
        groups: optional group id per text (contrastive fine-tuning).
        max_length: longest example; longer texts lose their end.
        tokenizer: the model's own tokenizer (`tfpack.builders.text_tokenizer`:
            a keras-hub tokenizer or preprocessor, a Hugging Face
            ``tokenizers.Tokenizer``, a callable); its start and end ids go
            around the text. None: the WordPiece vocabulary below.
        vocab_path, lower_case: the WordPiece vocabulary (bundled
            bert-base-uncased by default), without ``tokenizer``.

    Returns:
        A dataset of ``{"input_ids": int32 [n]}`` (and ``labels``, int32
        scalars, with ``groups``), in input order.
    """
    from tfpack.builders.tokenizers import builder_tokenizer, special_ids

    if not texts:
        raise TfpackError("`texts` must not be empty. Received: texts=[]")
    if groups is not None and len(groups) != len(texts):
        raise TfpackError("`groups` must have one id per text. Received: "
                          f"{len(groups)} groups for {len(texts)} texts")
    tokenizer = builder_tokenizer(tokenizer, vocab_path, lower_case)
    start, end = special_ids(tokenizer, max_length)
    rows = [start + row[:max_length - len(start) - len(end)] + end
            for row in tokenizer(list(texts))]
    columns = {"input_ids": tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)}
    if groups is not None:
        columns["labels"] = tf.constant(groups, tf.int32)
    return tf.data.Dataset.range(len(rows)).map(
        lambda i: {name: column[i] for name, column in columns.items()})
