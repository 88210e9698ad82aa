"""Text to token ids with a model's own tokenizer: the builders' ``tokenizer=``.

The example builders (`causal_lm_examples`, `sft_examples`,
`classification_examples`, `bert_pretraining_examples`) take ``tokenizer=``:

- a keras-hub `Tokenizer` (`BytePairTokenizer`, `SentencePieceTokenizer`,
  `WordPieceTokenizer` and the model tokenizers built on them, such as
  `Llama3Tokenizer`, `Gemma3Tokenizer`, `BertTokenizer`);
- a keras-hub `Preprocessor` (a preset's ``CausalLMPreprocessor``,
  ``TextClassifierPreprocessor`` ...): its tokenizer, and the special tokens
  its packer adds;
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

from tfpack.errors import TfpackError

__all__ = ["TextTokenizer", "text_tokenizer"]


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
            rows = _rows(self.tokenizer(texts))
        else:
            rows = [_ids(self.tokenizer(t)) for t in texts]
        if len(rows) != len(texts):
            raise TfpackError(f"`tokenizer` must give one row of ids per text. "
                              f"Received: {len(rows)} rows for {len(texts)} texts")
        return rows


def text_tokenizer(
    tokenizer,
    *,
    start_ids: int | Sequence[int] | None = None,
    end_ids: int | Sequence[int] | None = None,
    separator_ids: int | Sequence[int] | None = None,
    mask_id: int | None = None,
    vocabulary_size: int | None = None,
    batched: bool | None = None,
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

    Returns:
        The `TextTokenizer`.

    Raises:
        TfpackError: ``tokenizer`` is none of the above, or pads its output
            (a keras-hub tokenizer with ``sequence_length`` set).
    """
    given = {"start_ids": start_ids, "end_ids": end_ids, "separator_ids": separator_ids,
             "mask_id": mask_id, "vocabulary_size": vocabulary_size, "batched": batched}
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
    elif callable(tokenizer):
        fields = {"tokenizer": tokenizer}
    else:
        raise TfpackError(
            "`tokenizer` must be a keras-hub Tokenizer or Preprocessor, a callable from a "
            f"string to ids, or a TextTokenizer. Received: tokenizer={tokenizer!r}")
    fields.update(overrides)
    if "separator_ids" not in fields:
        fields["separator_ids"] = fields.get("end_ids", ())
    return TextTokenizer(**fields)


def reject_vocab_path(vocab_path) -> None:
    """The builders' ``vocab_path`` (the bundled WordPiece) excludes ``tokenizer``."""
    if vocab_path is not None:
        raise TfpackError("Pass `tokenizer` or `vocab_path`, not both. "
                          f"Received: vocab_path={vocab_path!r}")


def _keras_hub_base(obj) -> str | None:
    """"Tokenizer" or "Preprocessor" for keras-hub's base classes (keras-hub not imported)."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("keras_hub.") and cls.__name__ in ("Tokenizer",
                                                                        "Preprocessor"):
            return cls.__name__
    return None


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


def _rows(output) -> list[list[int]]:
    """Rows of ids from a keras-hub tokenizer's batch output (lists, ragged or numpy)."""
    if hasattr(output, "to_list"):  # tf.RaggedTensor
        output = output.to_list()
    elif hasattr(output, "numpy"):
        output = output.numpy()
    return [_ids(row) for row in output]


def _ids(row) -> list[int]:
    array = np.asarray(row.numpy() if hasattr(row, "numpy") else row)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise TfpackError("`tokenizer` must give a flat list of int ids per string. "
                          f"Received: {array.dtype} ids of shape {array.shape}")
    if array.size and array.min() < 0:
        raise TfpackError(f"Token ids must be non-negative. Received: {int(array.min())}")
    return array.astype(np.int64).tolist()
