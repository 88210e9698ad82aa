"""WordPiece tokenization that keeps character offsets into the original text.

`tensorflow_text.BertTokenizer` with ``lower_case=True`` reports offsets into
its own lower-cased, accent-stripped text, not into the caller's. Here the
text is normalized in Python first (lower case, NFD, combining marks removed:
what an uncased BERT vocabulary expects) with a map from every normalized
byte back to its original character, and tokenized without further
normalization, so each token's ``(start, end)`` indexes the original string.

>>> ids, offsets = wordpiece_with_offsets(["Héllo, Wörld"])
>>> ids[0], offsets[0]
([7592, 1010, 2088], [(0, 5), (5, 6), (7, 12)])
"""

from __future__ import annotations

import unicodedata

__all__ = ["wordpiece_with_offsets"]


def _normalize(text: str, lower_case: bool) -> tuple[str, list[int]]:
    pieces, origin = [], []
    for index, char in enumerate(text):
        if lower_case:
            char = "".join(c for c in unicodedata.normalize("NFD", char.lower())
                           if unicodedata.category(c) != "Mn")
        pieces.append(char)
        origin.extend([index] * len(char.encode("utf-8")))
    origin.append(len(text))
    return "".join(pieces), origin


def wordpiece_with_offsets(texts: list[str], *, vocab_path: str | None = None,
                           lower_case: bool = True
                           ) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Token ids and character spans ``[start, end)`` of every text's tokens.

    Args:
        texts: the strings.
        vocab_path: a WordPiece ``vocab.txt`` (bundled bert-base-uncased by default).
        lower_case: normalize as an uncased vocabulary expects.

    Returns:
        ``(ids, offsets)``: per text, the ids and the spans in the original text.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    from tfpack.datasets import bert_vocab_path

    normalized = [_normalize(t, lower_case) for t in texts]
    tokenizer = tf_text.BertTokenizer(vocab_path or bert_vocab_path(), lower_case=False,
                                      token_out_type=tf.int32)
    if not texts:
        return [], []
    tokens, starts, ends = tokenizer.tokenize_with_offsets(
        tf.constant([n for n, _ in normalized]))
    ids = tokens.merge_dims(1, 2).to_list()
    starts, ends = starts.merge_dims(1, 2).to_list(), ends.merge_dims(1, 2).to_list()
    offsets = [[(origin[s], origin[e - 1] + 1) for s, e in zip(row_starts, row_ends)]
               for (_, origin), row_starts, row_ends in zip(normalized, starts, ends)]
    return ids, offsets
