"""Example builders: BERT pre-training from text, causal LM, classification, flattening."""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.builders.bert import create_bert_examples, load_vocab, tokenize_documents
from tfpack.errors import TfpackError

from packed_checks import dataset_from_examples, unpack

CLS, SEP, MASK = 101, 102, 103


@pytest.fixture(scope="module")
def documents():
    return tfpack.datasets.stdlib_documents(max_documents=40)


@pytest.fixture(scope="module")
def tokenized(documents):
    return tokenize_documents(documents)


def test_stdlib_documents_are_deterministic_english_without_imports():
    import sys

    first = tfpack.datasets.stdlib_documents(max_documents=5)
    assert first == tfpack.datasets.stdlib_documents(max_documents=5)
    assert all(len(d) >= 2 and all(isinstance(s, str) and len(s.split()) >= 4 for s in d)
               for d in first)
    assert "antigravity" not in sys.modules
    with pytest.raises(TfpackError, match="Received: max_documents=0"):
        tfpack.datasets.stdlib_documents(max_documents=0)


def test_bundled_vocab_tokenizes_like_bert_base_uncased():
    vocab = load_vocab()
    assert len(vocab) == 30522 and vocab[CLS] == "[CLS]" and vocab[MASK] == "[MASK]"
    (doc,) = tokenize_documents([["Hello, World!"]])
    assert [vocab[i] for i in doc[0]] == ["hello", ",", "world", "!"]


def test_bert_examples_follow_google_create_pretraining_data(tokenized):
    vocab = load_vocab()
    examples = create_bert_examples(tokenized, vocab, max_seq_length=64,
                                    max_predictions_per_seq=8, seed=3)
    assert examples == create_bert_examples(tokenized, vocab, max_seq_length=64,
                                            max_predictions_per_seq=8, seed=3)
    assert examples != create_bert_examples(tokenized, vocab, max_seq_length=64,
                                            max_predictions_per_seq=8, seed=4)
    streams = [np.concatenate(d).tolist() for d in tokenized]
    masked = kept = total = 0
    for e in examples:
        ids = list(e.input_ids)
        n = len(ids)
        original = list(ids)
        for p, t in zip(e.masked_lm_positions, e.masked_lm_ids):
            masked += ids[p] == MASK
            kept += ids[p] == t
            total += 1
            original[p] = t
        assert n <= 64 and original[0] == CLS and original[-1] == SEP
        assert original.count(SEP) == 2
        first_sep = original.index(SEP)
        assert e.token_type_ids == [0] * (first_sep + 1) + [1] * (n - first_sep - 1)
        assert len(e.masked_lm_positions) == min(8, max(1, round(n * 0.15)))
        assert e.masked_lm_positions == sorted(set(e.masked_lm_positions))
        assert not {0, first_sep, n - 1} & set(e.masked_lm_positions)
        # Segment A is a contiguous piece of one document.
        a = original[1:first_sep]
        assert any(_contains(s, a) for s in streams)
    assert 0.72 < masked / total < 0.88 and 0.04 < kept / total < 0.18
    labels = [e.next_sentence_label for e in examples]
    assert 0.3 < np.mean(labels) < 0.7
    assert min(len(e.input_ids) for e in examples) < 32  # short sequences happen


def _contains(stream, piece):
    first = piece[0]
    return any(stream[i:i + len(piece)] == piece
               for i in range(len(stream) - len(piece) + 1) if stream[i] == first)


def test_bert_dataset_packs_without_loss(documents):
    ds = tfpack.data.bert_pretraining_examples(documents[:4], max_seq_length=64, seed=0)
    examples = [{k: v.tolist() for k, v in x.items()} for x in ds.as_numpy_iterator()]
    packs = list(ds.apply(tfpack.data.pack(max_length=128, max_sequences_per_pack=3,
                                           max_predictions_per_pack=30)).as_numpy_iterator())
    from packed_checks import assert_same_examples
    assert_same_examples(examples, packs)


def test_causal_lm_pieces_and_labels_never_cross_sequences():
    docs = tf.data.Dataset.from_generator(
        lambda: iter([{"input_ids": [1, 2, 3, 4, 5, 6]}, {"input_ids": [7, 8, 9]}]),
        output_signature={"input_ids": tf.TensorSpec([None], tf.int32)})
    pieces = tfpack.data.causal_lm_examples(docs, max_length=4)
    assert [p["input_ids"].tolist() for p in pieces.as_numpy_iterator()] == [
        [1, 2, 3, 4], [5, 6], [7, 8, 9]]
    packs = list(pieces.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=3,
                                               algorithm="ffd")).as_numpy_iterator())
    for p in packs:
        unpack(p)  # asserts labels = next token of the same sequence, -100 elsewhere
    text = tfpack.data.causal_lm_examples(["One two three four five."], max_length=3)
    assert [len(p["input_ids"]) for p in text.as_numpy_iterator()] == [3, 3]


def test_classification_examples_and_pairs():
    ds = tfpack.data.classification_examples(["a fine film", "dull"], [1, 0],
                                             pairs=["yes", "no it was not"], max_length=6)
    rows = list(ds.as_numpy_iterator())
    # "a fine film" + "yes" is 7 tokens: the longer segment loses its end.
    assert rows[0]["input_ids"].tolist() == [CLS, 1037, 2986, SEP, 2748, SEP]
    assert rows[1]["token_type_ids"].tolist() == [0, 0, 0, 1, 1, 1]
    assert [int(r["labels"]) for r in rows] == [1, 0]
    with pytest.raises(TfpackError, match="same length"):
        tfpack.data.classification_examples(["a"], [1, 0])


def test_flatten_keeps_batches_in_order_with_fixed_budget():
    examples = [{"input_ids": list(range(10 * i + 1, 10 * i + 1 + n))}
                for i, n in enumerate([3, 2, 1, 4, 2])]
    rows = list(dataset_from_examples(examples).apply(
        tfpack.data.flatten(batch_size=2, token_budget=6)).as_numpy_iterator())
    assert [r["input_ids"].shape for r in rows] == [(6,)] * 3
    assert rows[0]["input_ids"].tolist() == [1, 2, 3, 11, 12, 0]
    assert rows[0]["sequence_ids"].tolist() == [1, 1, 1, 2, 2, 0]
    assert rows[0]["position_ids"].tolist() == [0, 1, 2, 0, 1, 0]
    assert rows[0]["labels"].tolist() == [2, 3, -100, 12, -100, -100]
    assert [e["input_ids"] for r in rows for e in unpack(r)] == [e["input_ids"] for e in examples]
    with pytest.raises(TfpackError, match="token_budget"):
        tfpack.data.flatten(batch_size=2)


def test_load_vocab_reads_a_byte_order_mark_and_refuses_unreadable_files(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"\xef\xbb\xbf[PAD]\r\n[UNK]\r\nhello\r\n")
    assert load_vocab(vocab) == ["[PAD]", "[UNK]", "hello"]
    (tmp_path / "utf16.txt").write_bytes(b"\xff\xfe[\x00P\x00")
    for path in (tmp_path / "missing.txt", tmp_path, tmp_path / "utf16.txt"):
        with pytest.raises(TfpackError, match=r"`vocab_path` must be a readable UTF-8 text file"
                                              r".*Received: vocab_path="):
            load_vocab(path)
