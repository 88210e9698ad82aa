"""The docstring examples of tfpack's top-level modules run as written."""

import doctest
import importlib

import pytest

MODULES = ["tfpack", "tfpack.datasets", "tfpack.errors", "tfpack.features", "tfpack.plots", "tfpack.demo",
           "tfpack.cli", "tfpack.cli.types", "tfpack._fds", "tfpack.atomic",
           "tfpack._extension"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has no docstring example"
    assert failed == 0
