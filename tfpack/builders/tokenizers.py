"""Text to token ids with a model's own tokenizer: the builders' ``tokenizer=``.

The example builders (`causal_lm_examples`, `sft_examples`,
`classification_examples`, `bert_pretraining_examples`, `embedding_examples`,
`token_classification_examples`, `question_answering_examples`) take
``tokenizer=``:

- a keras-hub `Tokenizer` (`BytePairTokenizer`, `SentencePieceTokenizer`,
  `WordPieceTokenizer` and the model tokenizers built on them, such as
  `Llama3Tokenizer`, `Gemma3Tokenizer`, `BertTokenizer`);
- a keras-hub `Preprocessor` (a preset's ``CausalLMPreprocessor``,
  ``TextClassifierPreprocessor`` ...): its tokenizer, and the special tokens
  its packer adds;
- a Hugging Face ``tokenizers.Tokenizer`` (a model's ``tokenizer.json``):
  its ids without special tokens, and the special tokens its post-processor
  adds (``[CLS]``/``[SEP]`` for BERT, ``<s>``/``</s></s>``/``</s>`` for RoBERTa);
- a plain callable from one string to a list of ids;
- a `TextTokenizer` from `text_tokenizer`, which sets the special ids
  explicitly.

`text_tokenizer` turns any of them into a `TextTokenizer`. The builders add
its special tokens where the model's keras-hub preprocessor would::

    causal_lm_examples       start text end               CausalLMPreprocessor
    sft_examples             start prompt response end    Gemma3CausalLMPreprocessor
                                                           ({"prompts", "responses"})
    classification_examples  start a separator b end      TextClassifierPreprocessor
    bert_pretraining_exam... start a separator b end      MaskedLMPreprocessor
    embedding_examples       start text end
    token_classification...  start words end              (first token of a word)
    question_answering_ex... start question separator context end

Question answering and tagging also need each token's character offsets
(`tfpack.builders.offsets`): Hugging Face and keras-hub WordPiece, byte-pair
and SentencePiece tokenizers give them; a callable gives them with
``text_tokenizer(fn, offsets=...)``. Ids are checked as they come: integers
in ``[0, 2**31)``, and below ``vocabulary_size`` when it is known.

The special ids come from, first to last: the arguments of `text_tokenizer`;
a preprocessor's packer (``start_value``, ``sep_value``, ``end_value``, and
its ``add_start_token``/``add_end_token`` flags); the tokenizer's own
``start_token_id``/``end_token_id``/``mask_token_id`` attributes (keras-hub
sets them on every model tokenizer: ``[CLS]``/``[SEP]`` for BERT,
``<bos>``/``<eos>`` for Gemma, no start token for Qwen). A plain callable,
or a bare keras-hub tokenizer without those attributes, adds none.

Example (a callable, explicit special ids):

>>> words = {"hello": 5, "world": 6}
>>> tokenizer = text_tokenizer(lambda s: [words[w] for w in s.split()],
...                            start_ids=1, end_ids=2)
>>> tokenizer(["hello world", "world"])
[[5, 6], [6]]
>>> tokenizer.start_ids, tokenizer.end_ids, tokenizer.separator_ids
((1,), (2,), (2,))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from tfpack.builders.offsets import flat_ids, id_rows, is_hugging_face, token_offsets
from tfpack.builders.vocab import load_vocab
from tfpack.builders.wordpiece import WordPiece
from tfpack.errors import TfpackError
from tfpack.params import (INT32_MAX, Anything, Boolean, InstanceOf, Integer, TokenIds,
                           validate_params)

__all__ = ["TextTokenizer", "text_tokenizer", "wordpiece_text_tokenizer"]

_CALLABLE = InstanceOf(Callable, description="a callable")
# The special ids: a token id, a list of them, or None (taken from the tokenizer).
_SPECIAL = {name: [None, Integer(0, INT32_MAX), TokenIds()]
            for name in ("start_ids", "end_ids", "separator_ids")}
_MASKED_LM = {"mask_id": [None, Integer(0, INT32_MAX)], "vocabulary_size": [None, Integer(1)],
              "offsets": [None, _CALLABLE]}


@dataclasses.dataclass(frozen=True)
class TextTokenizer:
    """A tokenizer as the builders use it: strings to ids, and the special ids.

    Build it with `text_tokenizer`; calling it tokenizes a list of strings
    into lists of ids (special tokens not included: the builders add them).

    Attributes:
        tokenizer: the keras-hub tokenizer or the callable that tokenizes.
        start_ids: ids before each example (BOS, ``[CLS]``); may be empty.
        end_ids: ids after each example (EOS, ``[SEP]``); may be empty.
        separator_ids: ids between the segments of a pair (``[SEP]``; two
            ``</s>`` for RoBERTa).
        mask_id: the ``[MASK]`` id, for masked-LM examples; None without one.
        vocabulary_size: number of ids, for random replacement in masked-LM
            examples; None when unknown.
        batched: ``tokenizer`` takes a list of strings and returns rows of
            ids (keras-hub tokenizers do); else it takes one string.
        offsets: a function from a list of strings to ``(ids, spans)``: per
            string its ids and each token's ``(start, end)`` characters; None
            where none is known (`tfpack.builders.offsets`).

    Example:

    >>> t = text_tokenizer(lambda s: [len(w) for w in s.split()], start_ids=[9])
    >>> t(["a bc"]), t.start_ids, t.end_ids
    ([[1, 2]], (9,), ())
    """

    tokenizer: Callable
    start_ids: tuple[int, ...] = ()
    end_ids: tuple[int, ...] = ()
    separator_ids: tuple[int, ...] = ()
    mask_id: int | None = None
    vocabulary_size: int | None = None
    batched: bool = False
    offsets: Callable | None = None

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each string, without special tokens."""
        texts = list(texts)
        bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
        if bad:
            raise TfpackError("Every text must be a string. "
                              f"Received: {type(texts[bad[0]]).__name__} at index {bad[0]}")
        if not texts:
            return []
        if self.batched:
            rows = id_rows(self.tokenizer(texts))
        else:
            rows = [flat_ids(self.tokenizer(t)) for t in texts]
        if len(rows) != len(texts):
            raise TfpackError(f"`tokenizer` must give one row of ids per text. "
                              f"Received: {len(rows)} rows for {len(texts)} texts")
        self._check_range(rows)
        return rows

    def _check_range(self, rows) -> None:
        if self.vocabulary_size is None:
            return
        for i, row in enumerate(rows):
            if row and max(row) >= self.vocabulary_size:
                raise TfpackError(
                    f"Token ids must be below the vocabulary size {self.vocabulary_size}. "
                    f"Received: id {max(row)} in the ids of text {i}")

    def with_offsets(self, texts: Sequence[str]
                     ) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        """Per string, its ids and each token's ``(start, end)`` characters in it.

        Raises:
            TfpackError: no offsets are known for this tokenizer, or they come
                with other ids than the tokenizer gives (the text is named).
        """
        if self.offsets is None:
            raise TfpackError(
                "This builder needs character offsets of the tokens: pass a keras-hub "
                "WordPiece, byte-pair or SentencePiece tokenizer, a Hugging Face "
                "tokenizers.Tokenizer, or text_tokenizer(fn, offsets=...). Received: "
                f"tokenizer={self.tokenizer!r:.100} without offsets")
        texts = list(texts)
        ids = self(texts)
        if not texts:
            return [], []
        offset_ids, spans = self.offsets(texts)
        for i, (text, row, other, row_spans) in enumerate(zip(texts, ids, offset_ids, spans)):
            if [int(x) for x in other] != row or len(row_spans) != len(row):
                raise TfpackError(
                    "The tokens' character offsets must come with the tokenizer's own ids. "
                    f"Received: other ids for text {i} ({text!r:.60})")
            if any(not 0 <= a <= b <= len(text) for a, b in row_spans):
                raise TfpackError("Token offsets must lie inside their text. "
                                  f"Received: {row_spans!r:.100} for text {i}")
        return ids, [[(int(a), int(b)) for a, b in row] for row in spans]


