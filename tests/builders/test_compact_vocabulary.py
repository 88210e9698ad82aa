"""`compact_vocabulary`: ids renumbered to the tokens in use, nothing else changed."""

import numpy as np
import pytest

from tfpack import data
from tfpack.errors import TfpackError

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "mat"]


def test_keeps_special_tokens_first_and_renumbers_in_order():
    docs = [[np.array([8, 6]), np.array([6, 5])], [np.array([8])]]
    compact, vocab = data.compact_vocabulary(docs, VOCAB)
    assert vocab == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "mat"]
    assert [[s.tolist() for s in d] for d in compact] == [[[7, 6], [6, 5]], [[7]]]
    # Every token maps back to the same string.
    for before, after in zip(docs, compact):
        for s, t in zip(before, after):
            assert [VOCAB[i] for i in s] == [vocab[i] for i in t]


def test_real_text_round_trips_through_the_bundled_vocabulary():
    full = data.load_vocab()
    docs = data.tokenize_documents([["Packing removes padding.", "Nothing is lost."]])
    compact, vocab = data.compact_vocabulary(docs, full)
    assert len(vocab) < 20
    assert [[vocab[i] for i in s] for s in compact[0]] == [[full[i] for i in s] for s in docs[0]]
    examples = data.create_bert_examples(compact, vocab, max_seq_length=16, seed=0)
    assert max(max(e.input_ids) for e in examples) < len(vocab)


def test_vocabulary_without_special_tokens_is_a_clear_error():
    with pytest.raises(TfpackError, match=r"Received: a vocabulary without \['\[MASK\]'\]"):
        data.compact_vocabulary([[np.array([1])]], VOCAB[:4] + VOCAB[5:])
