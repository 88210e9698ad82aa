"""Fault injection, keras-hub: a user's subclass that changes the forward pass.

`from_keras_hub` runs the adapted keras-hub class's computation on the
backbone's layers. A user's subclass that overrides `call` (an extra
projection) or rewires layers in `__init__` would be packed
as its parent, silently computing something else (issue 22: a difference of
7.4). Each scenario must be refused by name with one `TfpackError`, unless
the user declares the subclass equivalent (`trust_subclass=True`); a
subclass that changes nothing is still adapted and exact.
"""

import keras
import numpy as np
import pytest

from tests.faults.outcomes import HELD, judge_call

keras_hub = pytest.importorskip("keras_hub")

from tfpack.models import from_keras_hub  # noqa: E402
from tfpack.testing import pack_examples  # noqa: E402

CONFIG = dict(vocabulary_size=30, num_layers=1, num_query_heads=2,
              num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)


class ProjectedLlama(keras_hub.models.LlamaBackbone):
    """A user's Llama whose `call` adds a projection to the output."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.extra = keras.layers.Dense(self.hidden_dim, name="extra")

    def call(self, inputs, training=None):
        return self.extra(super().call(inputs, training=training))


class RewiredLlama(keras_hub.models.LlamaBackbone):
    """A user's Llama whose `__init__` swaps the final norm after the graph
    is built: the adapter would read the new layer, the model runs the
    old one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.layer_norm = keras.layers.LayerNormalization(name="my_norm")


class SameLlama(keras_hub.models.LlamaBackbone):
    """A user's Llama that only adds a helper: the parent's computation."""

    def describe(self):
        return "mine"


def _alone_equals_packed(adapter):
    rng = np.random.default_rng(0)
    data = [{"input_ids": rng.integers(1, 30, n)} for n in (3, 4)]
    packed = pack_examples(data, 8, packs=[[0, 1]])
    out = np.asarray(adapter(packed)["sequence_output"])[0]
    expected = np.concatenate([np.asarray(adapter.backbone(
        {"token_ids": e["input_ids"][None],
         "padding_mask": np.ones((1, len(e["input_ids"])), "int32")})[0])
        for e in data])
    return np.allclose(out[:7], expected, atol=1e-5)


@pytest.mark.parametrize("cls,method", [(ProjectedLlama, "ProjectedLlama.call"),
                                        (RewiredLlama, "RewiredLlama.__init__")])
def test_a_subclass_that_changes_the_forward_pass_is_refused_by_name(cls, method):
    keras.utils.set_random_seed(0)
    backbone = cls(**CONFIG)
    verdict = judge_call(lambda: from_keras_hub(backbone), refuse=True,
                         match=f"overrides `{method}`")
    assert verdict.outcome == HELD, verdict
    assert "trust_subclass=True" in verdict.evidence, verdict


def test_trust_subclass_declares_it_equivalent():
    keras.utils.set_random_seed(0)
    backbone = ProjectedLlama(**CONFIG)
    verdict = judge_call(
        lambda: from_keras_hub(backbone, trust_subclass=True),
        check=lambda adapter: adapter.trust_subclass
        and adapter.get_config()["trust_subclass"])
    assert verdict.outcome == HELD, verdict


def test_a_subclass_that_changes_nothing_is_adapted_and_exact():
    keras.utils.set_random_seed(0)
    backbone = SameLlama(**CONFIG)
    verdict = judge_call(lambda: from_keras_hub(backbone),
                         check=_alone_equals_packed)
    assert verdict.outcome == HELD, verdict