TextTokenizer.__init__ = validate_params({
    "tokenizer": _CALLABLE, "start_ids": TokenIds(), "end_ids": TokenIds(),
    "separator_ids": TokenIds(), **_MASKED_LM, "batched": Boolean(),
})(TextTokenizer.__init__)


@validate_params({"tokenizer": Anything("checked below"), **_SPECIAL, **_MASKED_LM,
                  "batched": [None, Boolean()]})
def text_tokenizer(
    tokenizer,
    *,
    start_ids: int | Sequence[int] | None = None,
    end_ids: int | Sequence[int] | None = None,
    separator_ids: int | Sequence[int] | None = None,
    mask_id: int | None = None,
    vocabulary_size: int | None = None,
    batched: bool | None = None,
    offsets: Callable | None = None,
) -> TextTokenizer:
    """A `TextTokenizer` from a keras-hub tokenizer or preprocessor, or a callable.

    Example (a keras-hub WordPiece tokenizer; `BertTokenizer` knows its
    ``[CLS]`` and ``[SEP]``):

    >>> import keras_hub
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "fox"]
    >>> bert = keras_hub.models.BertTokenizer(vocabulary=vocab)
    >>> t = text_tokenizer(bert)
    >>> t(["the fox"]), t.start_ids, t.end_ids, t.mask_id
    ([[5, 6]], (2,), (3,), 4)
    >>> text_tokenizer(bert, start_ids=[]).start_ids   # no [CLS]
    ()

    Args:
        tokenizer: a keras-hub `Tokenizer` or `Preprocessor`, a callable from
            one string to a list of ids, or a `TextTokenizer` (returned as
            is unless an argument below overrides a field).
        start_ids, end_ids, separator_ids: special ids (an int, a list, or
            ``[]`` for none); None takes them from the preprocessor's packer
            or the tokenizer's attributes (module docstring). The separator
            defaults to the end ids, as keras-hub's `MultiSegmentPacker`.
        mask_id, vocabulary_size: for masked-LM examples; None takes the
            tokenizer's ``mask_token_id`` and ``vocabulary_size()``.
        batched: a callable ``tokenizer`` takes a list of strings (True) or
            one string (False, the default); keras-hub tokenizers are batched.
        offsets: a function from a list of strings to ``(ids, spans)``, for
            question answering and tagging; None takes the known ones
            (`tfpack.builders.offsets`).

    Returns:
        The `TextTokenizer`.

    Raises:
        TfpackError: ``tokenizer`` is none of the above, or pads its output
            (a keras-hub tokenizer with ``sequence_length`` set).
    """
    given = {"start_ids": start_ids, "end_ids": end_ids, "separator_ids": separator_ids,
             "mask_id": mask_id, "vocabulary_size": vocabulary_size, "batched": batched,
             "offsets": offsets}
    overrides = {name: value for name, value in given.items() if value is not None}
    for name in ("start_ids", "end_ids", "separator_ids"):
        if name in overrides:
            overrides[name] = _id_tuple(overrides[name], name)
    if isinstance(tokenizer, TextTokenizer):
        return dataclasses.replace(tokenizer, **overrides)
    kind = _keras_hub_base(tokenizer)
    if kind == "Preprocessor":
        fields = _from_preprocessor(tokenizer)
    elif kind == "Tokenizer":
        fields = _from_tokenizer(tokenizer)
    elif is_hugging_face(tokenizer):
        fields = _from_hugging_face(tokenizer)
    elif callable(tokenizer):
        fields = {"tokenizer": tokenizer}
    else:
        raise TfpackError(
            "`tokenizer` must be a keras-hub Tokenizer or Preprocessor, a Hugging Face "
            "tokenizers.Tokenizer, a callable from a string to ids, or a TextTokenizer. "
            f"Received: tokenizer={tokenizer!r}")
    fields.update(overrides)
    if "separator_ids" not in fields:
        fields["separator_ids"] = fields.get("end_ids", ())
    result = TextTokenizer(**fields)
    special = [*result.start_ids, *result.end_ids, *result.separator_ids,
               *([] if result.mask_id is None else [result.mask_id])]
    if result.vocabulary_size is not None and special and max(special) >= result.vocabulary_size:
        raise TfpackError(f"Special token ids must be below the vocabulary size "
                          f"{result.vocabulary_size}. Received: {max(special)}")
    return result


