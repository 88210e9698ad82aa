"""The docstring examples of the task, builder and evaluation modules run as written."""

import doctest
import importlib

import pytest

MODULES = ["tfpack.evaluation", "tfpack.evaluation.scores", "tfpack.evaluation.metrics",
           "tfpack.layers.pooling", "tfpack.models.text_embedder",
           "tfpack.models.token_classifier", "tfpack.models.question_answerer",
           "tfpack.models.lm_scorer", "tfpack.builders.wordpiece", "tfpack.builders.embedding",
           "tfpack.builders.token_classification", "tfpack.builders.question_answering",
           "tfpack.tasks.embedding", "tfpack.tasks.token_classification",
           "tfpack.tasks.question_answering"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has no docstring example"
    assert failed == 0
