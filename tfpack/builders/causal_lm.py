"""Causal-LM examples: documents cut into pieces, and prompt/response pairs.

`causal_lm_examples` (pre-training): tokenized documents cut into pieces of
at most ``L`` tokens. `sft_examples` (supervised fine-tuning): prompt/response
pairs whose prompt targets are not trained.

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
>>> pieces = tfpack.builders.causal_lm_examples(docs, max_length=4)
>>> [p["input_ids"].numpy().tolist() for p in pieces]
[[1, 2, 3, 4], [5, 6]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfpack import _tensorflow
from tfpack.builders.tokenizers import reject_vocab_path, text_tokenizer
from tfpack.features import FeatureRoles
from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, Integer, token_ids,
                           validate_params)

if TYPE_CHECKING:  # the annotations' `tf`; the functions import it (`tfpack._tensorflow`)
    import tensorflow as tf

__all__ = ["causal_lm_examples", "sft_examples"]


@validate_params({
    "documents": Anything("texts or token ids, checked document by document"),
    "max_length": Integer(1), "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(), "min_length": Integer(1),
})
def causal_lm_examples(
    documents,
    max_length: int,
    *,
    tokenizer=None,
    vocab_path: str | None = None,
    lower_case: bool = True,
    min_length: int = 1,
) -> tf.data.Dataset:
    """Split documents into causal-LM pieces of at most ``max_length`` tokens.

    With ``tokenizer=`` (the model's own; see `tfpack.builders.text_tokenizer`)
    each document becomes ``start + ids + end`` as keras-hub's
    ``CausalLMPreprocessor`` makes it (e.g. ``<bos> ... <eos>`` for Gemma,
    ``<|begin_of_text|> ... <|end_of_text|>`` for Llama 3), then is cut:

    >>> import tfpack
    >>> words = {"the": 5, "cat": 6, "sat": 7}
    >>> tokenizer = tfpack.builders.text_tokenizer(
    ...     lambda s: [words[w] for w in s.split()], start_ids=1, end_ids=2)
    >>> pieces = tfpack.builders.causal_lm_examples(["the cat sat", "the cat"],
    ...                                         max_length=4, tokenizer=tokenizer)
    >>> [p["input_ids"].numpy().tolist() for p in pieces]
    [[1, 5, 6, 7], [2], [1, 5, 6, 2]]

    Args:
        documents: a `tf.data.Dataset` of ``{"input_ids": [n]}`` (already
            tokenized), or a list of documents, each a string or a list of
            sentences (joined with spaces when ``tokenizer`` is given).
        max_length: ``L``, the longest piece.
        tokenizer: the model's tokenizer: a keras-hub `Tokenizer` or
            `Preprocessor`, a callable from a string to ids, or a
            `TextTokenizer` (its start and end ids frame every document).
            None: the WordPiece `BertTokenizer` (bundled bert-base-uncased
            vocabulary unless ``vocab_path``), no special tokens.
        vocab_path, lower_case: the WordPiece vocabulary, without
            ``tokenizer``.
        min_length: drop pieces shorter than this (e.g. 2: a piece of one
            token has no target).

    Returns:
        A dataset of ``{"input_ids": int32 [n]}``, ``min_length <= n <= L``,
        in document order.
    """
    tf = _tensorflow.require("tfpack.builders.causal_lm_examples")
    if isinstance(documents, tf.data.Dataset):
        if tokenizer is not None:
            raise TfpackError("`tokenizer` tokenizes text: `documents` must be a list of "
                              "strings with it. Received: a tf.data.Dataset of ids")
    elif tokenizer is not None:
        documents = _with_tokenizer(documents, tokenizer, vocab_path)
    else:
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
    from tfpack.builders.bert import tokenize_documents

    as_sentences = [[d] if isinstance(d, str) else list(d) for d in documents]
    tokenized = tokenize_documents(as_sentences, vocab_path, lower_case=lower_case)
    if not tokenized:
        raise TfpackError("`documents` must hold some text. Received: no tokens")
    return _ids_dataset({"input_ids": [[t for s in d for t in s.tolist()] for d in tokenized]})


def _with_tokenizer(documents, tokenizer, vocab_path) -> tf.data.Dataset:
    reject_vocab_path(vocab_path)
    tokenizer = text_tokenizer(tokenizer)
    texts = [d if isinstance(d, str) else " ".join(d) for d in documents]
    framed = [list(tokenizer.start_ids) + ids + list(tokenizer.end_ids)
              for ids in tokenizer(texts)]
    framed = [ids for ids in framed if ids]
    if not framed:
        raise TfpackError("`documents` must hold some text. Received: no tokens")
    return _ids_dataset({"input_ids": framed})


def _ids_dataset(columns: dict) -> tf.data.Dataset:
    """One example per row of equal-length rows: int32 ids, float32 ``loss_weights``."""
    tf = _tensorflow.require("tfpack.builders' tf.data datasets (causal LM, SFT, preferences)")
    ragged = {name: tf.ragged.constant(rows, dtype=tf.float32 if name == "loss_weights"
                                       else tf.int32)
              for name, rows in columns.items()}
    count = len(next(iter(columns.values())))
    # Indexing a RaggedTensor row gives a dense tensor, which the packers expect.
    return tf.data.Dataset.range(count).map(
        lambda i: {name: rows[i] for name, rows in ragged.items()})


@validate_params({
    "pairs": Anything("(prompt, response) pairs, checked pair by pair"),
    "max_length": Integer(2), "tokenizer": Anything("checked by text_tokenizer"),
    "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
})
def sft_examples(
    pairs,
    max_length: int,
    *,
    tokenizer=None,
    vocab_path: str | None = None,
    lower_case: bool = True,
) -> tf.data.Dataset:
    """Prompt/response pairs as causal-LM examples that train the response only.

    Each pair becomes ``{"input_ids": prompt + response, "loss_weights": w}``
    where ``w[i]`` weighs the target of position ``i`` (the next token): 1.0
    when that next token is a response token, else 0.0 (the "assistant-only
    loss"). Packing (`tfpack.data.pack`, ``sft`` roles, inferred from
    ``loss_weights``) carries ``loss_weights`` into the packs as a token
    feature next to the derived ``labels``; `tfpack.models.CausalLM` weighs its
    loss with it.

    Worked example, prompt ``[1, 2, 3]``, response ``[7, 8]``::

        input_ids     [1,   2,   3,   7,   8]
        labels        [2,   3,   7,   8,   -100]   (derived when packing)
        loss_weights  [0.0, 0.0, 1.0, 1.0, 0.0]

    >>> pairs = sft_examples([([1, 2, 3], [7, 8])], max_length=8)
    >>> [(x["input_ids"].numpy().tolist(), x["loss_weights"].numpy().tolist())
    ...  for x in pairs]
    [([1, 2, 3, 7, 8], [0.0, 0.0, 1.0, 1.0, 0.0])]

    With ``tokenizer=`` (the model's own; see `tfpack.builders.text_tokenizer`)
    a pair becomes ``start + prompt + response + end``, the ids and weights
    keras-hub's ``Gemma3CausalLMPreprocessor`` gives for
    ``{"prompts": ..., "responses": ...}`` (the end token is trained: the
    model learns to stop).

    Args:
        pairs: a list of ``(prompt, response)``; each either a list of token
            ids (taken as they are) or a string. Strings are tokenized by
            ``tokenizer``, or without it with the WordPiece `BertTokenizer`
            (bundled bert-base-uncased vocabulary unless ``vocab_path``) as
            ``[CLS] prompt [SEP]`` and ``response [SEP]`` (the final ``[SEP]``
            is trained: the model learns to stop).
        max_length: ``L``; a longer pair loses the end of its response.
        tokenizer: the model's tokenizer: a keras-hub `Tokenizer` or
            `Preprocessor`, a callable from a string to ids, or a
            `TextTokenizer`; its start and end ids frame every pair.

    Returns:
        A dataset of ``{"input_ids": int32 [n], "loss_weights": float32 [n]}``,
        ``n <= L``, in input order.

    Raises:
        TfpackError: an empty prompt or response, or a prompt that leaves no
            room for a response token in ``max_length``.
    """
    pairs = [tuple(p) for p in pairs]
    if not pairs or any(len(p) != 2 for p in pairs):
        raise TfpackError("`pairs` must be a non-empty list of (prompt, response). "
                          f"Received: {len(pairs)} items")
    if tokenizer is None:
        prompts = _pair_ids([p for p, _ in pairs], "prompt", vocab_path, lower_case)
        responses = _pair_ids([r for _, r in pairs], "response", vocab_path, lower_case)
    else:
        reject_vocab_path(vocab_path)
        tokenizer = text_tokenizer(tokenizer)
        prompts = [list(tokenizer.start_ids) + ids
                   for ids in _tokenized_texts([p for p, _ in pairs], tokenizer)]
        responses = [ids + list(tokenizer.end_ids)
                     for ids in _tokenized_texts([r for _, r in pairs], tokenizer)]
    for what, rows in (("prompt", prompts), ("response", responses)):
        empty = [index for index, ids in enumerate(rows) if not ids]
        if empty:
            raise TfpackError(f"Every {what} must have at least one token. "
                              f"Received: pair {empty[0]} with an empty {what}")
    ids, weights = [], []
    for index, (prompt, response) in enumerate(zip(prompts, responses)):
        if len(prompt) >= max_length:
            raise TfpackError(
                f"Every prompt must leave room for its response in max_length={max_length}. "
                f"Received: pair {index} with a prompt of {len(prompt)} tokens")
        tokens = (prompt + response)[:max_length]
        # Position i predicts token i + 1: trained when that token is a response token.
        target_is_response = [float(i + 1 >= len(prompt)) for i in range(len(tokens) - 1)]
        ids.append(tokens)
        weights.append(target_is_response + [0.0])
    return _ids_dataset({"input_ids": ids, "loss_weights": weights})


def _tokenized_texts(texts, tokenizer) -> list[list[int]]:
    """Ids of each text: strings through ``tokenizer``, id lists as they are."""
    strings = [i for i, t in enumerate(texts) if isinstance(t, str)]
    out = [None if isinstance(t, str) else [int(x) for x in t] for t in texts]
    for i, ids in zip(strings, tokenizer([texts[i] for i in strings])):
        out[i] = ids
    return out


def _pair_ids(texts, what, vocab_path, lower_case, name=None) -> list[list[int]]:
    """Token ids of each prompt (or response); strings tokenized with WordPiece."""
    out = [None] * len(texts)
    strings = [i for i, t in enumerate(texts) if isinstance(t, str)]
    if strings:
        from tfpack.builders.bert import load_vocab, tokenize_documents

        vocab = {token: i for i, token in enumerate(load_vocab(vocab_path))}
        tokenized = tokenize_documents([[texts[i]] for i in strings], vocab_path,
                                       lower_case=lower_case)
        if len(tokenized) != len(strings):
            raise TfpackError(f"Every {what} must have some text. Received: an empty {what}")
        start = [vocab["[CLS]"]] if what == "prompt" else []
        for i, (sentence,) in zip(strings, tokenized):
            out[i] = start + sentence.tolist() + [vocab["[SEP]"]]
    for index, value in enumerate(texts):
        if out[index] is None:
            out[index] = token_ids(value, name or what, where=f"in pair {index}").tolist()
    return out
