"""BERT pre-training examples from raw text, as Google's ``create_pretraining_data``.

Documents (lists of sentences) are tokenized as BERT's reference tokenizer
does (`tfpack.builders.wordpiece`) over a WordPiece vocabulary (the bundled
bert-base-uncased one by default), or with the model's own ``tokenizer=``,
then cut into sentence-pair examples the way Google's
``create_pretraining_data.py`` does:

- a target length of ``max_seq_length - 3`` tokens, or with probability
  ``short_seq_prob`` (0.1) a random one in ``[2, max_seq_length - 3]``;
- segment B is the true continuation, or with probability 0.5 (always for a
  one-segment chunk) text from a random other document:
  ``next_sentence_labels`` 1 means "random next";
- the pair is truncated from a random end to fit ``[CLS] A [SEP] B [SEP]``;
- ``masked_lm_prob`` (15%) of the tokens, at least 1 and at most
  ``max_predictions_per_seq``, are predicted: 80% replaced by ``[MASK]``, 10%
  by a random vocabulary token, 10% kept.

All randomness comes from one ``random.Random(seed)``: same seed, same
examples. Output features are the unpacked ``bert`` roles of
`tfpack.data.features`, ready for `tfpack.data.pack`.

Example:

>>> import tfpack
>>> docs = tfpack.datasets.stdlib_documents(max_documents=20)
>>> ds = tfpack.builders.bert_pretraining_examples(docs, max_seq_length=64, seed=1)
>>> sorted(ds.element_spec)  # doctest: +NORMALIZE_WHITESPACE
['input_ids', 'masked_lm_ids', 'masked_lm_positions', 'masked_lm_weights',
 'next_sentence_labels', 'token_type_ids']
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import tensorflow as tf

from tfpack.builders.tokenizers import TextTokenizer, reject_vocab_path, text_tokenizer
from tfpack.builders.vocab import load_vocab
from tfpack.builders.wordpiece import WordPiece
from tfpack.errors import TfpackError
from tfpack.params import (Anything, Boolean, ExistingFile, InstanceOf, Integer, Real,
                           validate_params)

__all__ = ["BertExample", "bert_pretraining_examples", "compact_vocabulary",
           "create_bert_examples", "tokenize_documents", "load_vocab"]

_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclasses.dataclass(frozen=True)
class BertExample:
    """One unpacked pre-training example (token ids, not strings)."""

    input_ids: list[int]
    token_type_ids: list[int]
    masked_lm_positions: list[int]
    masked_lm_ids: list[int]
    next_sentence_label: int


@validate_params({"documents": Anything("lists of sentences"),
                  "vocab_path": [None, ExistingFile()], "lower_case": Boolean()})
def tokenize_documents(documents: list[list[str]], vocab_path: str | None = None,
                       *, lower_case: bool = True) -> list[list[np.ndarray]]:
    """WordPiece ids of every sentence, read as BERT's reference reads text.

    (`tfpack.builders.wordpiece`.) Returns documents as lists of int32
    arrays; empty sentences and documents are dropped.
    """
    sentences = [s for d in documents for s in d]
    if not sentences:
        return []
    rows = WordPiece.from_file(vocab_path, lower_case=lower_case)(sentences)
    splits = np.cumsum([0] + [len(r) for r in rows])
    flat = np.asarray([t for r in rows for t in r], np.int32)
    out, k = [], 0
    for document in documents:
        pieces = [flat[splits[i]:splits[i + 1]] for i in range(k, k + len(document))]
        k += len(document)
        pieces = [p for p in pieces if len(p)]
        if pieces:
            out.append(pieces)
    return out


@validate_params({"documents": Anything("tokenized documents"),
                  "vocab": InstanceOf(list, tuple, description="a list of tokens")})
def compact_vocabulary(documents: list[list[np.ndarray]], vocab: list[str]
                       ) -> tuple[list[list[np.ndarray]], list[str]]:
    """Renumber token ids to the tokens the documents use, special tokens first.

    A small model trained on a small corpus need not carry a 30,522-way output
    layer: with the vocabulary cut to the tokens that occur, its masked-LM
    head costs about as much relative to the encoder as BERT's does at full
    size. Special tokens keep ids 0..4 (``[PAD]`` stays 0).

    Example:

    >>> import numpy as np
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    >>> docs, small = compact_vocabulary([[np.array([7, 5]), np.array([7])]], vocab)
    >>> [d.tolist() for d in docs[0]], small
    ([[6, 5], [6]], ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'a', 'c'])

    Args:
        documents: tokenized documents (lists of int arrays), as
            `tokenize_documents` returns them.
        vocab: the vocabulary they were tokenized with.

    Returns:
        ``(documents, vocabulary)`` with ids into the new, smaller vocabulary;
        pass both to `create_bert_examples`.
    """
    missing = [t for t in _SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise TfpackError(f"`vocab` must hold the special tokens {list(_SPECIAL_TOKENS)}. "
                          f"Received: a vocabulary without {missing}")
    special = np.array([vocab.index(t) for t in _SPECIAL_TOKENS])
    used = np.unique(np.concatenate([s for d in documents for s in d] + [special]))
    kept = np.concatenate([special, np.setdiff1d(used, special)])
    renumber = np.zeros(len(vocab), dtype=np.int32)
    renumber[kept] = np.arange(kept.size, dtype=np.int32)
    return [[renumber[s] for s in d] for d in documents], [vocab[i] for i in kept]


# Google's create_pretraining_data options (the least `max_seq_length` depends on the
# special tokens: checked in `_create`).
_GOOGLE_OPTIONS = {
    "max_seq_length": Integer(1), "short_seq_prob": Real(0, 1), "masked_lm_prob": Real(0, 1),
    "max_predictions_per_seq": Integer(0), "dupe_factor": Integer(1), "seed": Integer(),
}


@validate_params({"documents": Anything("tokenized documents"),
                  "vocab": InstanceOf(list, tuple, description="a list of tokens"),
                  **_GOOGLE_OPTIONS})
def create_bert_examples(
    documents: list[list[np.ndarray]],
    vocab: list[str],
    *,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    dupe_factor: int = 1,
    seed: int = 0,
) -> list[BertExample]:
    """Sentence-pair, masked examples from tokenized documents (Google's algorithm)."""
    special = _Special((vocab.index("[CLS]"),), (vocab.index("[SEP]"),),
                       (vocab.index("[SEP]"),), vocab.index("[MASK]"))
    return _create(documents, special, len(vocab), max_seq_length=max_seq_length,
                   short_seq_prob=short_seq_prob, masked_lm_prob=masked_lm_prob,
                   max_predictions_per_seq=max_predictions_per_seq,
                   dupe_factor=dupe_factor, seed=seed)


@dataclasses.dataclass(frozen=True)
class _Special:
    """The ids around and between the two segments, and the mask id."""

    start: tuple[int, ...]
    separator: tuple[int, ...]
    end: tuple[int, ...]
    mask: int

    @property
    def count(self) -> int:
        return len(self.start) + len(self.separator) + len(self.end)


def _create(documents, special, vocab_size, *, max_seq_length, short_seq_prob,
            masked_lm_prob, max_predictions_per_seq, dupe_factor, seed):
    if max_seq_length < special.count + 2:
        raise TfpackError(f"`max_seq_length` must be at least {special.count + 2} (two tokens "
                          f"and {special.count} special ones). "
                          f"Received: max_seq_length={max_seq_length}")
    if not documents:
        raise TfpackError("`documents` must hold at least one non-empty document. "
                          "Received: documents=[]")
    rng = random.Random(seed)
    examples = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            examples += _from_document(documents, index, max_seq_length, short_seq_prob,
                                       masked_lm_prob, max_predictions_per_seq, vocab_size,
                                       special, rng)
    rng.shuffle(examples)
    return examples


def _from_document(documents, index, max_seq_length, short_seq_prob, masked_lm_prob,
                   max_predictions, vocab_size, special, rng):
    document = documents[index]
    max_tokens = max_seq_length - special.count
    target = max_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_tokens)
    examples, chunk, chunk_length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if i == len(document) - 1 or chunk_length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for s in chunk[:a_end] for t in s]
            tokens_b = []
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random_next = 1
                for _ in range(10):
                    other = rng.randint(0, len(documents) - 1)
                    if other != index:
                        break
                other_doc = documents[other]
                for j in range(rng.randint(0, len(other_doc) - 1), len(other_doc)):
                    tokens_b += list(other_doc[j])
                    if len(tokens_b) >= target - len(tokens_a):
                        break
                i -= len(chunk) - a_end  # unused segments go back to the document
            else:
                is_random_next = 0
                tokens_b = [t for s in chunk[a_end:] for t in s]
            _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
            if tokens_a and tokens_b:
                tokens = [*special.start, *map(int, tokens_a), *special.separator,
                          *map(int, tokens_b), *special.end]
                first = len(special.start) + len(tokens_a) + len(special.separator)
                types = [0] * first + [1] * (len(tokens) - first)
                tokens, positions, labels = _mask(tokens, masked_lm_prob, max_predictions,
                                                  vocab_size, special, rng)
                examples.append(BertExample(tokens, types, positions, labels, is_random_next))
            chunk, chunk_length = [], 0
        i += 1
    return examples


