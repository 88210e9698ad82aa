"""embedding/token-classification/QA builders with the model's own tokenizer=, and their
input checks: real tokenizers (MiniLM's WordPiece vocabulary, BPE and SentencePiece
trained offline on real English), keras-hub and Hugging Face `tokenizers`."""

import numpy as np
import pytest

import tfpack
from tfpack.builders import (best_answers, question_answering_examples, text_tokenizer,
                             token_classification_examples, word_predictions)
from tfpack.errors import TfpackError

import tokenizer_helpers as th

keras_hub = th.keras_hub
hf = pytest.importorskip("tokenizers")

WORDS = [["Guido", "van", "Rossum", "wrote", "Python", "in", "Amsterdam."],
         ["Straße", "10\u00a0km", "co\u00adoperation", "naïve", "日本"],
         ["Return", "the", "number", "of", "items", "in", "a", "container."]]
CONTEXT = ("The standard library was written in C and Python by many people; "
           "its first release came in February 1991, from Amsterdam.")
QUESTIONS = ["When was the first release?", "Where from?"]
ANSWERS = [("February 1991", CONTEXT.index("February 1991")),
           ("Amsterdam", CONTEXT.index("Amsterdam"))]


def _hugging_face_bert():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = tfpack.builders.load_vocab(th.minilm_vocabulary_path())
    tokenizer = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)},
                                           unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 102), ("[CLS]", 101))
    return tokenizer


def _hugging_face_roberta_bpe():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocabulary, merges = th.byte_pair_vocabulary(("<s>", "</s>", "<pad>", "<unk>", "<mask>"))
    tokenizer = Tokenizer(models.BPE(vocabulary, [tuple(m.split(" ")) for m in merges]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0))
    return tokenizer


TOKENIZERS = {
    "keras_hub_bert": th.bert_tokenizer,
    "keras_hub_llama3": th.llama3_tokenizer,
    "keras_hub_gemma3": th.gemma3_tokenizer,
    "hugging_face_bert": _hugging_face_bert,
    "hugging_face_roberta": _hugging_face_roberta_bpe,
}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def tokenizer(request):
    return text_tokenizer(TOKENIZERS[request.param]())


def test_hugging_face_special_tokens_come_from_its_post_processor():
    bert = text_tokenizer(_hugging_face_bert())
    assert (bert.start_ids, bert.separator_ids, bert.end_ids, bert.mask_id) == (
        (101,), (102,), (102,), 103)
    roberta = text_tokenizer(_hugging_face_roberta_bpe())
    assert (roberta.start_ids, roberta.separator_ids, roberta.end_ids, roberta.mask_id) == (
        (0,), (1, 1), (1,), 4)


def test_offsets_cover_the_tokens_text(tokenizer):
    texts = [" ".join(w) for w in WORDS] + [CONTEXT]
    ids, spans = tokenizer.with_offsets(texts)
    assert ids == tokenizer(texts)
    for text, row in zip(texts, spans):
        assert all(0 <= a <= b <= len(text) for a, b in row)
        assert [a for a, _ in row] == sorted(a for a, _ in row)
        # Every non-space character is covered by some token (nothing skipped)...
        covered = {i for a, b in row for i in range(a, b)}
        assert all(i in covered for i, c in enumerate(text)
                   if not c.isspace() and c not in "\u00ad")


def test_embedding_examples_wrap_the_tokenizers_ids(tokenizer):
    texts = [" ".join(w) for w in WORDS]
    rows = [x["input_ids"].tolist() for x in tfpack.data.embedding_examples(
        texts, tokenizer=tokenizer, max_length=512).as_numpy_iterator()]
    assert rows == [list(tokenizer.start_ids) + ids + list(tokenizer.end_ids)
                    for ids in tokenizer(texts)]


def test_word_starts_are_each_words_first_token(tokenizer):
    tags = [[j % 3 for j in range(len(w))] for w in WORDS]
    examples = token_classification_examples(WORDS, tags, tokenizer=tokenizer, max_length=512)
    n_start = len(tokenizer.start_ids)
    for words, starts, x, example_tags in zip(WORDS, examples.word_starts,
                                              examples.dataset.as_numpy_iterator(), tags):
        tokens = x["input_ids"].tolist()
        # The tokens are the tokenizer's own reading of the sentence.
        (sentence,), (spans,) = tokenizer.with_offsets([" ".join(words)])
        assert tokens == list(tokenizer.start_ids) + sentence + list(tokenizer.end_ids)
        text = " ".join(words)
        begins = np.cumsum([0] + [len(w) + 1 for w in words])

        def overlaps(k, j):
            return spans[k][0] < begins[j] + len(words[j]) and spans[k][1] > begins[j]

        for j, start in enumerate(starts):
            k = start - n_start
            # A lone SentencePiece space ("▁") may lead the word.
            while not overlaps(k, j) and not text[spans[k][0]:spans[k][1]].strip():
                k += 1
            assert overlaps(k, j), (words[j], k)
            assert not any(overlaps(i, j) for i in range(start - n_start))
        labelled = [(i, t) for i, t in enumerate(x["labels"].tolist()) if t != -100]
        assert labelled == list(zip(starts, example_tags))


