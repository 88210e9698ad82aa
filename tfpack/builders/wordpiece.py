"""BERT's WordPiece tokenization, with character offsets into the original text.

The bundled tokenizer of the builders (``vocab_path`` instead of a model's
``tokenizer=``). It reads text as BERT's reference does (Hugging Face
``tokenizers``' ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece``, the
pipeline of a ``bert-base-uncased`` ``tokenizer.json``):

1. **Cleaning**: NUL, U+FFFD and control, format and private-use characters
   (Unicode ``Cc``, ``Cf``, ``Co``; soft hyphen, zero-width space and joiners,
   BOM) vanish without splitting the word ("co\\u00adoperation" is one
   word); every Unicode space (``\\t``, ``\\n``, ``\\r``, no-break and the
   other ``Zs`` spaces, U+2028/U+2029, ideographic U+3000) is a space.
2. **CJK**: every CJK ideograph is a word of its own.
3. **Lower case** (uncased vocabularies): accents stripped (NFD, marks
   ``Mn`` removed), then lower-cased, character by character.
4. **Words**: split at spaces; every punctuation character (Unicode ``P*``
   and ASCII symbols such as ``$`` and ``+``) is a word of its own.
5. **WordPiece**: greedy longest match, ``##`` before non-initial pieces; a
   word longer than 100 characters (characters, not bytes), or one the
   vocabulary cannot spell, is one ``[UNK]``.

Each token's ``(start, end)`` indexes the caller's original string
(characters), so a dropped accent or a vanished soft hyphen never moves a
span. The tests compare ids and offsets with the ``tokenizers`` reference on
adversarial strings.

>>> ids, offsets = wordpiece_with_offsets(["Héllo, Wörld", "10\\u00a0km"])
>>> ids[0], offsets[0]
([7592, 1010, 2088], [(0, 5), (5, 6), (7, 12)])
>>> ids[1], offsets[1]
([2184, 2463], [(0, 2), (3, 5)])
"""

from __future__ import annotations

import functools
import string
import unicodedata
from collections.abc import Callable

from tfpack.builders.vocab import load_vocab
from tfpack.errors import TfpackError

__all__ = ["WordPiece", "wordpiece_with_offsets"]

MAX_WORD_CHARACTERS = 100
# What a normalized character is to `split_words`: a word boundary (dropped),
# a word of its own, or part of the current word.
SPACE, PUNCTUATION, WORD = 0, 1, 2
# Rust's `char::is_whitespace` (the White_Space property), less the control
# characters among them (\v, \f, U+0085), which cleaning removes first.
SPACES = frozenset("\t\n\r \u00a0\u1680\u2028\u2029\u202f\u205f\u3000"
                    + "".join(map(chr, range(0x2000, 0x200B))))
# Characters whose Unicode category changed after the reference's tables:
# U+166D (Po -> So) is still punctuation there, U+1734 (Mn -> Mc) still an
# accent, U+1885-U+1886 (Lo -> Mn) still letters.
_OLDPUNCTUATION = frozenset("\u166d")
_OLD_MARKS = frozenset("\u1734")
_OLD_LETTERS = frozenset("\u1885\u1886")
_CJK = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF),
        (0x2A700, 0x2B81F), (0x2B920, 0x2CEAF), (0x2F800, 0x2FA1F))


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


@functools.lru_cache(maxsize=1 << 16)
def _normalize_char(char: str, lower_case: bool) -> tuple[tuple[str, int], ...]:
    """What one original character becomes: ``(character, class)`` pairs."""
    code = ord(char)
    category = unicodedata.category(char)
    if char not in "\t\n\r" and (code in (0, 0xFFFD) or category in ("Cc", "Cf", "Co", "Cs")):
        return ()
    if char in SPACES:
        return ((" ", SPACE),)
    if lower_case:
        stripped = "".join(c for c in unicodedata.normalize("NFD", char)
                           if c in _OLD_LETTERS or (unicodedata.category(c) != "Mn"
                                                    and c not in _OLD_MARKS))
        char = "".join(c.lower() for c in stripped)
    pairs = tuple((c, PUNCTUATION if (c in string.punctuation or c in _OLDPUNCTUATION
                                       or unicodedata.category(c).startswith("P"))
                   else SPACE if c in SPACES else WORD) for c in char)
    # A CJK ideograph is padded with spaces (before lower-casing, which may
    # map a compatibility ideograph to its unified one).
    return ((" ", SPACE), *pairs, (" ", SPACE)) if _is_cjk(code) else pairs


