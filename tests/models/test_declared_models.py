"""Declared Keras constructors (issue 33): checked when built, never per step.

The common API test (`tests/test_api_params.py`) tries bad values on every
declared parameter; here what a declaration must not break or cost: Keras
names a layer's arguments from ``inspect.getfullargspec`` (its automatic
config), a config round trip rebuilds through the declared ``__init__``, and
a training step of a task runs no declaration check (the loss functions are
called unchecked, ``.__wrapped__``).
"""

import inspect

import keras
import numpy as np
import pytest

import tfpack
from tests.models.model_helpers import MAX_LENGTH, VOCAB, bert_examples, causal_examples
from tests.models.model_helpers import tiny_encoder
from tfpack import params
from tfpack.layers import PackedTransformerBlock
from tfpack.testing import pack_examples


def test_a_declared_layer_keeps_its_argument_names_and_config_round_trip():
    # Keras's Operation.__new__ reads the first argument's name from getfullargspec,
    # which does not follow __wrapped__: without the declared signature it fails.
    assert inspect.getfullargspec(PackedTransformerBlock.__init__).args[:3] == [
        "self", "num_heads", "hidden_dim"]
    block = PackedTransformerBlock(2, 8, 16, dropout=0.25, attention_implementation="dense")
    clone = PackedTransformerBlock.from_config(block.get_config())
    assert clone.get_config() == block.get_config()
    # A bad config is refused by the declaration (Keras's from_config wraps the error).
    with pytest.raises(TypeError, match=r"`dropout` must be a finite number in \[0, 1\]. "
                                        r"Received: dropout=1.5"):
        PackedTransformerBlock.from_config({**block.get_config(), "dropout": 1.5})


def _no_checks(monkeypatch):
    def refuse(name, value, constraint, **kwargs):
        raise AssertionError(f"a declaration was checked per step: {name}")

    monkeypatch.setattr(params, "check", refuse)


@pytest.mark.parametrize("task", ["causal_lm", "bert_pretrainer"])
def test_a_training_step_runs_no_declaration_check(task, monkeypatch):
    if task == "causal_lm":
        model = tfpack.models.CausalLM(
            vocabulary_size=VOCAB, num_layers=1, hidden_dim=8, num_heads=2,
            intermediate_dim=16, lm_averaging="sequence", expected_counts={"lm": 3.0})
        packed = pack_examples(causal_examples(), MAX_LENGTH)
    else:
        model = tfpack.models.BertPretrainer(tiny_encoder(num_layers=1),
                                             mlm_averaging="sequence")
        packed = pack_examples([{k: v for k, v in e.items() if k != "labels"}
                                for e in bert_examples()], MAX_LENGTH)
    model.compile(optimizer=keras.optimizers.SGD(0.01), run_eagerly=True)
    _no_checks(monkeypatch)
    logs = model.train_on_batch(packed, return_dict=True)
    assert np.isfinite(logs["loss"])
