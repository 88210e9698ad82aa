"""Character offsets of a model's own tokens: what QA and tagging need from ``tokenizer=``.

Question answering maps answers (character offsets) to tokens and token spans
back to text; token classification finds the first token of every word. Both
need, for each token, the ``[start, end)`` characters of the original text it
came from. Where they come from:

- a Hugging Face ``tokenizers.Tokenizer``: its own offsets
  (``encode_batch(...).offsets``);
- a keras-hub ``WordPieceTokenizer`` (``BertTokenizer`` ...): keras-hub's own
  reading of text (which differs from BERT's reference on Unicode spaces and
  format characters) over the tokenizer's vocabulary, with origins;
- a keras-hub ``BytePairTokenizer`` (GPT-2, Llama 3, Qwen ...): the bytes of
  each token (byte-level BPE is lossless), mapped to characters;
- a keras-hub ``SentencePieceTokenizer`` (Gemma, Llama 2 ...): the
  ``sentencepiece`` library's piece offsets for the tokenizer's proto;
- ``text_tokenizer(fn, offsets=...)``: a function of the user's.

Every derived offset is checked: the ids it comes with must equal the
tokenizer's own ids for the text, else the builder refuses the text by index
(one `TfpackError`), never a span that belongs to other tokens.

>>> import keras_hub
>>> bert = keras_hub.models.BertTokenizer(
...     vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox", "##es"],
...     lowercase=True)
>>> token_offsets(bert)(["The foxes"])
([[5, 6, 7]], [[(0, 3), (4, 7), (7, 9)]])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfpack.builders.wordpiece import PUNCTUATION, SPACE, WORD, WordPiece, _is_cjk, split_words
from tfpack.errors import TfpackError

__all__ = ["flat_ids", "id_rows", "is_hugging_face", "token_offsets"]


def token_offsets(tokenizer) -> Callable | None:
    """A function ``texts -> (ids, offsets)`` for a tokenizer, or None if none is known."""
    if is_hugging_face(tokenizer):
        return lambda texts: _hugging_face_offsets(tokenizer, texts)
    names = {cls.__name__ for cls in type(tokenizer).__mro__
             if cls.__module__.startswith("keras_hub.")}
    if "WordPieceTokenizer" in names:
        return lambda texts: _wordpiece_offsets(tokenizer, texts)
    if "BytePairTokenizer" in names:
        return lambda texts: _byte_pair_offsets(tokenizer, texts)
    if "SentencePieceTokenizer" in names:
        return lambda texts: _sentencepiece_offsets(tokenizer, texts)
    return None


def is_hugging_face(tokenizer) -> bool:
    """Whether ``tokenizer`` is a Hugging Face ``tokenizers.Tokenizer``."""
    return (type(tokenizer).__module__.split(".")[0] == "tokenizers"
            and hasattr(tokenizer, "encode_batch"))


def _hugging_face_offsets(tokenizer, texts):
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [e.ids for e in encodings], [[tuple(o) for o in e.offsets] for e in encodings]


def _wordpiece_offsets(tokenizer, texts):
    """keras-hub's own WordPiece reading (not BERT's reference: `_keras_hub_normalizer`)."""
    wordpiece = WordPiece(list(tokenizer.get_vocabulary()), lower_case=False,
                          unknown_token=tokenizer.oov_token)
    normalize = _keras_hub_normalizer(tokenizer)
    ids, offsets = [], []
    for text in texts:
        row_ids, row_offsets = [], []
        for word, origins in split_words(text, normalize):
            for token, first, end in wordpiece._pieces(word, count_bytes=True):
                row_ids.append(token)
                row_offsets.append((origins[first], origins[end - 1] + 1))
        ids.append(row_ids)
        offsets.append(row_offsets)
    return ids, offsets


def _keras_hub_normalizer(tokenizer) -> Callable[[str], tuple[tuple[str, int], ...]]:
    """How keras-hub's `WordPieceTokenizer` reads one character, for `split_words`.

    Its reading (keras_hub/src/tokenizers/word_piece_tokenizer.py): case
    folding, then NFD without marks (``strip_accents``); ``[ \t\n\r\f]``,
    ``Cc`` and ``Cf`` characters split words; punctuation (and CJK with
    ``split_on_cjk``) are words of their own; no other cleaning.
    """
    import string
    import unicodedata

    lowercase = getattr(tokenizer, "lowercase", False)
    strip_accents = getattr(tokenizer, "strip_accents", False)
    split_on_cjk = getattr(tokenizer, "split_on_cjk", True)

    def normalize(char):
        if lowercase:
            char = char.casefold()  # tensorflow-text's case_fold_utf8: "ß" -> "ss"
        if strip_accents:
            char = "".join(c for c in unicodedata.normalize("NFD", char)
                           if unicodedata.category(c) != "Mn")
        pairs = []
        for c in char:
            category = unicodedata.category(c)
            if c in " \t\n\r\f" or category in ("Cc", "Cf"):
                pairs.append((c, SPACE))
            elif c in string.punctuation or category.startswith("P") or (
                    split_on_cjk and _is_cjk(ord(c))):
                pairs.append((c, PUNCTUATION))
            else:
                pairs.append((c, WORD))
        return tuple(pairs)

    return normalize


def _char_offsets(text: str, byte_spans):
    """Byte spans of UTF-8 ``text`` -> character spans (a split character goes to both)."""
    starts = []
    for index, char in enumerate(text):
        starts += [index] * len(char.encode("utf-8"))
    starts.append(len(text))
    return [(starts[b], starts[e - 1] + 1 if e > b else starts[b]) for b, e in byte_spans]


def _byte_pair_offsets(tokenizer, texts):
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    byte_values, characters = bytes_to_unicode()
    to_byte = {c: b for b, c in zip(byte_values, characters)}
    ids = id_rows(tokenizer(list(texts)))
    offsets = []
    for text, row in zip(texts, ids):
        spans, position = [], 0
        for token_id in row:
            token = tokenizer.id_to_token(int(token_id))
            size = sum(len(to_byte.get(c) or c.encode("utf-8")) for c in token)
            spans.append((position, position + size))
            position += size
        offsets.append(_char_offsets(text, spans))
    return ids, offsets


def _sentencepiece_offsets(tokenizer, texts):
    import sentencepiece

    proto = tokenizer.proto
    processor = sentencepiece.SentencePieceProcessor()
    if isinstance(proto, bytes):
        processor.LoadFromSerializedProto(proto)
    else:
        processor.Load(proto)
    ids, offsets = [], []
    for text in texts:
        pieces = processor.encode(text, out_type="proto").pieces
        ids.append([p.id for p in pieces])
        encoded = text.encode("utf-8")
        spans = [(p.begin, p.end) for p in pieces]
        offsets.append(_char_offsets(text, spans) if len(encoded) else [])
    return ids, offsets


def id_rows(output) -> list[list[int]]:
    """Rows of ids from a keras-hub tokenizer's batch output (lists, ragged or numpy)."""
    if hasattr(output, "to_list"):  # tf.RaggedTensor
        output = output.to_list()
    elif hasattr(output, "numpy"):
        output = output.numpy()
    return [flat_ids(row) for row in output]


def flat_ids(row) -> list[int]:
    array = np.asarray(row.numpy() if hasattr(row, "numpy") else row)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise TfpackError("`tokenizer` must give a flat list of int ids per string. "
                          f"Received: {array.dtype} ids of shape {array.shape}")
    if array.size and array.min() < 0:
        raise TfpackError(f"Token ids must be non-negative. Received: {int(array.min())}")
    if array.size and int(array.max()) >= 2**31:
        raise TfpackError("Token ids must fit int32 (below 2**31). "
                          f"Received: {int(array.max())}")
    return array.astype(np.int64).tolist()
