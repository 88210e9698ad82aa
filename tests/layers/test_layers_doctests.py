"""The docstring examples of `tfpack.layers` run as written (`tests/doctest_runner.py`)."""

import pytest

from doctest_runner import modules_for, run_examples


@pytest.mark.parametrize("name", modules_for(__file__))
def test_docstring_examples(name):
    run_examples(name)
