"""Fault injection: the task builders' inputs, their read-back helpers, tokenizers, entity F1.

Each scenario is something a careless or hostile user does with
`question_answering_examples`, `token_classification_examples`, `best_answers`,
`word_predictions`, a tokenizer or the entity scores, judged by `outcomes.judge_call`:
a wrong input must be refused with one `TfpackError` line naming what was wrong, a
right one must give the right result (issue 22, items 4 and 5).
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfpack
from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call
from tfpack.builders import (best_answers, question_answering_examples, text_tokenizer,
                             token_classification_examples, word_predictions)
from tfpack.evaluation import EntityF1, entity_f1

CONTEXT = "It was written by Ada Lovelace in 1843."


def _held(verdict):
    assert verdict.outcome == HELD, verdict


def _qa(answer, **kwargs):
    return lambda: question_answering_examples(["who wrote it?"], [CONTEXT], [answer], **kwargs)


@pytest.mark.parametrize("answer, match", [
    (("Ada Lovelace", 3), "must hold the answer text"),    # offset off by 15: labelled "written by"
    (("Ada Lovelace", 17), "must hold the answer text"),   # off by one
    (("Ada Lovelace", 35), "inside its context"),          # past the context
    (("1843.", 200), "inside its context"),
    (("Ada Lovelace", -1), "non-negative integer"),         # negative
    (("Ada Lovelace", 18.0), "non-negative integer"),       # a float offset
    (("", 3), "non-empty string"),
    ("Ada Lovelace", "(answer_text, character_start)"),     # no offset at all
])
def test_qa_answers_that_do_not_hold_their_text_are_refused(answer, match):
    _held(judge_call(_qa(answer), refuse=True, match=match))


def test_qa_answers_that_hold_their_text_are_labelled_on_it():
    def right(examples):
        x = next(iter(examples.dataset))
        window = examples.windows[0]
        s, e = int(x["start_positions"]), int(x["end_positions"])
        return (CONTEXT[window.spans[s - window.context_offset][0]:
                        window.spans[e - window.context_offset][1]] == "Ada Lovelace")

    _held(judge_call(_qa(("Ada Lovelace", 18)), check=right))


@campaign(40)
@given(st.integers(-3, len(CONTEXT) + 3), st.integers(1, 12))
def test_qa_random_answer_offsets_are_labelled_or_refused(first, size):
    """Any (text, offset): refused unless the context holds the text there."""
    text = CONTEXT[max(first, 0):max(first, 0) + size] or "x"
    holds = 0 <= first and CONTEXT[first:first + len(text)] == text
    _held(judge_call(_qa((text, first), max_length=24, stride=4), refuse=not holds,
                     match="Received: answers[0]"))


@pytest.mark.parametrize("words, tags, kwargs, match", [
    ([["Ada", "wrote"]], [[1, 5]], {"num_classes": 3}, "tags[0][1]=5"),       # a NaN loss
    ([["Ada", "wrote"]], [[-1, 0]], {}, "tags[0][0]=-1"),                      # trained as -1
    ([["Ada", "wrote"]], [[1.0, 0]], {}, "tags[0][0]=1.0"),
    ([["Ada", "wrote"]], [[True, 0]], {}, "tags[0][0]=True"),
    (["Ada", "wrote"], [[1], [0]], {}, "read as characters"),                  # a flat word list
    ("Ada wrote", None, {}, "words="),
    ([["Ada", "wrote"]], [1, 0], {}, "tags=[1, 0]"),                           # flat tags
    ([["Ada", "wrote"]], [[1]], {}, "for 2 words"),
    ([["Ada", 7]], None, {}, "words[0]"),
    ([["Ada"]], [[0]], {"num_classes": 0}, "num_classes=0"),
])
def test_bad_tags_and_word_lists_are_refused(words, tags, kwargs, match):
    _held(judge_call(lambda: token_classification_examples(words, tags, **kwargs),
                     refuse=True, match=match))


@campaign(30)
@given(st.lists(st.integers(-3, 7), min_size=1, max_size=5))
def test_random_tags_are_trained_only_in_range(tags):
    ok = all(0 <= t < 5 or t == -100 for t in tags)
    words = [[f"w{i}" for i in range(len(tags))]]

    def trained(examples):
        labels = next(iter(examples.dataset))["labels"].numpy()
        return sorted(labels[labels != -100].tolist()) == sorted(t for t in tags if t != -100)

    _held(judge_call(lambda: token_classification_examples(words, [tags], num_classes=5),
                     refuse=not ok, check=trained, match="tags[0]"))


@pytest.fixture(scope="module")
def window():
    examples = question_answering_examples(["who wrote it?"], [CONTEXT],
                                           [("Ada Lovelace", 18)])
    return examples.windows


@pytest.mark.parametrize("change, match", [
    (lambda x: x[:-1], "logits for window 0"),          # shorter than the window
    (lambda x: x[:3], "logits for window 0"),
    (lambda x: np.concatenate([x, x]), "logits for window 0"),
    (lambda x: np.where(np.arange(len(x)) == 6, np.nan, x), "finite"),
    (lambda x: np.full(len(x), np.inf), "finite"),
    (lambda x: x.reshape(1, -1), "one number per token"),
])
def test_best_answers_refuses_logits_that_do_not_fit_the_window(window, change, match):
    good = np.zeros(window[0].length)
    _held(judge_call(lambda: best_answers([change(good)], [good], window, [CONTEXT]),
                     refuse=True, match=match))
    _held(judge_call(lambda: best_answers([good], [change(good)], window, [CONTEXT]),
                     refuse=True, match=match))


@campaign(30)
@given(st.lists(st.integers(-4, 8), min_size=1, max_size=4))
def test_word_predictions_random_indices_are_read_or_refused(starts):
    logits = [np.eye(5, 3)]
    ok = all(-1 <= s < 5 for s in starts)
    _held(judge_call(lambda: word_predictions(logits, [starts]), refuse=not ok,
                     match="word_starts",
                     check=lambda r: r[0].tolist() == [
                         int(np.argmax(logits[0][s])) if s >= 0 else -1 for s in starts]))


def test_tokenizer_ids_beyond_int32_or_the_vocabulary_are_refused():
    for bad in (2**31 + 5, 2**40):
        wrapped = text_tokenizer(lambda s, bad=bad: [5, bad])
        _held(judge_call(lambda: tfpack.builders.embedding_examples(["a"], tokenizer=wrapped),
                         refuse=True, match="int32"))
        _held(judge_call(lambda: token_classification_examples([["a"]], tokenizer=wrapped),
                         refuse=True, match="int32"))
    above = text_tokenizer(lambda s: [7, 64], start_ids=1, end_ids=2, separator_ids=3,
                           mask_id=4, vocabulary_size=64)
    _held(judge_call(lambda: tfpack.builders.bert_pretraining_examples(
        [["a b", "c d"], ["e f", "g h"]], tokenizer=above), refuse=True,
        match="vocabulary size 64"))
    _held(judge_call(lambda: text_tokenizer(lambda s: [1], start_ids=99, vocabulary_size=64),
                     refuse=True, match="vocabulary size 64"))
    _held(judge_call(lambda: question_answering_examples(["q"], [CONTEXT], tokenizer=above),
                     refuse=True, match="character offsets"))


def test_the_bundled_wordpiece_reads_web_text_as_bert():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = tfpack.builders.load_vocab()
    reference = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)},
                                           unk_token="[UNK]"))
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    texts = ["10\u00a0km", "co\u00adoperation", "zero\u200bwidth", "bad \ufffd byte",
             "private \ue000 use", "a\u3000b", "x" * 60 + "é" * 40, "привет" * 16]

    def same(dataset):
        rows = [x["input_ids"].tolist() for x in dataset.as_numpy_iterator()]
        return rows == [[101] + e.ids + [102] for e in
                        reference.encode_batch(texts, add_special_tokens=False)]

    _held(judge_call(lambda: tfpack.builders.embedding_examples(texts, max_length=512),
                     check=same))


@pytest.mark.parametrize("tags, gold, predicted", [
    (["O", "B", "I"], [["B", "I", "O", "B"]], [["B", "I", "O", "O"]]),
    (["O", "B-PER", "I-PER", "E-PER", "S-PER"], [["B-PER", "E-PER", "S-PER"]],
     [["B-PER", "E-PER", "O"]]),
])
def test_entity_f1_reads_bare_and_iobes_tags_as_seqeval(tags, gold, predicted):
    metrics = pytest.importorskip("seqeval.metrics")
    expected = metrics.f1_score(gold, predicted)
    assert expected > 0
    _held(judge_call(lambda: entity_f1(gold, predicted), check=lambda r: r["f1"] == expected))

    def in_graph():
        metric = EntityF1(tags)
        metric.update_state(np.array([[tags.index(t) for t in gold[0]]]),
                            np.array([[tags.index(t) for t in predicted[0]]]),
                            np.ones((1, len(gold[0])), np.int32))
        return float(metric.result())

    _held(judge_call(in_graph, check=lambda r: abs(r - expected) < 1e-6))
    _held(judge_call(lambda: entity_f1([["PER"]], [["O"]]), refuse=True, match="tag='PER'"))


def test_the_models_own_tokenizer_is_used_by_every_text_builder():
    """Issue 22: the embedding, token-classification and QA builders took no `tokenizer=`;
    with a Hugging Face tokenizer (here BERT's WordPiece as `tokenizer.json` builds it)
    they give its ids on web text, and QA labels and word starts hold on its offsets."""
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = tfpack.builders.load_vocab()
    reference = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)},
                                           unk_token="[UNK]"))
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    model_tokenizer = text_tokenizer(reference, start_ids=101, end_ids=102, separator_ids=102,
                                     vocabulary_size=len(vocab))
    texts = ["10\u00a0km", "co\u00adoperation", "zero\u200bwidth", "private \ue000 use"]
    expected = [[101] + e.ids + [102]
                for e in reference.encode_batch(texts, add_special_tokens=False)]
    _held(judge_call(lambda: tfpack.builders.embedding_examples(texts, tokenizer=model_tokenizer),
                     check=lambda d: [x["input_ids"].tolist() for x in d.as_numpy_iterator()]
                     == expected))
    context = "The trip was 10\u00a0km long, said Ada\u200bLovelace."

    def answer_text(examples):
        x, window = next(iter(examples.dataset)), examples.windows[0]
        s, e = (int(x[k]) - window.context_offset for k in ("start_positions", "end_positions"))
        return context[window.spans[s][0]:window.spans[e][1]] == "10\u00a0km"

    _held(judge_call(lambda: question_answering_examples(
        ["how far?"], [context], [("10\u00a0km", 13)], tokenizer=model_tokenizer),
        check=answer_text))

    def first_sub_tokens(examples):
        x = next(iter(examples.dataset))
        ids, labels = x["input_ids"].numpy(), x["labels"].numpy()
        words = [reference.encode(w, add_special_tokens=False).ids for w in texts[:2]]
        return (ids.tolist() == [101, *words[0], *words[1], 102]
                and labels.tolist() == [-100, 1] + [-100] * (len(words[0]) - 1) + [2]
                + [-100] * (len(words[1]) - 1) + [-100])

    _held(judge_call(lambda: token_classification_examples(
        [texts[:2]], [[1, 2]], tokenizer=model_tokenizer, num_classes=3),
        check=first_sub_tokens))
