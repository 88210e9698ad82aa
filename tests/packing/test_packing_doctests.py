"""The examples in the docstrings of tfpack.packing run as written."""

import doctest
import importlib

import pytest

MODULES = [
    "tfpack.packing",
    "tfpack.packing.histograms",
    "tfpack.packing.checks",
    "tfpack.packing.metrics",
    "tfpack.packing.plans",
    "tfpack.packing.assignment",
    "tfpack.packing.placement",
    "tfpack.packing.balance",
    "tfpack.packing.replicas",
    "tfpack.packing.permutation",
    "tfpack.packing.hosts",
    "tfpack.packing.algorithms",
    "tfpack.packing.algorithms.base",
    "tfpack.packing.algorithms._nnls",
    "tfpack.packing.algorithms.none",
    "tfpack.packing.algorithms.greedy",
    "tfpack.packing.algorithms.ffd",
    "tfpack.packing.algorithms.bfd",
    "tfpack.packing.algorithms.spfhp",
    "tfpack.packing.algorithms.lpfhp",
    "tfpack.packing.algorithms.nnlshp",
    "tfpack.packing.algorithms.ennlshp",
    "tfpack.packing.algorithms._groups",
    "tfpack.packing.algorithms._rounding",
    "tfpack.packing.algorithms.optimal",
    "tfpack.packing.algorithms._pairs",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    from tfpack.packing.algorithms import base

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # base's example registers one
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