def split_words(text: str, normalize: Callable[[str], tuple[tuple[str, int], ...]]
                ) -> list[tuple[str, list[int]]]:
    """The words of ``text``, each normalized and with its characters' origins.

    ``normalize`` maps one original character to ``(character, class)`` pairs
    (`SPACE`, `PUNCTUATION`, `WORD`): BERT's reference reading here
    (`_normalize_char`), keras-hub's own in `tfpack.builders.offsets`.

    >>> split_words("Hi, yo", lambda c: ((c, SPACE if c == " " else
    ...                                   PUNCTUATION if c == "," else WORD),))
    [('Hi', [0, 1]), (',', [2]), ('yo', [4, 5])]
    """
    words, current, origins = [], [], []

    def flush():
        if current:
            words.append(("".join(current), list(origins)))
            current.clear()
            origins.clear()

    for index, char in enumerate(text):
        for normalized, kind in normalize(char):
            if kind == WORD:
                current.append(normalized)
                origins.append(index)
            else:
                flush()
                if kind == PUNCTUATION:
                    words.append((normalized, [index]))
    flush()
    return words


class WordPiece:
    """A WordPiece vocabulary with BERT's reference reading of text (module docstring).

    Example:

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!"]
    >>> wordpiece = WordPiece(vocab)
    >>> wordpiece.tokenize_with_offsets(["UNAFFABLE!\\u200b"])
    ([[4, 5, 6, 7]], [[(0, 2), (2, 5), (5, 9), (9, 10)]])

    Args:
        vocabulary: the tokens, one per id.
        lower_case: strip accents and lower-case (an uncased vocabulary).
        unknown_token: the token of a word the vocabulary cannot spell.
    """

    def __init__(self, vocabulary: list[str], *, lower_case: bool = True,
                 unknown_token: str = "[UNK]"):
        self.ids = {token: i for i, token in enumerate(vocabulary)}
        if unknown_token not in self.ids:
            raise TfpackError(f"The vocabulary must hold `{unknown_token}`. Received: a "
                              f"vocabulary of {len(vocabulary)} tokens without it")
        self.lower_case = lower_case
        self.unknown_id = self.ids[unknown_token]

    @classmethod
    def from_file(cls, vocab_path: str | None = None, *, lower_case: bool = True) -> WordPiece:
        """From a ``vocab.txt`` (one token per line; bundled bert-base-uncased by default)."""
        return cls(load_vocab(vocab_path), lower_case=lower_case)

    def _pieces(self, word: str, count_bytes: bool = False) -> list[tuple[int, int, int]]:
        """``(id, first, end)`` of each piece; ``first``/``end`` index the word."""
        if (len(word.encode("utf-8")) if count_bytes else len(word)) > MAX_WORD_CHARACTERS:
            return [(self.unknown_id, 0, len(word))]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    pieces.append((self.ids[piece], start, end))
                    break
                end -= 1
            if end == start:
                return [(self.unknown_id, 0, len(word))]
            start = end
        return pieces

    def tokenize_with_offsets(self, texts: list[str]
                              ) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        """Per text, the token ids and each token's ``[start, end)`` in the text."""
        lower_case = self.lower_case
        cache, ids, offsets = {}, [], []

        def normalize(char):
            return _normalize_char(char, lower_case)

        for text in texts:
            if not isinstance(text, str):
                raise TfpackError("Every text must be a string. "
                                  f"Received: {type(text).__name__} {text!r:.80}")
            row_ids, row_offsets = [], []
            for word, origins in split_words(text, normalize):
                if word not in cache:
                    cache[word] = self._pieces(word)
                for token, first, end in cache[word]:
                    row_ids.append(token)
                    row_offsets.append((origins[first], origins[end - 1] + 1))
            ids.append(row_ids)
            offsets.append(row_offsets)
        return ids, offsets

    def __call__(self, texts: list[str]) -> list[list[int]]:
        """Per text, the token ids."""
        return self.tokenize_with_offsets(texts)[0]


def wordpiece_with_offsets(texts: list[str], *, vocab_path: str | None = None,
                           lower_case: bool = True
                           ) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    """Token ids and character spans ``[start, end)`` of every text's tokens.

    Args:
        texts: the strings.
        vocab_path: a WordPiece ``vocab.txt`` (bundled bert-base-uncased by default).
        lower_case: strip accents and lower-case, as an uncased vocabulary expects.

    Returns:
        ``(ids, offsets)``: per text, the ids and the spans in the original text.
    """
    return WordPiece.from_file(vocab_path, lower_case=lower_case).tokenize_with_offsets(
        list(texts))
