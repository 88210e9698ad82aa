"""Reading a WordPiece vocabulary file (`vocab.txt`, one token a line)."""

from __future__ import annotations

import os

from tfpack.errors import TfpackError
from tfpack.params import ExistingFile, validate_params

__all__ = ["load_vocab"]


@validate_params({"vocab_path": [None, ExistingFile()]})
def load_vocab(vocab_path: str | None = None) -> list[str]:
    """The WordPiece vocabulary, one token per line (bundled one by default).

    Example:

    >>> vocab = load_vocab()
    >>> len(vocab), vocab[101], vocab[102]
    (30522, '[CLS]', '[SEP]')
    """
    if vocab_path is None:
        from tfpack.datasets import bert_vocab_path

        vocab_path = bert_vocab_path()
    try:
        # utf-8-sig: a byte-order mark first is not part of the first token.
        with open(vocab_path, encoding="utf-8-sig") as f:
            return [line.rstrip("\n") for line in f]
    except (OSError, UnicodeDecodeError, ValueError) as error:  # ValueError: a NUL in the path
        raise TfpackError(
            "`vocab_path` must be a readable UTF-8 text file, one token a line. "
            f"Received: vocab_path={os.fspath(vocab_path)!r} ({error})"
        ) from None
