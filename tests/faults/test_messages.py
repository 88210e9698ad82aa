"""Fault injection, today's one-line errors off their path (issue 23).

`builders.load_vocab` (``vocab_path=`` of the builders and `WordPiece.from_file`),
`plots.check_target` and ``tfpack analyze --plot``, handed what a careless or
hostile caller would.

Found here: ``vocab_path`` given as an int (or a bool) was a file *descriptor* to
`open`: ``vocab_path=True`` read standard output and closed it, an open
descriptor was read and closed under its owner, a closed one was a TypeError
traceback from the error message itself; a list or a path holding a NUL byte
was a TypeError/ValueError traceback.
"""

import os

import pytest

from tests.faults.outcomes import HELD, judge_call
from tfpack.builders.bert import load_vocab
from tfpack.builders.wordpiece import WordPiece


@pytest.mark.parametrize("vocab_path", [True, 99, "open-fd", ["vocab.txt"], "a\x00b", 3.5],
                         ids=["true", "closed-fd", "open-fd", "a-list", "nul", "float"])
@pytest.mark.parametrize("reader", [load_vocab, WordPiece.from_file],
                         ids=["load_vocab", "WordPiece.from_file"])
def test_a_vocab_path_that_is_not_a_path_is_one_line_and_touches_no_descriptor(tmp_path, reader,
                                                                             vocab_path):
    mine = tmp_path / "mine.txt"
    mine.write_text("[PAD]\n[UNK]\n")
    fd = os.open(mine, os.O_RDONLY)
    try:
        if vocab_path == "open-fd":
            vocab_path = fd
        spare = os.dup(1)  # vocab_path=True would close standard output: keep it to restore
        try:
            verdict = judge_call(lambda: reader(vocab_path), refuse=True,
                                 match=f"Received: vocab_path={vocab_path!r}")
        finally:
            os.dup2(spare, 1)
            os.close(spare)
        assert verdict.outcome == HELD, verdict
        assert os.read(fd, 5) == b"[PAD]"  # the descriptor still open, still at its start
    finally:
        os.close(fd)
