"""`from_keras_hub(..., attention_implementation=...)`: segmented encoders."""

import pytest

from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub

from keras_hub_helpers import make_backbone

# Segmented == dense == keras-hub on each sequence alone: test_conformance.py;
# the run-time exactness check of every family, dense and segmented:
# test_keras_hub_exactness.py (so adapters here are built unchecked).


def test_adapter_config_keeps_the_implementation_and_checks_it():
    bert, llama = make_backbone("bert"), make_backbone("llama")
    adapter = from_keras_hub(bert, check_exact=False,
                             attention_implementation="segmented",
                             max_sequences_per_pack=4, segment_length=8)
    config = adapter.get_config()
    assert (config["attention_implementation"], config["max_sequences_per_pack"],
            config["segment_length"]) == ("segmented", 4, 8)
    clone = type(adapter).from_config(config)
    assert clone.attention_implementation == "segmented"
    assert from_keras_hub(llama, check_exact=False
                          ).attention_implementation == "auto"
    with pytest.raises(TfpackError, match=r"needs `max_sequences_per_pack`.*"
                                          r"Received: max_sequences_per_pack"
                                          r"=None"):
        from_keras_hub(llama, attention_implementation="segmented")
    with pytest.raises(TfpackError, match=r"Received: attention_implementation"
                                          r"='fused'"):
        from_keras_hub(bert, attention_implementation="fused")


def _same_seed(layer):
    """Restores the state of `layer`'s dropout seed generator on exit, so two
    calls draw the same dropout mask (a rate of 0 has none)."""
    if getattr(layer, "seed_generator", None) is None:
        return lambda: None
    state = layer.seed_generator.state
    saved = state.numpy()
    return lambda: state.assign(saved)


@pytest.mark.parametrize("dropout", [0.0, 0.5])
@pytest.mark.parametrize("training", [False, True])
def test_dense_attention_is_keras_hubs_with_scores_query_first(training,
                                                               dropout):
    # The dense path of the BERT family, GPT-2 and OPT (keras
    # MultiHeadAttention with dropout) and of GPT-NeoX computes keras's /
    # keras-hub's own attention, dropout draws included, without calling
    # their key-first score einsum (1.6x slower under XLA on CPU); without
    # dropout (ALBERT) on TensorFlow, nor keras's dot_product_attention.
    import contextlib
    from unittest import mock

    import keras
    import keras_hub
    import numpy as np
    from keras import ops

    from tfpack.models.keras_hub import roformer

    if dropout == 0 and keras.backend.backend() != "tensorflow":
        pytest.skip("keras's own fused call is kept off TensorFlow")

    from tfpack.models.keras_hub import encoders
    from tfpack.models.keras_hub import gpt_neo_x

    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    mask = rng.random((2, 6, 6)) < 0.6
    mask[:, np.arange(6), np.arange(6)] = True
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16, dropout=dropout)
    mha = bert.transformer_layers[0]._self_attention_layer
    restore = _same_seed(mha._dropout_layer)
    want = mha(query=x, value=x, attention_mask=mask, training=training)
    restore()
    with mock.patch.object(type(mha), "_compute_attention",
                           side_effect=AssertionError("key-first einsum")):
        got = encoders.dense_attention(mha, x, mask, training)
        adapter = from_keras_hub(bert, attention_implementation="dense",
                                 check_exact=False)
        adapter({"input_ids": np.array([[5, 6, 7, 0]]),
                 "sequence_ids": np.array([[1, 1, 2, 0]]),
                 "position_ids": np.array([[0, 1, 0, 0]])}, training=training)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)

    neox = keras_hub.models.GPTNeoXBackbone(
        vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=dropout)
    attention = neox.transformer_layers[0]._self_attention_layer
    q, k, v = (rng.normal(size=(2, 6, 2, 4)).astype("float32")
               for _ in range(3))
    restore = _same_seed(attention._attn_dropout_layer)
    want = attention._compute_attention(q, k, v, mask, training=training)
    restore()
    with mock.patch.object(type(attention), "_compute_attention",
                           side_effect=AssertionError("key-first einsum")):
        got = gpt_neo_x.dense_attention(attention, q, k, v, mask, training)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)

    # RoFormer-v2 and ESM: keras's dot_product_attention, written out on
    # TensorFlow (other backends call it: their fused kernels).
    want = ops.dot_product_attention(q, k, v, mask=mask[:, None])
    written_out = keras.backend.backend() == "tensorflow"
    with mock.patch.object(ops, "dot_product_attention",
                           side_effect=AssertionError("keras's TF kernel"),
                           ) if written_out else contextlib.nullcontext():
        got = roformer.dense_attention(q, k, v, mask)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
