"""Pairs to pair packs: `tfpack.builders.seq2seq_examples` and `pack_pairs`."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.builders import pack_pairs, seq2seq_examples, text_tokenizer
from tfpack.errors import TfpackError

keras_hub = pytest.importorskip("keras_hub")


def test_a_worked_pack_by_hand():
    packs = pack_pairs([([5, 6, 7], [1, 8, 9]), ([4], [1, 3]), ([2, 2], [1])],
                       max_encoder_length=5, max_decoder_length=6)
    # The third pair fits the first pack's decoder row (1 free) but not its
    # encoder row (1 free for 2 tokens): a second pack.
    assert packs["encoder_input_ids"].tolist() == [[5, 6, 7, 4, 0], [2, 2, 0, 0, 0]]
    assert packs["encoder_position_ids"].tolist() == [[0, 1, 2, 0, 0], [0, 1, 0, 0, 0]]
    assert packs["decoder_input_ids"].tolist() == [[1, 8, 9, 1, 3, 0], [1, 0, 0, 0, 0, 0]]
    assert packs["decoder_sequence_ids"].tolist() == [[1, 1, 1, 2, 2, 0], [1, 0, 0, 0, 0, 0]]
    assert packs["decoder_position_ids"].tolist() == [[0, 1, 2, 0, 1, 0], [0, 0, 0, 0, 0, 0]]
    assert packs["decoder_labels"].tolist() == [[8, 9, -100, 3, -100, -100], [-100] * 6]
    assert packs["decoder_loss_weights"].tolist() == [[1, 1, 0, 1, 0, 0], [0] * 6]
    assert packs["example_ids"].tolist() == [[0, 1], [2, -1]]
    assert packs["sequence_mask"].tolist() == [[1, 1], [1, 0]]
    assert {k: v.dtype.name for k, v in packs.items()}["decoder_loss_weights"] == "float32"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 5)), min_size=1, max_size=30),
       st.integers(1, 4))
def test_every_pair_lands_whole_in_one_pack_within_both_lengths(lengths, k):
    pairs = [(list(range(1, n + 1)), list(range(10, 10 + m))) for n, m in lengths]
    packs = pack_pairs(pairs, max_encoder_length=8, max_decoder_length=6,
                       max_pairs_per_pack=k)
    seen = sorted(int(i) for i in packs["example_ids"].ravel() if i >= 0)
    assert seen == list(range(len(pairs)))
    assert packs["example_ids"].shape[1] == k
    for row, ids in enumerate(packs["example_ids"]):
        for slot, i in enumerate(ids):
            if i < 0:
                continue
            for side, pair_side in (("encoder", 0), ("decoder", 1)):
                tokens = packs[f"{side}_input_ids"][row][
                    packs[f"{side}_sequence_ids"][row] == slot + 1]
                assert tokens.tolist() == pairs[i][pair_side]


def test_too_long_pairs_are_refused_or_cut():
    words = {"a": 5, "b": 6, "c": 7}
    tok = text_tokenizer(lambda s: [words[w] for w in s.split()], start_ids=1, end_ids=2)
    pair = {"inputs": "a b c", "targets": "a b"}
    with pytest.raises(TfpackError, match=r"The inputs of pair 0 must fit its row.*"
                                          r"Received: 3 tokens \+ 1 special, max length 3"):
        seq2seq_examples([pair], max_encoder_length=3, max_decoder_length=8, tokenizer=tok)
    packs = seq2seq_examples([pair], max_encoder_length=3, max_decoder_length=3,
                             tokenizer=tok, truncate=True)
    assert packs["encoder_input_ids"].tolist() == [[5, 6, 2]]  # The end token stays.
    assert packs["decoder_input_ids"].tolist() == [[1, 5, 2]]
    with pytest.raises(TfpackError, match=r"Received: pair 0 with 4 and 1"):
        pack_pairs([([1, 2, 3, 4], [1])], max_encoder_length=3, max_decoder_length=2)
    with pytest.raises(TfpackError, match=r"Received: tokenizer=None"):
        seq2seq_examples([pair], max_encoder_length=3, max_decoder_length=3)
    with pytest.raises(TfpackError, match=r"Received: pairs at \[0\]"):
        seq2seq_examples([("a", "b")], max_encoder_length=3, max_decoder_length=3)
    with pytest.raises(TfpackError, match=r"Received: max_decoder_length=0"):
        pack_pairs([([1], [1])], max_encoder_length=3, max_decoder_length=0)


@pytest.mark.parametrize("pairs, message", [
    ([([1, 2.5], [1])], r"Received: encoder_ids=2.5 \(a float\) in pair 0 at token 1"),
    ([([1], [1]), ([1], [True])], r"Received: decoder_ids=True \(a bool\) in pair 1 at token 0"),
    ([([1], [1], [1])], r"Received: pair 0=\(\[1\], \[1\], \[1\]\)"),
    ("ab", r"Received: pairs='ab'"),
])
def test_pair_ids_are_token_ids(pairs, message):
    with pytest.raises(TfpackError, match=message):
        pack_pairs(pairs, max_encoder_length=3, max_decoder_length=3)


def _t5_proto():
    import sentencepiece

    from tokenizer_helpers import sentences

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences()), model_writer=model, vocab_size=200,
        model_type="unigram", minloglevel=2, num_threads=1, pad_id=0, eos_id=1, unk_id=2,
        bos_id=-1, pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>")
    return model.getvalue()


@pytest.mark.parametrize("model", ["t5", "bart"])
def test_framing_is_the_keras_hub_preprocessors(model):
    """The pair's ids are those keras-hub's Seq2SeqLMPreprocessor gives: encoder
    tokens, decoder tokens (unpadded: the last has no label) and labels."""
    from tokenizer_helpers import byte_pair_vocabulary

    if model == "t5":
        tokenizer = keras_hub.models.T5Tokenizer(proto=_t5_proto())
        preprocessor = keras_hub.models.T5Seq2SeqLMPreprocessor(
            tokenizer, encoder_sequence_length=40, decoder_sequence_length=20)
    else:
        vocabulary, merges = byte_pair_vocabulary(("<s>", "<pad>", "</s>", "<mask>"))
        tokenizer = keras_hub.models.BartTokenizer(vocabulary=vocabulary, merges=merges)
        preprocessor = keras_hub.models.BartSeq2SeqLMPreprocessor(
            tokenizer, encoder_sequence_length=40, decoder_sequence_length=20)
    pair = {"inputs": "Return the number of items in a container.", "targets": "Count items."}
    x, y, weights = preprocessor({"encoder_text": [pair["inputs"]],
                                  "decoder_text": [pair["targets"]]})
    packs = seq2seq_examples([pair], max_encoder_length=40, max_decoder_length=20,
                             tokenizer=preprocessor)
    encoder = np.asarray(x["encoder_token_ids"])[0][np.asarray(x["encoder_padding_mask"])[0]]
    decoder_mask = np.asarray(x["decoder_padding_mask"])[0]
    decoder = np.asarray(x["decoder_token_ids"])[0][decoder_mask]
    labels = np.asarray(y)[0][np.asarray(weights)[0] > 0]
    ours = packs["decoder_input_ids"][0][packs["decoder_sequence_ids"][0] == 1]
    assert packs["encoder_input_ids"][0][:encoder.size].tolist() == encoder.tolist()
    assert packs["encoder_sequence_ids"][0].sum() == encoder.size
    assert ours.tolist() == decoder.tolist()
    assert packs["decoder_labels"][0][:labels.size].tolist() == labels.tolist()
    assert packs["decoder_loss_weights"][0].sum() == labels.size


def test_one_row_packing_refuses_the_pair_task():
    import tfpack

    with pytest.raises(TfpackError, match=r"use `tfpack.builders.seq2seq_examples`. "
                                          r"Received: task='seq2seq_lm'"):
        tfpack.data.FeatureRoles.get("seq2seq_lm")
