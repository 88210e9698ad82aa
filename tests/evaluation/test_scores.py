"""Per-example scores and their in-graph packed metrics: exact and equal."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.evaluation import (EntityF1, MacroF1, Perplexity, entity_counts, entity_f1,
                               entity_spans, macro_f1, squad_scores)

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# Every scheme seqeval's default mode reads: IOB1/IOB2, IOBES, bare tags.
SCHEMES = {
    "iob": TAGS,
    "bare": ["O", "B", "I"],
    "iobes": ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
    "mixed": ["O", "B", "I", "E", "S", "B-PER", "I-PER", "E-PER", "S-PER", "I-LOC"],
}


def _seqeval_f1(gold, predicted):
    import warnings

    metrics = pytest.importorskip("seqeval.metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval's zero-division warning
        return metrics.f1_score(gold, predicted)


@st.composite
def tag_sequences(draw):
    tags = SCHEMES[draw(st.sampled_from(sorted(SCHEMES)))]
    n = draw(st.integers(1, 4))
    lengths = [draw(st.integers(0, 8)) for _ in range(n)]
    row = lambda k: draw(st.lists(st.sampled_from(tags), min_size=k, max_size=k))
    return [row(k) for k in lengths], [row(k) for k in lengths], tags


@settings(max_examples=300, deadline=None)
@given(tag_sequences())
def test_entity_f1_equals_seqeval_on_every_scheme(case):
    gold, predicted, _ = case
    assert entity_f1(gold, predicted)["f1"] == _seqeval_f1(gold, predicted)


def test_bare_and_iobes_tags_score_as_seqeval_reads_them():
    # The tag set O, B, I: one entity each, found (it scored 0 when bare tags read as O).
    assert entity_f1([["B", "I", "O", "B"]], [["B", "I", "O", "O"]])["f1"] == 2 / 3
    assert entity_spans(["S-PER", "B-LOC", "I-LOC", "E-LOC", "E-LOC"]) == [
        ("PER", 0, 0), ("LOC", 1, 3), ("LOC", 4, 4)]
    metric = EntityF1(["O", "B", "I"])
    metric.update_state(np.array([[1, 2, 0, 1]]), np.array([[1, 2, 0, 0]]),
                        np.array([[1, 1, 1, 1]]))
    assert math.isclose(float(metric.result()), 2 / 3, rel_tol=1e-6)
    with pytest.raises(TfpackError, match="Received: tag='PER'"):
        entity_f1([["PER"]], [["O"]])
    with pytest.raises(TfpackError, match="Received: tag='L-PER'"):
        EntityF1(["O", "B-PER", "L-PER"])


def test_entity_spans_follow_seqeval_lenient_iob2():
    # Hand-checked against seqeval's get_entities (default mode).
    assert entity_spans(["O", "I-PER", "I-PER", "B-PER", "I-LOC", "O", "B-LOC"]) == [
        ("PER", 1, 2), ("PER", 3, 3), ("LOC", 4, 4), ("LOC", 6, 6)]
    assert entity_spans([]) == []


def test_entity_f1_counts_exact_spans_only():
    result = entity_f1([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "O", "O", "B-LOC"]])
    assert (result["true_positives"], result["gold"], result["predicted"]) == (1, 2, 2)
    assert result["f1"] == 0.5


def test_squad_scores_official_normalization():
    scores = squad_scores(["The Denver Broncos!", "Broncos"],
                          [["Denver Broncos"], ["Denver Broncos", "the Broncos team"]])
    assert scores["exact_match"] == 50.0
    # Second: best F1 over answers is vs "Denver Broncos": 2*(1*0.5)/1.5.
    assert math.isclose(scores["f1"], 100 * (1 + 2 / 3) / 2)
    with pytest.raises(TfpackError, match="at least one reference answer"):
        squad_scores(["x"], [[]])


def test_macro_f1_metric_equals_reference_and_ignores_absent_slots():
    metric = MacroF1(num_classes=4)
    metric.update_state(np.array([[0, 1, 3]]), np.array([[0, 2, 0]]), np.array([[1., 1., 0.]]))
    metric.update_state(np.array([[2, 2]]), np.array([[2, 1]]), np.array([[1., 1.]]))
    expected = macro_f1([0, 1, 2, 2], [0, 2, 2, 1])
    assert math.isclose(float(metric.result()), expected, rel_tol=1e-6)


def test_perplexity_metric():
    metric = Perplexity()
    metric.update_state(3.0, 2.0)
    metric.update_state(1.0, 2.0)
    assert math.isclose(float(metric.result()), math.exp(1.0), rel_tol=1e-6)


@st.composite
def packed_tags(draw):
    """Random packs of tagged words, ignored sub-tokens and padding, in one scheme."""
    tags = SCHEMES[draw(st.sampled_from(sorted(SCHEMES)))]
    top = len(tags) - 1
    rows, gold, predicted, sequences = [], [], [], []
    length = 12
    for _ in range(draw(st.integers(1, 3))):
        labels, preds, ids, examples = [], [], [], []
        slot = 0
        while len(labels) < length and draw(st.booleans()):
            n = draw(st.integers(1, length - len(labels)))
            slot += 1
            g_words, p_words = [], []
            for _ in range(n):
                if draw(st.integers(0, 3)) == 0:
                    labels.append(-100)
                    preds.append(draw(st.integers(0, top)))
                else:
                    g, p = draw(st.integers(0, top)), draw(st.integers(0, top))
                    labels.append(g)
                    preds.append(p)
                    g_words.append(tags[g])
                    p_words.append(tags[p])
                ids.append(slot)
            examples.append((g_words, p_words))
        pad = length - len(labels)
        labels += [-100] * pad
        preds += [draw(st.integers(0, top)) for _ in range(pad)]
        ids += [0] * pad
        gold.append(labels)
        predicted.append(preds)
        sequences.append(ids)
        rows.extend(examples)
    return np.array(gold), np.array(predicted), np.array(sequences), rows, tags


@settings(max_examples=80, deadline=None)
@given(packed_tags())
def test_entity_counts_in_graph_equal_reference(case):
    labels, predictions, sequence_ids, examples, tags = case
    tp, gold, predicted = (float(x) for x in entity_counts(labels, predictions, sequence_ids,
                                                           tags))
    reference = entity_f1([g for g, _ in examples], [p for _, p in examples])
    assert (tp, gold, predicted) == (reference["true_positives"], reference["gold"],
                                     reference["predicted"])
    if examples:  # seqeval refuses an empty list
        assert reference["f1"] == _seqeval_f1([g for g, _ in examples],
                                              [p for _, p in examples])


def test_entity_f1_metric_accumulates_counts():
    metric = EntityF1(TAGS)
    metric.update_state(np.array([[1, 2, 0]]), np.array([[1, 2, 0]]), np.array([[1, 1, 1]]))
    metric.update_state(np.array([[3, -100]]), np.array([[0, 3]]), np.array([[1, 1]]))
    assert math.isclose(float(metric.result()), 2 * 1 / (2 + 1), rel_tol=1e-6)
    with pytest.raises(TfpackError, match="`tags` must be a non-empty list"):
        EntityF1([])
