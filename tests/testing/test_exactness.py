"""The run-time exactness check (issue 34, item 3): `check_packing_exact` and
its wiring into `Trainer.fit` and `model.fit` (`ExactnessCheck`).

A leak is refused in one line naming the first layer that differs; exact
models pass, in float32 and under mixed precision.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.transformer_block import PackedTransformerBlock
from tfpack.models import BertEncoder, CausalLM, DecoderBackbone
from tfpack.testing import PackingNotExactError, check_packing_exact
from tfpack.testing import next_token_labels, pack_examples
from tfpack.training import ExactnessCheck, Trainer

TINY = dict(vocabulary_size=30, num_layers=2, hidden_dim=8, num_heads=2,
            intermediate_dim=16)


class RowSumBlock(PackedTransformerBlock):
    """A transformer layer that adds a running sum along the row: each token
    reads the tokens before it, of its own sequence and of the others."""

    def call(self, x, *args, **kwargs):
        out = super().call(x, *args, **kwargs)
        return out + 0.1 * ops.cumsum(out, axis=1)


def _leaky_decoder(layer=1, **kwargs):
    keras.utils.set_random_seed(0)
    decoder = DecoderBackbone(**TINY, **kwargs)
    decoder.transformer_layers[layer].__class__ = RowSumBlock
    return decoder


def _lm_examples():
    return [{"input_ids": ids, "labels": next_token_labels(ids)}
            for ids in ([3, 4, 5], [6, 7], [8, 9, 10, 11], [12])]


def test_exact_models_pass_with_layers_compared():
    keras.utils.set_random_seed(0)
    result = check_packing_exact(CausalLM(DecoderBackbone(**TINY)))
    assert result.lengths == (5, 1, 3) and result.reference == "packs of one"
    compared = list(result.differences)
    assert compared[:3] == ["layer 'transformer_layer_0'", "layer 'transformer_layer_1'",
                            "output 'sequence_output'"]
    assert sum(name.startswith("gradient of") for name in compared) >= 10
    assert result.worst[1] < 0.1  # Float32 rounding, far below the tolerance.


def test_a_leaking_layer_is_refused_naming_it():
    """Layer 0 is exact, layer 1 leaks: the refusal names layer 1."""
    with pytest.raises(PackingNotExactError,
                       match=r"^A packed model must compute every sequence as it computes "
                             r"alone .* Received: layer 'transformer_layer_1' \(probe "
                             r"sequence [23] of 3, (1 token|3 tokens)\) differs by [0-9.e+-]+, "
                             r"tolerance [0-9.e+-]+ \(float32, dense attention") as error:
        check_packing_exact(_leaky_decoder(layer=1))
    assert "\n" not in str(error.value)
    assert error.value.location == "layer 'transformer_layer_1'"
    assert error.value.difference > 100 * error.value.tolerance


def test_attention_without_the_sequence_mask_is_refused_at_the_first_layer():
    # The ablation `block_diagonal_mask=False` attends across sequences.
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(**TINY, block_diagonal_mask=False)
    with pytest.raises(PackingNotExactError, match="layer 'transformer_layer_0'"):
        check_packing_exact(encoder)


def test_a_change_seen_only_in_gradients_is_refused_naming_the_weight():
    """Forward exact, backward leaking: a custom gradient that mixes the row."""

    @ops.custom_gradient
    def mixing_gradient(x):
        def grad(*upstream, **_):
            return upstream[0] + ops.cumsum(upstream[0], axis=1)
        return x, grad

    class Mixing(DecoderBackbone):
        def call(self, inputs, training=None):
            out = super().call(inputs, training=training)["sequence_output"]
            return {"sequence_output": mixing_gradient(out)}

    keras.utils.set_random_seed(0)
    with pytest.raises(PackingNotExactError, match=r"Received: gradient of '.*' differs"):
        check_packing_exact(Mixing(**TINY))


def test_mixed_precision_passes_at_its_own_tolerance():
    keras.utils.set_random_seed(0)
    result = check_packing_exact(DecoderBackbone(**TINY, dtype="mixed_bfloat16"))
    assert result.compute_dtype == "bfloat16" and result.tolerance == 5e-2
    with pytest.raises(PackingNotExactError, match="bfloat16"):
        check_packing_exact(_leaky_decoder(dtype="mixed_bfloat16"))


def test_the_probe_fits_the_backbone():
    keras.utils.set_random_seed(0)
    segmented = DecoderBackbone(**TINY, attention_implementation="segmented",
                                max_sequences_per_pack=2, segment_length=4)
    result = check_packing_exact(segmented, length=10)
    assert result.lengths == (4, 1) and result.length == 10
    assert result.implementation == "segmented"
    with pytest.raises(TfpackError, match="needs a model with a packed backbone"):
        check_packing_exact(keras.Sequential([keras.layers.Dense(2)]))


def _dataset():
    packed = pack_examples(_lm_examples(), max_length=8, max_sequences_per_pack=3)
    return packed, tf.data.Dataset.from_tensor_slices(packed)


def test_trainer_refuses_before_the_first_update_and_can_skip_the_check():
    _, dataset = _dataset()
    model = CausalLM(_leaky_decoder())
    before = [np.array(v) for v in model.trainable_variables] if model.built else None
    trainer = Trainer(model, keras.optimizers.SGD(0.1), micro_batch_size=2,
                      progress=False, jit_compile=False)
    with pytest.raises(PackingNotExactError, match="L=8"):
        trainer.fit(dataset.repeat(), 1)
    assert int(trainer.step.numpy()) == 0
    if before is not None:
        for a, b in zip(before, model.trainable_variables):
            np.testing.assert_array_equal(a, b)
    unchecked = Trainer(CausalLM(_leaky_decoder()), keras.optimizers.SGD(0.1),
                        micro_batch_size=2, progress=False, jit_compile=False,
                        check_exact=False)
    assert unchecked.fit(dataset.repeat(), 1).step == 1


def test_keras_fit_callback_refuses_before_training():
    packed, _ = _dataset()
    model = CausalLM(_leaky_decoder())
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    model(packed)
    before = [np.array(v) for v in model.trainable_variables]
    with pytest.raises(PackingNotExactError, match="transformer_layer_1"):
        model.fit(packed, epochs=1, verbose=0, callbacks=[ExactnessCheck(length=8)])
    for a, b in zip(before, model.trainable_variables):
        np.testing.assert_array_equal(a, b)
    # An exact model trains: the doctest of tfpack.training.exactness.


_ON_JAX = """
import keras
from keras import ops
assert keras.backend.backend() == "jax"
from tfpack.layers.transformer_block import PackedTransformerBlock
from tfpack.models import CausalLM, DecoderBackbone
from tfpack.testing import PackingNotExactError, check_packing_exact

