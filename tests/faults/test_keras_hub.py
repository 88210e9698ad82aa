"""Fault injection, keras-hub: a user's subclass that changes the forward pass.

`from_keras_hub` runs the adapted keras-hub class's computation on the
backbone's layers. A user's subclass that overrides `call` (an extra
projection) or rewires layers in `__init__` would be packed
as its parent, silently computing something else (issue 22: a difference of
7.4). Each scenario must be refused with one `TfpackError` by the exactness
check, which compares the adapter with the subclass itself on each probe
sequence alone (issue 34: by its numbers, not its name; `trust_subclass=True`
no longer vouches for it); a subclass that changes nothing is still adapted
and exact.
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


@pytest.mark.parametrize("cls", [ProjectedLlama, RewiredLlama])
@pytest.mark.parametrize("trust_subclass", [False, True])
def test_a_subclass_that_changes_the_forward_pass_is_refused_by_its_numbers(
        cls, trust_subclass):
    keras.utils.set_random_seed(0)
    backbone = cls(**CONFIG)
    verdict = judge_call(lambda: from_keras_hub(backbone, trust_subclass=trust_subclass),
                         refuse=True,
                         match="Received: output 'sequence_output' (probe sequence")
    assert verdict.outcome == HELD, verdict
    assert " differs by " in verdict.evidence, verdict
    assert "reference: keras-hub backbone" in verdict.evidence, verdict


def test_a_subclass_that_changes_nothing_is_adapted_and_exact():
    keras.utils.set_random_seed(0)
    backbone = SameLlama(**CONFIG)
    verdict = judge_call(lambda: from_keras_hub(backbone),
                         check=_alone_equals_packed)
    assert verdict.outcome == HELD, verdict


# --- a non-finite activation in one sequence of a pack -----------------------------------------

def _poisoned_pack(family, implementation):
    """The family's adapter on a pack of two sequences whose first holds token 49, whose
    embedding row is NaN, and on the second sequence alone in a row of its own of the same
    call (rows of a batch never meet; were the NaN to reach it, it would show):
    `(packed output, the second sequence alone, the lengths)`."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "models"
                           / "keras_hub"))
    from keras_hub_helpers import examples, make_backbone

    # The NaN is what is checked here; each family's exactness probe runs in
    # tests/models/keras_hub/test_keras_hub_exactness.py (it was half of this CPU).
    adapter = from_keras_hub(_backbone(family, make_backbone),
                             attention_implementation=implementation,
                             max_sequences_per_pack=2, check_exact=False)
    first, second = examples(family)[:2]
    first = {**first, "input_ids": np.concatenate([[49], first["input_ids"][1:]])}
    second = {**second, "input_ids": np.where(second["input_ids"] == 49, 48,
                                              second["input_ids"])}
    table = adapter.token_embedding.embeddings
    clean = np.asarray(table).copy()
    table.assign(np.where(np.arange(len(clean))[:, None] == 49, np.nan, clean))
    # One call: the pack (row 0) and the second sequence alone (row 1).
    packed = pack_examples([first, second, second], 16, packs=[[0, 1], [2]],
                           max_sequences_per_pack=2)
    try:
        out = np.asarray(adapter(packed)["sequence_output"])
    finally:  # The backbone serves the family's other checks.
        table.assign(clean)
    return out[0], out[1], len(first["input_ids"]), len(second["input_ids"])


_BACKBONES = {}


def _backbone(family, make_backbone):
    """The family's backbone (`make_backbone`), built once for this file's checks
    (each leaves its weights as they were)."""
    if family not in _BACKBONES:
        _BACKBONES[family] = make_backbone(family)
    return _BACKBONES[family]


def _stays_in_its_sequence(family, implementation):
    def check(result):
        out, alone, n0, n1 = result
        return (np.isnan(out[0]).all()  # the poisoned token shows it
                and np.allclose(out[n0:n0 + n1], alone[:n1], atol=1e-5))

    keras.utils.set_random_seed(0)
    return judge_call(lambda: _poisoned_pack(family, implementation), check=check)


@pytest.mark.parametrize("implementation", ["dense", "segmented"])
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_nan_in_one_sequence_never_reaches_the_others_of_its_pack(family, implementation):
    """Issue 22: keras-hub's masked attention added -1e9 to a NaN score (still NaN), so one
    NaN token made every sequence of its pack NaN; the other sequence now equals its
    unpacked output and the poisoned one shows NaN."""
    verdict = _stays_in_its_sequence(family, implementation)
    assert verdict.outcome == HELD, verdict


@pytest.mark.slow  # every adapted family, dense attention: ~1-2 s each
def test_a_nan_stays_in_its_sequence_in_every_family():
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "models"
                           / "keras_hub"))
    from keras_hub_helpers import FAMILIES

    leaking = {}
    for family in sorted(FAMILIES):
        verdict = _stays_in_its_sequence(family, "dense")
        if verdict.outcome != HELD:
            leaking[family] = verdict
    assert not leaking, leaking
