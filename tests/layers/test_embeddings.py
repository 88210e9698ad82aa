import keras
import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.layers import PackedPositionEmbedding
from tfpack.layers import PackedRotaryEmbedding


def test_position_embedding_restarts_per_sequence():
    layer = PackedPositionEmbedding(max_length=8, output_dim=3)
    out = np.asarray(layer(np.array([[0, 1, 0, 1, 2, 0]])))
    table = np.asarray(layer.position_embeddings)
    np.testing.assert_array_equal(out[0], table[[0, 1, 0, 1, 2, 0]])


def test_position_embedding_config_and_symbolic():
    layer = PackedPositionEmbedding(max_length=8, output_dim=3, name="pos")
    assert tuple(layer(keras.Input((5,), dtype="int32")).shape) == (None, 5, 3)
    clone = PackedPositionEmbedding.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


@pytest.mark.parametrize("name,kwargs", [
    ("max_length", {"max_length": 0, "output_dim": 3}),
    ("output_dim", {"max_length": 4, "output_dim": -1}),
])
def test_position_embedding_errors(name, kwargs):
    with pytest.raises(TfpackError, match=rf"`{name}` must be a positive "
                                          rf"integer. Received: {name}="):
        PackedPositionEmbedding(**kwargs)


def test_position_embedding_mixed_precision():
    layer = PackedPositionEmbedding(4, 2, dtype="mixed_bfloat16")
    out = layer(np.array([[0, 1]]))
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert layer.position_embeddings.dtype == "float32"


def test_rotary_matches_closed_form_and_restarts():
    rope = PackedRotaryEmbedding(max_wavelength=100)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 5, 1, 4)).astype("float32")
    positions = np.array([[0, 1, 0, 1, 2]])
    out = np.asarray(rope(x, positions))
    for t, p in enumerate(positions[0]):
        theta = p / 100.0 ** (np.arange(0, 4, 2) / 4)
        x1, x2 = x[0, t, 0, :2], x[0, t, 0, 2:]
        expected = np.concatenate([x1 * np.cos(theta) - x2 * np.sin(theta),
                                   x2 * np.cos(theta) + x1 * np.sin(theta)])
        np.testing.assert_allclose(out[0, t, 0], expected, atol=1e-6)
    # Position 0 is the identity: the second sequence starts unrotated.
    np.testing.assert_allclose(out[0, 2], x[0, 2], atol=1e-7)


def test_rotary_scores_depend_on_relative_position_only():
    rope = PackedRotaryEmbedding()
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 2, 1, 8)).astype("float32")
    k = rng.normal(size=(1, 2, 1, 8)).astype("float32")

    def score(offset):
        positions = np.array([[offset, offset + 3]])
        rq, rk = np.asarray(rope(q, positions)), np.asarray(rope(k, positions))
        return float(np.dot(rq[0, 1, 0], rk[0, 0, 0]))

    assert abs(score(0) - score(17)) < 1e-4


def test_rotary_config_and_errors():
    layer = PackedRotaryEmbedding(max_wavelength=500, scaling_factor=2.0)
    clone = PackedRotaryEmbedding.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    with pytest.raises(TfpackError, match=r"Received: max_wavelength=0"):
        PackedRotaryEmbedding(max_wavelength=0)
