"""Rotary position embedding whose positions restart for every sequence.

The one rotary implementation of tfpack: `PackedRotaryEmbedding` (tfpack's
own models) and the keras-hub adapters share `rotary_angles` (angles from
per-token positions), `rotate` (the rotation, "rotate half" or interleaved
pairs) and `rotate_partial` (the first features only), whatever computes
each family's frequencies.

Example:

>>> import numpy as np
>>> x = np.ones((1, 3, 1, 4), "float32")  # [batch, length, heads, dim]
>>> angles = rotary_angles(np.array([[0, 1, 0]]), np.array([1.0, 0.01], "float32"))
>>> y = np.asarray(rotate(x, ops.cos(angles), ops.sin(angles)))
>>> bool(np.allclose(y[0, 0], x[0, 0])), bool(np.allclose(y[0, 0], y[0, 2]))
(True, True)
"""

import keras
from keras import ops

from tfpack.layers.arguments import POSITIVE, WAVELENGTH
from tfpack.params import validate_params


def rotary_angles(position_ids, inverse_frequency):
    """Angles `[B, L, 1, 2 * F]` of int `position_ids` `[B, L]` times
    `inverse_frequency` `[F]`, the two halves equal (the "rotate half"
    layout), in `inverse_frequency`'s dtype; broadcast over heads."""
    angles = (ops.expand_dims(ops.cast(position_ids, inverse_frequency.dtype),
                              -1) * inverse_frequency)
    return ops.expand_dims(ops.concatenate([angles, angles], axis=-1), 2)


def rotate(x, cos, sin, interleaved=False):
    """`x * cos + turn(x) * sin`: the rotary rotation of `x` `[..., D]`.

    `turn` is "rotate half" (`[-x2, x1]` of the halves: Llama, keras-hub's
    `RotaryEmbedding`, ESM, Phi-3, SmolLM3) or, `interleaved`, the turn of
    each pair (`[-x1, x0, -x3, x2, ...]`: RoFormer); `cos` and `sin`
    broadcast to `x`.
    """
    if interleaved:
        turned = ops.stack([-x[..., 1::2], x[..., ::2]], axis=-1)
    else:
        first, second = ops.split(x, 2, axis=-1)
        # stack + reshape, not concatenate: keras-hub's workaround of an XLA
        # bug on JAX, kept so that the result is the same.
        turned = ops.stack((-second, first), axis=-2)
    return x * cos + ops.reshape(turned, ops.shape(x)) * sin


def rotate_partial(x, rotary_dim, turn):
    """`turn` applied to the first `rotary_dim` features of `x`, the others
    unchanged (GPT-NeoX's `rotary_percentage`, GPT-OSS's odd head dims);
    all of `x` when `rotary_dim` is None or covers it."""
    if rotary_dim is None or rotary_dim >= x.shape[-1]:
        return turn(x)
    return ops.concatenate([turn(x[..., :rotary_dim]), x[..., rotary_dim:]],
                           axis=-1)


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

    @validate_params({"max_wavelength": WAVELENGTH, "scaling_factor": POSITIVE})
    def __init__(self, max_wavelength=10000, scaling_factor=1.0, **kwargs):
        super().__init__(**kwargs)
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
        angles = rotary_angles(position_ids,
                               inverse_frequency / self.scaling_factor)
        x = ops.cast(inputs, "float32")
        return ops.cast(rotate(x, ops.cos(angles), ops.sin(angles)),
                        inputs.dtype)

    def compute_output_shape(self, input_shape, position_ids_shape=None):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_wavelength": self.max_wavelength,
            "scaling_factor": self.scaling_factor,
        })
        return config