def reject_vocab_path(vocab_path) -> None:
    """The builders' ``vocab_path`` (the bundled WordPiece) excludes ``tokenizer``."""
    if vocab_path is not None:
        raise TfpackError("Pass `tokenizer` or `vocab_path`, not both. "
                          f"Received: vocab_path={vocab_path!r}")


def builder_tokenizer(tokenizer, vocab_path, lower_case) -> TextTokenizer:
    """A builder's ``tokenizer`` as a `TextTokenizer`; None: the bundled WordPiece."""
    if tokenizer is None:
        return wordpiece_text_tokenizer(vocab_path, lower_case=lower_case)
    reject_vocab_path(vocab_path)
    return text_tokenizer(tokenizer)


def special_ids(tokenizer: TextTokenizer, max_length) -> tuple[list[int], list[int]]:
    """``(start, end)`` ids a builder puts around each row; ``max_length`` must leave room."""
    start, end = list(tokenizer.start_ids), list(tokenizer.end_ids)
    if not isinstance(max_length, int) or isinstance(max_length, bool) or (
            max_length <= len(start) + len(end)):
        raise TfpackError(f"`max_length` must be an integer above {len(start) + len(end)} "
                          f"(the special tokens). Received: max_length={max_length!r}")
    return start, end


def _keras_hub_base(obj) -> str | None:
    """"Tokenizer" or "Preprocessor" for keras-hub's base classes (keras-hub not imported)."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("keras_hub.") and cls.__name__ in ("Tokenizer",
                                                                        "Preprocessor"):
            return cls.__name__
    return None


def _from_hugging_face(tokenizer) -> dict:
    """A ``tokenizers.Tokenizer``: the special tokens its post-processor puts around a pair."""
    if tokenizer.truncation is not None or tokenizer.padding is not None:
        raise TfpackError("`tokenizer` must not pad or cut: tfpack packs whole sequences. "
                          "Received: a tokenizers.Tokenizer with truncation or padding on "
                          "(call no_truncation() and no_padding())")
    single = tokenizer.encode("a", add_special_tokens=True)
    pair = tokenizer.encode("a", "b", add_special_tokens=True)

    def first(encoding, sequence):
        return encoding.sequence_ids.index(sequence)

    def last(encoding, sequence):
        return len(encoding.ids) - 1 - encoding.sequence_ids[::-1].index(sequence)

    mask = next((tokenizer.token_to_id(t) for t in ("[MASK]", "<mask>")
                 if tokenizer.token_to_id(t) is not None), None)
    return {"tokenizer": lambda texts: [e.ids for e in tokenizer.encode_batch(
                texts, add_special_tokens=False)],
            "batched": True,
            "start_ids": tuple(single.ids[:first(single, 0)]),
            "end_ids": tuple(single.ids[last(single, 0) + 1:]),
            "separator_ids": tuple(pair.ids[last(pair, 0) + 1:first(pair, 1)]),
            "mask_id": mask,
            "vocabulary_size": int(tokenizer.get_vocab_size(with_added_tokens=True)),
            "offsets": token_offsets(tokenizer)}


def _from_tokenizer(tokenizer) -> dict:
    if getattr(tokenizer, "sequence_length", None) is not None:
        raise TfpackError(
            "`tokenizer` must not pad or cut: tfpack packs whole sequences. Received: "
            f"{type(tokenizer).__name__} with sequence_length={tokenizer.sequence_length}")
    fields = {"tokenizer": tokenizer, "batched": True,
              "start_ids": _id_tuple(getattr(tokenizer, "start_token_id", None), "start_ids"),
              "end_ids": _id_tuple(getattr(tokenizer, "end_token_id", None), "end_ids"),
              "mask_id": getattr(tokenizer, "mask_token_id", None)}
    if callable(getattr(tokenizer, "vocabulary_size", None)):
        fields["vocabulary_size"] = int(tokenizer.vocabulary_size())
    fields["offsets"] = token_offsets(tokenizer)
    return fields


def _from_preprocessor(preprocessor) -> dict:
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if _keras_hub_base(tokenizer) != "Tokenizer":
        raise TfpackError("A keras-hub preprocessor given as `tokenizer` must have a "
                          f"tokenizer. Received: {type(preprocessor).__name__} without one")
    fields = _from_tokenizer(tokenizer)
    if getattr(preprocessor, "packer", None) is None:
        preprocessor.build(None)  # keras-hub makes the packer in build()
    packer = getattr(preprocessor, "packer", None)
    if packer is not None:
        as_ids = lambda value, name: _id_tuple(
            [tokenizer.token_to_id(v) if isinstance(v, str) else v
             for v in ([] if value is None else np.ravel(value).tolist())], name)
        fields["start_ids"] = as_ids(getattr(packer, "start_value", None), "start_ids")
        fields["end_ids"] = as_ids(getattr(packer, "end_value", None), "end_ids")
        if hasattr(packer, "sep_value"):
            fields["separator_ids"] = as_ids(packer.sep_value, "separator_ids")
    if getattr(preprocessor, "add_start_token", True) is False:
        fields["start_ids"] = ()
    if getattr(preprocessor, "add_end_token", True) is False:
        fields["end_ids"] = ()
    return fields


def _id_tuple(value, name) -> tuple[int, ...]:
    if value is None:
        return ()
    values = [value] if np.ndim(value) == 0 else list(np.ravel(value))
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0
               for v in values):
        raise TfpackError(f"`{name}` must be token ids (non-negative ints). "
                          f"Received: {name}={value!r}")
    return tuple(int(v) for v in values)


def wordpiece_text_tokenizer(vocab_path: str | None = None, *, lower_case: bool = True):
    """The bundled (or given) vocabulary as the builders' `TextTokenizer`.

    ``[CLS]`` before, ``[SEP]`` between and after, ``[MASK]``, the
    vocabulary's size and character offsets: BERT's own special tokens.

    >>> t = wordpiece_text_tokenizer()
    >>> t(["Hello!"]), t.start_ids, t.end_ids, t.mask_id, t.vocabulary_size
    ([[7592, 999]], (101,), (102,), 103, 30522)
    """
    vocab = load_vocab(vocab_path)
    missing = [t for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]") if t not in vocab]
    if missing:
        raise TfpackError("A WordPiece vocabulary must hold [CLS], [SEP], [MASK] and [UNK]. "
                          f"Received: vocab_path={vocab_path!r} without {missing}")
    wordpiece = WordPiece(vocab, lower_case=lower_case)
    return TextTokenizer(wordpiece, start_ids=(vocab.index("[CLS]"),),
                         end_ids=(vocab.index("[SEP]"),), separator_ids=(vocab.index("[SEP]"),),
                         mask_id=vocab.index("[MASK]"), vocabulary_size=len(vocab), batched=True,
                         offsets=wordpiece.tokenize_with_offsets)
