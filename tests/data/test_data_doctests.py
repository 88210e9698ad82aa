"""The docstring examples of the tf.data modules run as written."""

import doctest
import importlib

import pytest

MODULES = ["tfpack.data", "tfpack.data.pack", "tfpack.data.report", "tfpack.data.emit",
           "tfpack.data.flatten", "tfpack.data.reading", "tfpack.data.boundary"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failed, attempted = doctest.testmod(importlib.import_module(name),
                                        optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has no docstring example"
    assert failed == 0
