"""Rotary position embedding whose positions restart for every sequence."""

import keras
from keras import ops

from tfpack.errors import TfpackError


@keras.saving.register_keras_serializable(package="tfpack")
class PackedRotaryEmbedding(keras.layers.Layer):
    """Rotary position embedding (RoPE) driven by per-sequence `position_ids`.

    RoPE rotates query and key features by an angle proportional to the
    token's position. Packed sequences must restart that position at 0
    (seed 002), so the angles come from `position_ids` instead of
    `arange(L)`. Uses the "rotate half" layout of keras-hub's
    `RotaryEmbedding` and Hugging Face's LLaMA.

    Example:

    >>> import numpy as np
    >>> rope = PackedRotaryEmbedding()
    >>> x = np.ones((1, 5, 2, 8), "float32")  # [batch, length, heads, dim]
    >>> y = rope(x, np.array([[0, 1, 0, 1, 2]]))
    >>> bool(np.allclose(np.asarray(y)[0, 1], np.asarray(y)[0, 3]))
    True

    Args:
        max_wavelength: base of the geometric progression of frequencies.
        scaling_factor: positions are divided by this (linear RoPE scaling).
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        inputs: `[batch, length, heads, head_dim]` queries or keys; `head_dim`
            must be even.
        position_ids: int `[batch, length]` positions inside each sequence.

    Returns:
        The rotated `inputs`, same shape and dtype.
    """

    def __init__(self, max_wavelength=10000, scaling_factor=1.0, **kwargs):
        super().__init__(**kwargs)
        if not max_wavelength > 0:
            raise TfpackError("`max_wavelength` must be positive. "
                              f"Received: max_wavelength={max_wavelength!r}")
        if not scaling_factor > 0:
            raise TfpackError("`scaling_factor` must be positive. "
                              f"Received: scaling_factor={scaling_factor!r}")
        self.max_wavelength = max_wavelength
        self.scaling_factor = scaling_factor
        self.built = True

    def call(self, inputs, position_ids):
        head_dim = inputs.shape[-1]
        # Angles in float32 even under mixed precision: positions up to a few
        # thousand times ~1 rad lose all precision in float16.
        exponent = ops.arange(0, head_dim, 2, dtype="float32") / head_dim
        inverse_frequency = 1.0 / ops.power(
            ops.cast(self.max_wavelength, "float32"), exponent)
        positions = ops.cast(position_ids, "float32") / self.scaling_factor
        angles = ops.expand_dims(positions, -1) * inverse_frequency  # [B,L,D/2]
        angles = ops.concatenate([angles, angles], axis=-1)
        cos = ops.expand_dims(ops.cos(angles), 2)  # broadcast over heads
        sin = ops.expand_dims(ops.sin(angles), 2)
        x = ops.cast(inputs, "float32")
        first, second = ops.split(x, 2, axis=-1)
        rotated = ops.concatenate([-second, first], axis=-1)
        return ops.cast(x * cos + rotated * sin, inputs.dtype)

    def compute_output_shape(self, input_shape, position_ids_shape=None):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_wavelength": self.max_wavelength,
            "scaling_factor": self.scaling_factor,
        })
        return config
