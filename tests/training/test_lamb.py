"""LAMB with the BERT recipe: golden numbers against NumPy, the beta**p theorem, config."""

import keras
import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.training import Lamb


def reference_lamb(weights, grads_per_step, *, lr, beta_1, beta_2, eps, wd, decay, adapt):
    """BERT/MLPerf LAMB in NumPy (float64): decay inside the update, then trust ratio."""
    w = {k: np.asarray(v, np.float64).copy() for k, v in weights.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v_ = {k: np.zeros_like(v) for k, v in w.items()}
    for t, grads in enumerate(grads_per_step, start=1):
        for k in w:
            g = np.asarray(grads[k], np.float64)
            m[k] = beta_1 * m[k] + (1 - beta_1) * g
            v_[k] = beta_2 * v_[k] + (1 - beta_2) * g * g
            update = (m[k] / (1 - beta_1**t)) / (np.sqrt(v_[k] / (1 - beta_2**t)) + eps)
            if decay[k]:
                update = update + wd * w[k]
            ratio = 1.0
            if adapt[k]:
                wn, un = np.linalg.norm(w[k]), np.linalg.norm(update)
                ratio = wn / un if wn > 0 and un > 0 else 1.0
            w[k] = w[k] - lr * ratio * update
    return w, m, v_


class Tiny(keras.layers.Layer):
    def build(self, _):
        self.kernel = self.add_weight(shape=(3, 2), name="kernel")
        self.bias = self.add_weight(shape=(2,), name="bias", initializer="zeros")


def _variables():
    rng = np.random.default_rng(0)
    layer = Tiny(name="dense")
    layer.build(None)
    layer.kernel.assign(rng.normal(size=(3, 2)).astype("float32"))
    norm = keras.layers.LayerNormalization(name="layer_norm")
    norm.build((None, 2))
    return {"kernel": layer.kernel, "bias": layer.bias, "gamma": norm.gamma}


@pytest.mark.parametrize("packing_factor", [1.0, 2.0, 1.7])
def test_matches_numpy_reference(packing_factor):
    variables = _variables()
    rng = np.random.default_rng(1)
    grads = [{k: rng.normal(size=v.shape).astype("float32") for k, v in variables.items()}
             for _ in range(3)]
    start = {k: v.numpy() for k, v in variables.items()}
    optimizer = Lamb(learning_rate=0.01, weight_decay=0.1, packing_factor=packing_factor)
    names = list(variables)
    for step in grads:
        optimizer.apply([step[k] for k in names], [variables[k] for k in names])
    expected, _, _ = reference_lamb(
        start, grads, lr=0.01, beta_1=0.9**packing_factor, beta_2=0.999**packing_factor,
        eps=1e-6, wd=0.1,
        # Default exclusions: biases and LayerNorm get neither decay nor adaptation.
        decay={"kernel": True, "bias": False, "gamma": False},
        adapt={"kernel": True, "bias": False, "gamma": False})
    for k in names:
        np.testing.assert_allclose(variables[k].numpy(), expected[k], rtol=2e-5, atol=1e-6)


def test_golden_first_step():
    # Hand-computed: w = [3, 4] (|w| = 5), g = [1, 1]. After one step m_hat = g and
    # v_hat = g**2, so the Adam direction is ~[1, 1]; decay adds 0.1 * w = [0.3, 0.4];
    # update = [1.3, 1.4] (|u| = sqrt(3.65)); trust ratio = 5 / |u|.
    w = keras.Variable(np.array([3.0, 4.0], "float32"), name="kernel")
    Lamb(learning_rate=0.1, weight_decay=0.1, epsilon=0.0).apply(
        [np.ones(2, "float32")], [w])
    ratio = 5.0 / np.sqrt(1.3**2 + 1.4**2)
    np.testing.assert_allclose(w.numpy(), [3 - 0.1 * ratio * 1.3, 4 - 0.1 * ratio * 1.4],
                               rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), [2.6597746, 3.6336033], rtol=1e-6)


