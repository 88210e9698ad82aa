"""Docstring examples of tfpack.layers, tfpack.models and tfpack.testing run."""

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("tfpack.layers", "tfpack.models", "tfpack.testing")


def _modules():
    for name in PACKAGES:
        package = importlib.import_module(name)
        yield name
        for info in pkgutil.iter_modules(package.__path__):
            yield f"{name}.{info.name}"


@pytest.mark.parametrize("name", sorted(_modules()))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, globs=dict(vars(module)))
    assert result.failed == 0
