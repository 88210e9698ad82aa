"""The docstring examples of the engine modules run as written."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["tfpack.engines", "tfpack.engines.base",
                                  "tfpack.engines.beam.engine", "tfpack.engines.beam.options",
                                  "tfpack.engines.beam.steps", "tfpack.engines.beam.pipeline",
                                  "tfpack.packing.flow", "tfpack.engines.shards",
                                  "tfpack.engines.spill", "tfpack.formats.protos",
                                  "tfpack.formats.blocks"])
def test_docstring_examples(name):
    failed, attempted = doctest.testmod(importlib.import_module(name),
                                        optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failed == 0