def test_keras_lamb_without_decay_is_the_same_update():
    # With no weight decay and nothing excluded this is Keras's own Lamb.
    a = keras.Variable(np.array([[1.0, -2.0], [0.5, 3.0]], "float32"), name="kernel")
    b = keras.Variable(a.numpy(), name="kernel")
    g = np.array([[0.3, -0.1], [0.2, 0.4]], "float32")
    ours = Lamb(learning_rate=0.05, weight_decay=None, exclude_from_weight_decay=(),
                epsilon=1e-7)
    theirs = keras.optimizers.Lamb(learning_rate=0.05, epsilon=1e-7)
    for _ in range(3):
        ours.apply([g], [a])
        theirs.apply([g], [b])
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_theorem_d1_one_packed_step_equals_p_steps(p):
    """Seed 000, theorem D.1: beta**p in one step == p steps with the same gradient."""
    rng = np.random.default_rng(p)
    g = rng.normal(size=(4,)).astype("float32")
    m0 = rng.normal(size=(4,)).astype("float32")
    v0 = rng.uniform(0.1, 1.0, size=(4,)).astype("float32")
    unpacked_w = keras.Variable(np.ones(4, "float32"), name="kernel")
    packed_w = keras.Variable(np.ones(4, "float32"), name="kernel")
    unpacked = Lamb(learning_rate=1e-3, beta_1=0.8, beta_2=0.95)
    packed = Lamb(learning_rate=1e-3, beta_1=0.8, beta_2=0.95, packing_factor=p)
    for optimizer, w in ((unpacked, unpacked_w), (packed, packed_w)):
        optimizer.build([w])
        optimizer._momentums[0].assign(m0)
        optimizer._velocities[0].assign(v0)
    for _ in range(p):
        unpacked.apply([g], [unpacked_w])
    packed.apply([g], [packed_w])
    np.testing.assert_allclose(packed._momentums[0].numpy(), unpacked._momentums[0].numpy(),
                               rtol=1e-5)
    np.testing.assert_allclose(packed._velocities[0].numpy(),
                               unpacked._velocities[0].numpy(), rtol=1e-5)
    # The bias corrections agree too: 1 - (beta**p)**1 == 1 - beta**p.
    np.testing.assert_allclose(1 - packed.effective_beta_1 ** 1, 1 - 0.8**p, rtol=1e-12)
    # And the closed form of the proof: m_p = beta**p m0 + (1 - beta**p) g.
    np.testing.assert_allclose(packed._momentums[0].numpy(),
                               0.8**p * m0 + (1 - 0.8**p) * g, rtol=1e-5, atol=1e-7)


def test_exclusion_patterns_match_variable_paths():
    variables = _variables()
    optimizer = Lamb(exclude_from_weight_decay=["bias"],
                     exclude_from_layer_adaptation=["layer_norm"])
    optimizer.build(list(variables.values()))
    assert optimizer._decay_flags == [True, False, True]
    assert optimizer._adapt_flags == [True, True, False]


def test_config_round_trip():
    optimizer = Lamb(learning_rate=2e-3, beta_1=0.85, weight_decay=0.02,
                     exclude_from_weight_decay=["bias"], packing_factor=1.9,
                     global_clipnorm=1.0)
    config = optimizer.get_config()
    assert config["packing_factor"] == 1.9
    assert config["exclude_from_weight_decay"] == ["bias"]
    assert config["exclude_from_layer_adaptation"] == ["bias"]
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, Lamb)
    assert restored.get_config() == config
    assert restored.effective_beta_1 == pytest.approx(0.85**1.9)


def test_compiles_and_trains_with_mixed_precision_loss_scaling():
    x = np.random.default_rng(0).normal(size=(16, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, dtype="mixed_float16")])
    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(Lamb(learning_rate=0.05)),
                  loss="mse", jit_compile=True)
    history = model.fit(x, y, epochs=5, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


@pytest.mark.parametrize("kwargs, message", [
    ({"packing_factor": 0.5}, r"`packing_factor` must be .* Received: packing_factor=0.5"),
    ({"beta_1": 1.0}, r"`beta_1` must be .* Received: beta_1=1.0"),
    ({"weight_decay": -1.0}, r"`weight_decay` must be .* Received: weight_decay=-1.0"),
    ({"exclude_from_weight_decay": [3]}, r"`exclude_from_weight_decay` must be"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(TfpackError, match=message):
        Lamb(**kwargs)
