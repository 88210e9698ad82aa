"""The docstring examples of `tfpack.models.keras_hub` run as written (`tests/doctest_runner.py`)."""

import doctest

import pytest

from doctest_runner import modules_for, run_examples

pytest.importorskip("keras_hub")


@pytest.mark.parametrize("name", modules_for(__file__))
def test_docstring_examples(name):
    run_examples(name)


def test_from_keras_hub_docstring():
    from tfpack import models

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(models.from_keras_hub, "from_keras_hub",
                            globs={"from_keras_hub": models.from_keras_hub}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0