def _truncate_pair(tokens_a, tokens_b, max_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _mask(tokens, masked_lm_prob, max_predictions, vocab_size, special, rng):
    specials = {*special.start, *special.separator, *special.end}
    candidates = [i for i, t in enumerate(tokens) if t not in specials]
    rng.shuffle(candidates)
    count = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    output = list(tokens)
    chosen = sorted(candidates[:count])
    for index in chosen:
        if rng.random() < 0.8:
            output[index] = special.mask
        elif rng.random() < 0.5:
            output[index] = tokens[index]
        else:
            output[index] = rng.randint(0, vocab_size - 1)
    return output, chosen, [tokens[i] for i in chosen]


@validate_params({"documents": Anything("lists of sentences"),
                  "tokenizer": Anything("checked by text_tokenizer"),
                  "vocab_path": [None, ExistingFile()], "lower_case": Boolean(),
                  **_GOOGLE_OPTIONS})
def bert_pretraining_examples(
    documents: list[list[str]],
    *,
    tokenizer=None,
    vocab_path: str | None = None,
    lower_case: bool = True,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    dupe_factor: int = 1,
    seed: int = 0,
) -> tf.data.Dataset:
    """Raw documents -> tokenizer -> unpacked BERT pre-training examples.

    Args:
        documents: lists of sentences (e.g. `tfpack.datasets.stdlib_documents`).
        tokenizer: the model's own tokenizer (`tfpack.builders.text_tokenizer`:
            a keras-hub `Tokenizer` or `Preprocessor`, or a callable with
            explicit ids), with start, separator, end and mask ids and a
            vocabulary size (a keras-hub `BertTokenizer` has them all:
            ``[CLS] a [SEP] b [SEP]``). None: the WordPiece vocabulary below.
        vocab_path: WordPiece vocabulary, without ``tokenizer``; default the
            bundled bert-base-uncased.
        lower_case: lower-case and strip accents before WordPiece.
        max_seq_length: tokens per example, ``[CLS]`` and ``[SEP]`` included.
        short_seq_prob, masked_lm_prob, max_predictions_per_seq, dupe_factor:
            as Google's ``create_pretraining_data.py``.
        seed: seeds pairing, truncation and masking.

    Returns:
        A dataset of dicts: ``input_ids``, ``token_type_ids``,
        ``masked_lm_positions``, ``masked_lm_ids`` (int32 ``[n]``/``[m]``),
        ``masked_lm_weights`` (float32 ``[m]``), ``next_sentence_labels``
        (int32 scalar). Pack it with
        ``ds.apply(tfpack.data.pack(max_length=max_seq_length, ...))``.
    """
    options = dict(max_seq_length=max_seq_length, short_seq_prob=short_seq_prob,
                   masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
                   dupe_factor=dupe_factor, seed=seed)
    if tokenizer is None:
        vocab = load_vocab(vocab_path)
        tokenized = tokenize_documents(documents, vocab_path, lower_case=lower_case)
        return examples_to_dataset(create_bert_examples(tokenized, vocab, **options))
    reject_vocab_path(vocab_path)
    tokenizer = text_tokenizer(tokenizer)
    special, vocab_size = _masked_lm_ids(tokenizer)
    rows = iter(tokenizer([sentence for document in documents for sentence in document]))
    tokenized = [[np.asarray(ids, np.int32) for ids in (next(rows) for _ in document) if ids]
                 for document in documents]
    return examples_to_dataset(_create([d for d in tokenized if d], special, vocab_size,
                                       **options))


def _masked_lm_ids(tokenizer: TextTokenizer) -> tuple[_Special, int]:
    missing = [name for name, value in (("start_ids", tokenizer.start_ids),
                                        ("separator_ids", tokenizer.separator_ids),
                                        ("end_ids", tokenizer.end_ids),
                                        ("mask_id", tokenizer.mask_id),
                                        ("vocabulary_size", tokenizer.vocabulary_size))
               if value in (None, ())]
    if missing:
        raise TfpackError("BERT pre-training examples need a tokenizer with start, separator, "
                          "end and mask ids and a vocabulary size (e.g. a keras-hub "
                          f"BertTokenizer). Received: a tokenizer without {missing}")
    return (_Special(tokenizer.start_ids, tokenizer.separator_ids, tokenizer.end_ids,
                     tokenizer.mask_id), tokenizer.vocabulary_size)


@validate_params({"examples": InstanceOf(list, tuple, description="a list of BertExample")})
def examples_to_dataset(examples: list[BertExample]) -> tf.data.Dataset:
    """A `tf.data.Dataset` of the ``bert`` roles from `BertExample` objects.

    Example:

    >>> from tfpack.builders.bert import BertExample
    >>> ds = examples_to_dataset([BertExample([2, 9, 3], [0, 0, 0], [1], [7], 0)])
    >>> next(iter(ds))["masked_lm_ids"].numpy().tolist()
    [7]
    """
    if not examples:
        raise TfpackError("`examples` must not be empty. Received: 0 examples")
    ragged = lambda rows, dtype: tf.RaggedTensor.from_row_lengths(
        np.asarray([t for r in rows for t in r], dtype),
        np.asarray([len(r) for r in rows], np.int64))
    positions = [e.masked_lm_positions for e in examples]
    tensors = {
        "input_ids": ragged([e.input_ids for e in examples], np.int32),
        "token_type_ids": ragged([e.token_type_ids for e in examples], np.int32),
        "masked_lm_positions": ragged(positions, np.int32),
        "masked_lm_ids": ragged([e.masked_lm_ids for e in examples], np.int32),
        "masked_lm_weights": ragged([[1.0] * len(p) for p in positions], np.float32),
        "next_sentence_labels": tf.constant([e.next_sentence_label for e in examples],
                                            tf.int32),
    }
    # Indexing a RaggedTensor row gives a dense tensor, which the packers expect.
    return tf.data.Dataset.range(len(examples)).map(
        lambda i: {name: t[i] for name, t in tensors.items()})
