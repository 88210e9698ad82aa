"""Relative-position families (ALiBi, DeBERTa, RoFormer's own rotary) read
per-sequence positions (keras-hub's `RotaryEmbedding` is spied on in
test_conformance.py); backbones packing cannot make exact are refused with
the reason."""

from unittest import mock

import numpy as np
import pytest

from keras_hub_helpers import MAX_LENGTH, VOCAB, examples, keras_hub
from keras_hub_helpers import make_backbone
from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub
from tfpack.models.keras_hub import alibi, deberta, esm, roformer
from tfpack.testing import pack_examples

PACKS = [[0, 1, 2], [3, 4]]

# family -> (module, function, index of its positions argument, calls per
# layer). These biases depend on position differences only (keras-hub's
# ALiBi is `slope * position(key)`, a constant along each query's row), so
# the pack's row offsets would give the same outputs up to rounding, which
# grows with the offset: the test checks the positions themselves.
RELATIVE = {
    "bloom": (alibi, "alibi_bias", 1, 1),
    "falcon": (alibi, "alibi_bias", 1, 1),
    "deberta_v3": (deberta, "relative_buckets", 1, 1),
    "roformer_v2": (roformer, "rotate", 2, 1),
    "esm": (esm, "rotate", 2, 1),
}


@pytest.mark.parametrize("family", sorted(RELATIVE))
def test_relative_positions_come_from_position_ids(family):
    module, name, index, per_layer = RELATIVE[family]
    # The exactness check of every family: test_keras_hub_exactness.py.
    adapter = from_keras_hub(make_backbone(family), check_exact=False)
    packed = pack_examples(examples(family), MAX_LENGTH, packs=PACKS)
    assert packed["position_ids"][0].max() < 14  # Positions restart.
    seen, function = [], getattr(module, name)

    def spy(*args):
        seen.append(args[index])
        return function(*args)

    with mock.patch.object(module, name, spy):
        adapter(packed)
    assert len(seen) == per_layer * len(adapter.backbone.transformer_layers)
    for positions in seen:
        np.testing.assert_array_equal(positions, packed["position_ids"])


def test_alibi_bias_by_hand():
    # Two heads of slopes 1/2 and 1/4 over a pack [a0 a1 a2 | b0 b1].
    bias = alibi.alibi_bias([0.5, 0.25], np.array([[0, 1, 2, 0, 1]]),
                            "float32")
    assert bias.shape == (1, 2, 1, 5)
    np.testing.assert_array_equal(np.asarray(bias)[0, :, 0],
                                  [[0, 0.5, 1, 0, 0.5], [0, 0.25, 0.5, 0, 0.25]])


def test_deberta_buckets_by_hand():
    # bucket_size 4 (mid 2): |i - j| < 2 stays, larger offsets are
    # log-bucketed; the second sequence's buckets repeat the first's.
    attention = make_backbone("deberta_v3").transformer_layers[0]
    buckets = deberta.relative_buckets(attention._self_attention_layer,
                                       np.array([[0, 1, 2, 0, 1]]))
    buckets = np.asarray(buckets)[0, 0]
    np.testing.assert_array_equal(buckets[:3, :3],
                                  [[0, -1, -2], [1, 0, -1], [2, 1, 0]])
    np.testing.assert_array_equal(buckets[3:, 3:], buckets[:2, :2])


REFUSED = {
    "FNetBackbone": (dict(num_layers=1, hidden_dim=8, intermediate_dim=16,
                          max_sequence_length=MAX_LENGTH), "Fourier"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_backbones_packing_cannot_make_exact_are_refused_with_the_reason(
        name):
    config, reason = REFUSED[name]
    backbone = getattr(keras_hub.models, name)(vocabulary_size=VOCAB,
                                               **config)
    with pytest.raises(TfpackError, match=rf"tfpack cannot pack {name}: .*"
                       rf"{reason}.*Received: backbone of type {name}"):
        from_keras_hub(backbone)

