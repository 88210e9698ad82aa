"""Multi-head self-attention that takes an additive packed mask."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.rotary_embedding import PackedRotaryEmbedding


@keras.saving.register_keras_serializable(package="tfpack")
class PackedSelfAttention(keras.layers.Layer):
    """Self-attention over a pack, masked by `PackedAttentionMask`.

    The layout of the projections is BERT's (one `[hidden, hidden]` dense for
    each of query, key, value and output, with biases), so Hugging Face BERT
    weights load as plain transposes. The softmax runs in float32 under mixed
    precision. With `rotary=True` queries and keys are rotated by
    `PackedRotaryEmbedding` using the per-sequence `position_ids`.

    Example:

    >>> import numpy as np
    >>> from tfpack.layers import PackedAttentionMask
    >>> sequence_ids = np.array([[1, 1, 2, 0]])
    >>> mask = PackedAttentionMask(mask_type="additive")(sequence_ids)
    >>> layer = PackedSelfAttention(num_heads=2, hidden_dim=8)
    >>> layer(np.ones((1, 4, 8), "float32"), mask).shape
    TensorShape([1, 4, 8])

    Args:
        num_heads: number of attention heads; must divide `hidden_dim`.
        hidden_dim: width of the inputs and outputs.
        dropout: dropout rate on the attention probabilities.
        rotary: apply rotary position embedding to queries and keys.
        rotary_max_wavelength: RoPE base when `rotary=True`.
        kernel_initializer: initializer of the four dense kernels.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        inputs: `[batch, length, hidden_dim]`.
        attention_mask: additive `[batch, 1, length, length]` mask.
        position_ids: int `[batch, length]`; required when `rotary=True`.
        training: whether dropout is active.

    Returns:
        `[batch, length, hidden_dim]`.
    """

    def __init__(self, num_heads, hidden_dim, dropout=0.0, rotary=False,
                 rotary_max_wavelength=10000, kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise TfpackError(
                "`hidden_dim` must be divisible by `num_heads`. "
                f"Received: hidden_dim={hidden_dim}, num_heads={num_heads}")
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.rotary = rotary
        self.rotary_max_wavelength = rotary_max_wavelength
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.head_dim = hidden_dim // num_heads

        def dense(name):
            return keras.layers.Dense(
                hidden_dim, kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy, name=name)

        self.query_dense = dense("query")
        self.key_dense = dense("key")
        self.value_dense = dense("value")
        self.output_dense = dense("attention_output")
        self.dropout_layer = keras.layers.Dropout(dropout,
                                                  dtype=self.dtype_policy)
        self.rotary_embedding = (
            PackedRotaryEmbedding(rotary_max_wavelength, dtype=self.dtype_policy,
                                  name="rotary_embedding")
            if rotary else None)

    def build(self, input_shape):
        for layer in (self.query_dense, self.key_dense, self.value_dense,
                      self.output_dense):
            layer.build(input_shape)
        self.built = True

    def _heads(self, x):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, length, self.num_heads, self.head_dim))

    def call(self, inputs, attention_mask, position_ids=None, training=None):
        query = self._heads(self.query_dense(inputs))
        key = self._heads(self.key_dense(inputs))
        value = self._heads(self.value_dense(inputs))
        if self.rotary_embedding is not None:
            query = self.rotary_embedding(query, position_ids)
            key = self.rotary_embedding(key, position_ids)
        query = query * ops.cast(1.0 / self.head_dim ** 0.5, query.dtype)
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
        scores = ops.cast(scores, "float32") + ops.cast(attention_mask,
                                                         "float32")
        probabilities = ops.cast(ops.softmax(scores, axis=-1),
                                 self.compute_dtype)
        probabilities = self.dropout_layer(probabilities, training=training)
        context = ops.einsum("bhqk,bkhd->bqhd", probabilities, value)
        batch, length = ops.shape(inputs)[0], ops.shape(inputs)[1]
        context = ops.reshape(context, (batch, length, self.hidden_dim))
        return self.output_dense(context)

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "dropout": self.dropout,
            "rotary": self.rotary,
            "rotary_max_wavelength": self.rotary_max_wavelength,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
        })
        return config