class RowSumBlock(PackedTransformerBlock):
    def call(self, x, *args, **kwargs):
        out = super().call(x, *args, **kwargs)
        return out + 0.1 * ops.cumsum(out, axis=1)

keras.utils.set_random_seed(0)
tiny = dict(vocabulary_size=30, num_layers=2, hidden_dim=8, num_heads=2,
            intermediate_dim=16)
result = check_packing_exact(CausalLM(DecoderBackbone(**tiny)))
gradients = [n for n in result.differences if n.startswith("gradient of")]
assert len(gradients) >= 10 and result.worst[1] < 0.1, result
leaky = DecoderBackbone(**tiny)
leaky.transformer_layers[1].__class__ = RowSumBlock
try:
    check_packing_exact(leaky)
except PackingNotExactError as error:
    assert "layer 'transformer_layer_1'" in str(error) and "jax" in str(error), error
else:
    raise AssertionError("the leak passed on JAX")
print("ok")
"""


@pytest.mark.slow  # A JAX process: ~18 s of CPU (two compiled probe programs each way).
def test_on_jax_gradients_are_compared_and_a_leak_refused():
    pytest.importorskip("jax")
    import subprocess
    import sys

    from jax_env import jax_env

    done = subprocess.run([sys.executable, "-c", _ON_JAX], env=jax_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout
