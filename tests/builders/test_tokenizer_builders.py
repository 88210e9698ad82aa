"""Builders with tokenizer=: the ids (and labels, weights, token types) keras-hub's own
preprocessors give for the same text, with real tokenizers built offline."""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.builders import text_tokenizer
from tfpack.errors import TfpackError

import tokenizer_helpers as th
from packed_checks import unpack

keras_hub = th.keras_hub

TEXTS = ["Return the number of items in a container.",
         "Parse a string and return a datetime.",
         "Write bytes to the file, flush it.",
         "An empty line."]
L = 48


def _rows(dataset):
    return [{k: np.asarray(v).tolist() for k, v in x.items()}
            for x in dataset.as_numpy_iterator()]


def _packed_sequences(examples, max_sequences_per_pack=3):
    """Each packed sequence's input_ids, derived labels and loss_weights, by its ids."""
    packs = examples.apply(tfpack.data.pack(max_length=L, max_sequences_per_pack=
                                            max_sequences_per_pack, algorithm="ffd"))
    out = {}
    for pack in packs.as_numpy_iterator():
        unpack(pack)  # the layout invariants
        for k in range(1, int(pack["sequence_mask"].sum()) + 1):
            where = pack["sequence_ids"] == k
            ids = tuple(pack["input_ids"][where].tolist())
            out[ids] = (pack["labels"][where].tolist(),
                        pack["loss_weights"][where].tolist() if "loss_weights" in pack
                        else None)
    return out


def _keras_hub_causal(preprocessor, x):
    x, y, weight = preprocessor(x, sequence_length=L)
    mask = np.asarray(x["padding_mask"]).astype(bool)
    rows = []
    for i in range(mask.shape[0]):
        n = int(mask[i].sum())
        rows.append((np.asarray(x["token_ids"])[i, :n].tolist(), np.asarray(y)[i].tolist(),
                     np.asarray(weight)[i].astype(float).tolist()))
    return rows


@pytest.mark.parametrize("family", ["llama3", "gemma3", "qwen3", "llama"])
def test_causal_lm_examples_are_keras_hub_causal_lm_preprocessor_ids(family):
    tokenizer = getattr(th, f"{family}_tokenizer")()
    preprocessor = {"llama3": keras_hub.models.Llama3CausalLMPreprocessor,
                    # Gemma3CausalLMPreprocessor takes prompt/response pairs only.
                    "gemma3": keras_hub.models.CausalLMPreprocessor,
                    "qwen3": keras_hub.models.Qwen3CausalLMPreprocessor,
                    "llama": keras_hub.models.LlamaCausalLMPreprocessor}[family](tokenizer)
    expected = _keras_hub_causal(preprocessor, TEXTS)
    # Hand check of the framing: BOS (none for Qwen) + tokens + EOS.
    start = [] if family == "qwen3" else [tokenizer.start_token_id]
    assert expected[0][0] == start + np.asarray(tokenizer(TEXTS[0])).tolist() + [
        tokenizer.end_token_id]
    for given in (tokenizer, preprocessor):
        examples = tfpack.builders.causal_lm_examples(TEXTS, max_length=L, tokenizer=given)
        assert [r["input_ids"] for r in _rows(examples)] == [ids for ids, _, _ in expected]
    packed = _packed_sequences(examples)
    for ids, y, weight in expected:
        labels, _ = packed[tuple(ids)]
        n = len(ids)
        # Packed labels are keras-hub's targets where keras-hub trains them.
        assert weight[:n - 1] == [1.0] * (n - 1) and labels[:-1] == y[:n - 1]
        assert labels[-1] == -100


def test_causal_lm_special_tokens_are_configurable():
    tokenizer = th.llama3_tokenizer()
    ids = np.asarray(tokenizer(TEXTS[0])).tolist()
    bos, eos = tokenizer.start_token_id, tokenizer.end_token_id
    first = lambda t: _rows(tfpack.builders.causal_lm_examples(TEXTS[:1], max_length=L,
                                                           tokenizer=t))[0]["input_ids"]
    assert first(text_tokenizer(tokenizer, start_ids=[])) == ids + [eos]
    assert first(text_tokenizer(tokenizer, end_ids=[eos, eos])) == [bos] + ids + [eos, eos]
    no_end = keras_hub.models.Llama3CausalLMPreprocessor(tokenizer, add_end_token=False)
    assert first(no_end) == [bos] + ids
    # A plain callable adds nothing unless told.
    assert first(lambda s: tokenizer(s)) == ids


def test_sft_examples_are_keras_hub_prompt_response_ids_and_weights():
    tokenizer = th.gemma3_tokenizer()
    preprocessor = keras_hub.models.Gemma3CausalLMPreprocessor(tokenizer)
    prompts, responses = TEXTS[:3], TEXTS[1:]
    expected = _keras_hub_causal(preprocessor, {"prompts": prompts, "responses": responses})
    examples = tfpack.builders.sft_examples(list(zip(prompts, responses)), max_length=L,
                                        tokenizer=tokenizer)
    rows = _rows(examples)
    assert [r["input_ids"] for r in rows] == [ids for ids, _, _ in expected]
    assert [r["loss_weights"] for r in rows] == [w[:len(ids)] for ids, _, w in expected]
    assert rows[0]["input_ids"][0] == tokenizer.start_token_id
    assert rows[0]["input_ids"][-1] == tokenizer.end_token_id
    packed = _packed_sequences(examples)
    for ids, y, weight in expected:
        labels, weights = packed[tuple(ids)]
        assert weights == weight[:len(ids)]
        assert [t for t, w in zip(labels, weights) if w] == [t for t, w in zip(y, weight) if w]


