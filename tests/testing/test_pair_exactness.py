"""The run-time exactness check on encoder-decoders: a pair probe (issue 34).

`from_keras_hub` checks T5, BART and T5Gemma adapters against the keras-hub
backbone on each probe pair alone; a cross mask that lets a target see
another pair's source, and a user's subclass that changes the computation,
are refused by their numbers.
"""

import keras
import numpy as np
import pytest

from tfpack.models import from_keras_hub
from tfpack.testing import PackingNotExactError, check_packing_exact
from tfpack.testing.exactness import unchecked_reason
from tfpack.testing.pair_exactness import PAIR_PROBE_LENGTHS

keras_hub = pytest.importorskip("keras_hub")

_T5 = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
           intermediate_dim=16, dropout=0.0)
FAMILIES = {
    "t5": lambda: keras_hub.models.T5Backbone(**_T5),
    "bart": lambda: keras_hub.models.BartBackbone(
        vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.0, max_sequence_length=16),
    "t5gemma": lambda: keras_hub.models.T5GemmaBackbone(
        vocabulary_size=30, encoder_hidden_dim=8, encoder_intermediate_dim=16,
        encoder_num_layers=1, encoder_num_attention_heads=2,
        encoder_num_key_value_heads=1, encoder_head_dim=4,
        encoder_layer_types=["sliding_attention"], decoder_hidden_dim=8,
        decoder_intermediate_dim=16, decoder_num_layers=1,
        decoder_num_attention_heads=2, decoder_num_key_value_heads=1,
        decoder_head_dim=4, decoder_layer_types=["sliding_attention"],
        sliding_window=2, dropout_rate=0.0, attention_dropout=0.0),
}


class ScaledT5(keras_hub.models.T5Backbone):
    """A user's T5 whose decoder output is scaled by 1.01."""

    def call(self, inputs, training=None):
        out = dict(super().call(inputs, training=training))
        out["decoder_sequence_output"] = out["decoder_sequence_output"] * 1.01
        return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_encoder_decoder_passes_the_pair_probe(family):
    keras.utils.set_random_seed(0)
    adapter = from_keras_hub(FAMILIES[family](), check_exact=False)
    assert unchecked_reason(adapter) is None
    result = check_packing_exact(adapter)
    assert result.lengths == PAIR_PROBE_LENGTHS
    assert result.reference == "keras-hub backbone"
    # Passed; T5's cross-attention query gradient comes closest (~0.8 of
    # the 1e-4 tolerance on this config: T5 does not scale its scores).
    assert result.worst[1] <= 1.0, result.worst
    outputs = [n for n in result.differences if n.startswith("output ")]
    assert outputs == ["output 'encoder_sequence_output'",
                       "output 'decoder_sequence_output'"]
    assert sum(n.startswith("gradient of") for n in result.differences) >= 5


def test_a_cross_mask_that_lets_pairs_meet_is_refused():
    keras.utils.set_random_seed(0)
    # The same T5 passes the check unchanged:
    # test_every_encoder_decoder_passes_the_pair_probe[t5].
    adapter = from_keras_hub(FAMILIES["t5"](), check_exact=False)
    masks = adapter.masks

    def leaking(encoder_sequence_ids, decoder_sequence_ids):
        out = masks(encoder_sequence_ids, decoder_sequence_ids)
        real = keras.ops.logical_and(decoder_sequence_ids[:, :, None] > 0,
                                     encoder_sequence_ids[:, None, :] > 0)
        return dict(out, cross=real)  # Every source, not the pair's own.

    adapter.masks = leaking
    with pytest.raises(PackingNotExactError,
                       match=r"Received: output 'decoder_sequence_output' \(probe "
                             r"sequence \d of 3, \d tokens?\) differs by .* reference: "
                             r"keras-hub backbone\)$"):
        check_packing_exact(adapter)


def test_a_subclass_that_changes_the_computation_is_refused():
    keras.utils.set_random_seed(0)
    with pytest.raises(PackingNotExactError,
                       match="Received: output 'decoder_sequence_output'"):
        from_keras_hub(ScaledT5(**_T5))


def test_the_probe_fits_a_short_position_table():
    keras.utils.set_random_seed(0)
    bart = keras_hub.models.BartBackbone(
        vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.0, max_sequence_length=8)
    result = check_packing_exact(from_keras_hub(bart, check_exact=False))
    assert result.lengths == PAIR_PROBE_LENGTHS[:2]
    assert np.isfinite(result.worst[1])
