"""The docstring examples of `tfpack.packing` run as written (`tests/doctest_runner.py`)."""

import pytest

from doctest_runner import modules_for, run_examples


@pytest.mark.parametrize("name", modules_for(__file__))
def test_docstring_examples(name, monkeypatch):
    from tfpack.packing.algorithms import base

    # `base`'s example registers a planner: keep the registry as it was.
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    run_examples(name)