@pytest.mark.parametrize("truncated", [False, True])
def test_classification_examples_are_keras_hub_text_classifier_ids(truncated):
    tokenizer = th.bert_tokenizer()  # MiniLM's WordPiece vocabulary
    length = 12 if truncated else L
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer, sequence_length=length)
    firsts, seconds = TEXTS[:3], TEXTS[1:]
    # With labels: keras-hub reads a lone tuple as (x, y).
    x, _ = preprocessor((tf.constant(firsts), tf.constant(seconds)), tf.constant([0, 1, 2]))
    mask = np.asarray(x["padding_mask"]).astype(bool)
    expected = [(np.asarray(x["token_ids"])[i][mask[i]].tolist(),
                 np.asarray(x["segment_ids"])[i][mask[i]].tolist()) for i in range(3)]
    # A bare WordPieceTokenizer knows no special tokens: they are given explicitly.
    bare = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=th.minilm_vocabulary_path(),
                                                   lowercase=True)
    assert text_tokenizer(bare).start_ids == () == text_tokenizer(bare).end_ids
    explicit = text_tokenizer(bare, start_ids=tokenizer.cls_token_id,
                              end_ids=tokenizer.sep_token_id)
    for given in (tokenizer, preprocessor, explicit):
        rows = _rows(tfpack.builders.classification_examples(
            firsts, [0, 1, 2], pairs=seconds, max_length=length, tokenizer=given))
        assert [(r["input_ids"], r["token_type_ids"]) for r in rows] == expected
    if truncated:
        assert all(len(ids) == 12 for ids, _ in expected)


def test_classification_roberta_separator_comes_from_the_preprocessor():
    vocabulary, merges = th.byte_pair_vocabulary(("<s>", "<pad>", "</s>", "<unk>", "<mask>"))
    tokenizer = keras_hub.models.RobertaTokenizer(vocabulary=vocabulary, merges=merges)
    preprocessor = keras_hub.models.RobertaTextClassifierPreprocessor(tokenizer,
                                                                       sequence_length=L)
    x, _ = preprocessor((tf.constant(TEXTS[:2]), tf.constant(TEXTS[2:])), tf.constant([0, 1]))
    mask = np.asarray(x["padding_mask"]).astype(bool)
    expected = [np.asarray(x["token_ids"])[i][mask[i]].tolist() for i in range(2)]
    rows = _rows(tfpack.builders.classification_examples(
        TEXTS[:2], [0, 1], pairs=TEXTS[2:], max_length=L, tokenizer=preprocessor))
    assert [r["input_ids"] for r in rows] == expected
    end = tokenizer.end_token_id
    assert [end, end] in [r["input_ids"][i:i + 2] for r in rows[:1]
                          for i in range(len(r["input_ids"]) - 1)]


def test_bert_pretraining_with_minilm_tokenizer_equals_the_vocabulary_path():
    docs = tfpack.datasets.stdlib_documents(max_documents=6)
    options = dict(max_seq_length=48, max_predictions_per_seq=6, seed=2)
    by_vocab = _rows(tfpack.builders.bert_pretraining_examples(
        docs, vocab_path=th.minilm_vocabulary_path(), **options))
    by_tokenizer = _rows(tfpack.builders.bert_pretraining_examples(
        docs, tokenizer=th.bert_tokenizer(), **options))
    assert by_tokenizer == by_vocab and len(by_vocab) > 5
    with pytest.raises(TfpackError, match=r"without \['mask_id', 'vocabulary_size'\]"):
        tfpack.builders.bert_pretraining_examples(
            docs, tokenizer=text_tokenizer(lambda s: [5], start_ids=1, end_ids=2))


def test_tokenizer_errors_name_what_was_wrong():
    with pytest.raises(TfpackError, match=r"`tokenizer` must be a keras-hub Tokenizer.*"
                                          r"Received: tokenizer=3"):
        text_tokenizer(3)
    with pytest.raises(TfpackError, match=r"sequence_length=8"):
        text_tokenizer(keras_hub.models.Gemma3Tokenizer(
            proto=th.sentencepiece_proto(), has_vision_tokens=False, sequence_length=8))
    with pytest.raises(TfpackError, match=r"`start_ids` must be .*token ids.*Received: start_ids=-1"):
        text_tokenizer(len, start_ids=-1)
    with pytest.raises(TfpackError, match="flat list of int ids"):
        text_tokenizer(lambda s: [[1, 2]])(["a"])
    with pytest.raises(TfpackError, match="not both"):
        tfpack.builders.causal_lm_examples(["a"], max_length=4, tokenizer=len,
                                           vocab_path=tfpack.datasets.bert_vocab_path())
