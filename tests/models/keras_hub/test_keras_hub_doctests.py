"""The docstring examples of tfpack.models.keras_hub run as written."""

import doctest
import importlib

import pytest

pytest.importorskip("keras_hub")

MODULES = ["tfpack.models.keras_hub", "tfpack.models.keras_hub.base",
           "tfpack.models.keras_hub.encoders", "tfpack.models.keras_hub.decoders",
           "tfpack.models.keras_hub.gemma", "tfpack.models.keras_hub.gemma4",
           "tfpack.models.keras_hub.phi3", "tfpack.models.keras_hub.gpt_oss",
           "tfpack.models.keras_hub.smollm3", "tfpack.models.keras_hub.gpt",
           "tfpack.models.keras_hub.gpt_neo_x", "tfpack.models.keras_hub.alibi",
           "tfpack.models.keras_hub.deberta", "tfpack.models.keras_hub.roformer",
           "tfpack.models.keras_hub.esm", "tfpack.models.keras_hub.xlnet",
           "tfpack.models.keras_hub.refusals", "tfpack.models.keras_hub.qwen3_5",
           "tfpack.models.keras_hub.rwkv7"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert attempted > 0, f"{name} has no docstring example"
    assert failed == 0


def test_from_keras_hub_docstring():
    from tfpack import models

    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(models.from_keras_hub, "from_keras_hub",
                            globs={"from_keras_hub": models.from_keras_hub}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0
