import keras
import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.layers import PackedMaskedLMHead
from tfpack.layers import PackedSequenceHead

RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(2, 6, 8)).astype("float32")


def _tied_head():
    embedding = keras.layers.Embedding(10, 8)
    embedding.build((None,))
    return embedding, PackedMaskedLMHead(10, token_embedding=embedding,
                                         activation="gelu_tanh")


def test_mlm_head_gathers_positions_and_ties_embedding():
    embedding, head = _tied_head()
    positions = np.array([[0, 4], [5, 0]])
    logits = np.asarray(head(HIDDEN, positions))
    assert logits.shape == (2, 2, 10)
    x = HIDDEN[[0, 0, 1, 1], [0, 4, 5, 0]]
    x = np.asarray(head.layer_norm(keras.activations.gelu(
        head.transform(x), approximate=True)))
    expected = x @ np.asarray(embedding.embeddings).T + np.asarray(
        head.output_bias)
    np.testing.assert_allclose(logits.reshape(4, 10), expected, atol=1e-5)
    # Tied: the table is not a weight of its own and gets gradients.
    assert not any(w is embedding.embeddings for w in head._trainable_variables)
    assert any(w is embedding.embeddings for w in head.trainable_weights)


def test_mlm_head_untied_and_errors():
    head = PackedMaskedLMHead(10)
    assert head(HIDDEN, np.zeros((2, 3), "int32")).shape == (2, 3, 10)
    embedding = keras.layers.Embedding(11, 8)
    with pytest.raises(TfpackError, match=r"Received: token_embedding"
                                          r".input_dim=11, vocabulary_size=10"):
        PackedMaskedLMHead(10, token_embedding=embedding)


def test_mlm_head_config_serializes_tied_embedding():
    _, head = _tied_head()
    config = keras.saving.serialize_keras_object(head)
    clone = keras.saving.deserialize_keras_object(config)
    assert isinstance(clone.token_embedding, keras.layers.Embedding)
    assert clone.token_embedding.input_dim == 10
    assert clone.get_config()["activation"] == "gelu_tanh"


def test_sequence_head_gathers_cls_and_masks_absent():
    head = PackedSequenceHead(3)
    cls_positions = np.array([[0, 2, 0], [0, 0, 0]])
    sequence_mask = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    logits = np.asarray(head(HIDDEN, cls_positions, sequence_mask))
    assert logits.shape == (2, 3, 3)
    np.testing.assert_array_equal(logits[0, 2], 0.0)
    np.testing.assert_array_equal(logits[1, 1:], 0.0)
    expected = np.asarray(head.classifier(head.pooler_dense(HIDDEN[0, 2:3])))[0]
    np.testing.assert_allclose(logits[0, 1], expected, atol=1e-6)


def test_sequence_head_config_and_errors():
    head = PackedSequenceHead(2, pooler=False, dropout=0.2)
    clone = PackedSequenceHead.from_config(head.get_config())
    assert clone.get_config() == head.get_config()
    with pytest.raises(TfpackError, match=r"Received: num_classes=0"):
        PackedSequenceHead(0)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_heads_return_float32_under_mixed_precision(policy):
    head = PackedSequenceHead(2, dtype=policy)
    assert head(HIDDEN, np.zeros((2, 1), "int32")).dtype == "float32"
    mlm = PackedMaskedLMHead(10, dtype=policy)
    assert mlm(HIDDEN, np.zeros((2, 1), "int32")).dtype == "float32"
