"""Character offsets of a model's own tokens: what QA and tagging need from ``tokenizer=``.

Question answering maps answers (character offsets) to tokens and token spans
back to text; token classification finds the first token of every word. Both
need, for each token, the ``[start, end)`` characters of the original text it
came from. Where they come from:

- a Hugging Face ``tokenizers.Tokenizer``: its own offsets
  (``encode_batch(...).offsets``);
- a keras-hub ``WordPieceTokenizer`` (``BertTokenizer`` ...): tfpack's BERT
  WordPiece (`tfpack.builders.wordpiece`) over the tokenizer's vocabulary and
  case setting;
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

__all__ = ["is_hugging_face", "token_offsets"]


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
    from tfpack.builders.wordpiece import WordPiece

    wordpiece = WordPiece(list(tokenizer.get_vocabulary()),
                          lower_case=bool(tokenizer.lowercase),
                          unknown_token=tokenizer.oov_token)
    return wordpiece.tokenize_with_offsets(list(texts))


def _char_offsets(text: str, byte_spans):
    """Byte spans of UTF-8 ``text`` -> character spans (a split character goes to both)."""
    starts = []
    for index, char in enumerate(text):
        starts += [index] * len(char.encode("utf-8"))
    starts.append(len(text))
    return [(starts[b], starts[e - 1] + 1 if e > b else starts[b]) for b, e in byte_spans]


def _byte_pair_offsets(tokenizer, texts):
    from keras_hub.src.tokenizers.byte_pair_tokenizer import bytes_to_unicode

    from tfpack.builders.tokenizers import _rows

    byte_values, characters = bytes_to_unicode()
    to_byte = {c: b for b, c in zip(byte_values, characters)}
    ids = _rows(tokenizer(list(texts)))
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
        pieces = processor.encode(text, out_type="immutable_proto").pieces
        ids.append([p.id for p in pieces])
        encoded = text.encode("utf-8")
        spans = [(p.begin, p.end) for p in pieces]
        offsets.append(_char_offsets(text, spans) if len(encoded) else [])
    return ids, offsets