def test_qa_windows_hold_the_answer_with_every_tokenizer(tokenizer):
    examples = question_answering_examples(QUESTIONS, [CONTEXT] * 2, ANSWERS,
                                           tokenizer=tokenizer, max_length=40, stride=8)
    found = set()
    for x, window in zip(examples.dataset.as_numpy_iterator(), examples.windows):
        assert len(x["input_ids"]) == window.length <= 40
        s, e = int(x["start_positions"]), int(x["end_positions"])
        if (s, e) == (0, 0):
            continue
        text, first = ANSWERS[window.question]
        a = window.spans[s - window.context_offset][0]
        b = window.spans[e - window.context_offset][1]
        assert a <= first and b >= first + len(text) and b - a <= len(text) + 2
        logits = np.full(window.length, -10.0)
        start_logits, end_logits = logits.copy(), logits.copy()
        start_logits[s], end_logits[e] = 10.0, 10.0
        answer = best_answers([start_logits], [end_logits], [window], [CONTEXT] * 2)
        assert text in answer[window.question]
        found.add(window.question)
    assert found == {0, 1}


def test_the_bundled_path_equals_keras_hubs_bert_tokenizer_on_ordinary_text():
    # (keras-hub's BertTokenizer itself reads "10\u00a0km" as [UNK] and splits at a
    # soft hyphen, unlike BERT's reference: tokenizer= follows the model's own.)
    path = th.minilm_vocabulary_path()
    bert = th.bert_tokenizer()
    words = [WORDS[0], WORDS[2]]
    for build in (lambda **k: tfpack.data.embedding_examples([" ".join(w) for w in words], **k),
                  lambda **k: token_classification_examples(words, **k).dataset):
        bundled = [x["input_ids"].tolist() for x in build(vocab_path=path).as_numpy_iterator()]
        own = [x["input_ids"].tolist() for x in build(tokenizer=bert).as_numpy_iterator()]
        assert bundled == own


def test_task_inputs_are_checked():
    with pytest.raises(TfpackError, match=r"a flat list of words would be read as characters"):
        token_classification_examples(["Guido", "wrote"], [[1], [0]])
    with pytest.raises(TfpackError, match=r"below num_classes=3.*tags\[0\]\[1\]=3"):
        token_classification_examples([["a", "b"]], [[0, 3]], num_classes=3)
    with pytest.raises(TfpackError, match=r"tags\[0\]\[0\]=-1"):
        token_classification_examples([["a", "b"]], [[-1, 0]])
    kept = token_classification_examples([["a", "b"]], [[-100, 1]], num_classes=2)
    assert next(iter(kept.dataset))["labels"].numpy().tolist() == [-100, -100, 1, -100]
    context = "It was written by Ada Lovelace in 1843."
    for answer, match in (((("Ada Lovelace", 3),), "must hold the answer text"),
                          ((("Ada Lovelace", 35),), "must lie inside its context"),
                          ((("Ada Lovelace", -1),), "non-negative integer")):
        with pytest.raises(TfpackError, match=match):
            question_answering_examples(["who?"], [context], list(answer))
    examples = question_answering_examples(["who?"], [context], [("Ada Lovelace", 18)])
    (window,) = examples.windows
    good = np.zeros(window.length)
    with pytest.raises(TfpackError, match=f"{window.length - 1} logits for window 0"):
        best_answers([good[:-1]], [good], examples.windows, [context])
    bad = good.copy()
    bad[5] = np.nan
    with pytest.raises(TfpackError, match="finite"):
        best_answers([good], [bad], examples.windows, [context])
    with pytest.raises(TfpackError, match="Received: 7 at example 0, which has 3 tokens"):
        word_predictions([np.zeros((3, 2))], [[1, 7]])


def test_tokenizer_ids_are_checked_against_int32_and_the_vocabulary():
    huge = text_tokenizer(lambda s: [5, 2**31 + 5])
    with pytest.raises(TfpackError, match=r"fit int32.*2147483653"):
        tfpack.data.embedding_examples(["a b"], tokenizer=huge)
    small = text_tokenizer(lambda s: [5, 70], start_ids=1, end_ids=2, separator_ids=3,
                           mask_id=4, vocabulary_size=64)
    with pytest.raises(TfpackError, match="below the vocabulary size 64. Received: id 70"):
        tfpack.data.bert_pretraining_examples([["a b", "c d"], ["e f", "g h"]],
                                              tokenizer=small)
    with pytest.raises(TfpackError, match="needs character offsets"):
        question_answering_examples(["q"], ["a b"], tokenizer=small)
