"""One transformer layer (attention + feed-forward) for packed inputs."""

import keras

from tfpack.errors import TfpackError
from tfpack.layers.arguments import DROPOUT, EPSILON, INITIALIZER, WAVELENGTH, WIDTH
from tfpack.layers.attention_implementation import IMPLEMENTATION_PARAMETERS
from tfpack.layers.self_attention import PackedSelfAttention
from tfpack.params import Boolean, Options, validate_params

ACTIVATIONS = ("gelu", "gelu_tanh", "relu")


def get_activation(name):
    """Maps an activation name to a function: exact or tanh GELU, or ReLU."""
    if name == "gelu":
        return lambda x: keras.activations.gelu(x, approximate=False)
    if name == "gelu_tanh":
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "relu":
        return keras.activations.relu
    raise TfpackError(f"`activation` must be one of {ACTIVATIONS}. "
                      f"Received: activation={name!r}")


@keras.saving.register_keras_serializable(package="tfpack")
class PackedTransformerBlock(keras.layers.Layer):
    """Self-attention and feed-forward sublayers with residuals and norms.

    `norm_first=False` is BERT's post-norm layer (sublayer, dropout, add,
    layer norm); `norm_first=True` the pre-norm layer of GPT-style decoders.
    Masking is in the additive `attention_mask` (or, for the segmented
    attention, in `sequence_ids` and `causal`), so the same block serves
    packed and unpacked, bidirectional and causal models.

    Example:

    >>> import numpy as np
    >>> from tfpack.layers import PackedAttentionMask
    >>> mask = PackedAttentionMask(mask_type="additive")(np.array([[1, 1, 2]]))
    >>> block = PackedTransformerBlock(num_heads=2, hidden_dim=8,
    ...                                intermediate_dim=16)
    >>> block(np.ones((1, 3, 8), "float32"), mask).shape
    TensorShape([1, 3, 8])

    Args:
        num_heads: attention heads.
        hidden_dim: model width.
        intermediate_dim: width of the feed-forward hidden layer.
        activation: `"gelu"` (exact, erf), `"gelu_tanh"` (tanh approximation)
            or `"relu"`.
        dropout: dropout after each sublayer.
        attention_dropout: dropout on attention probabilities.
        layer_norm_epsilon: epsilon of the layer norms.
        norm_first: pre-norm (True) or post-norm (False, BERT).
        rotary: rotary position embedding in the attention.
        rotary_max_wavelength: RoPE base when `rotary=True`.
        kernel_initializer: initializer of the dense kernels.
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"` (JAX); see
            `PackedSelfAttention`.
        causal: decoder attention (for the segmented path and a mask built
            from `sequence_ids`).
        max_sequences_per_pack: `K` of the segmented attention.
        segment_length: `S` of the segmented attention; None = `L`.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        inputs: `[batch, length, hidden_dim]`.
        attention_mask: additive `[batch, 1, length, length]` mask, or None
            to build it from `sequence_ids` where needed.
        position_ids: int `[batch, length]`, used when `rotary=True`.
        sequence_ids: int `[batch, length]`; needed by the segmented
            attention and when `attention_mask` is None.
        training: whether dropout is active.

    Returns:
        `[batch, length, hidden_dim]`.
    """

    @validate_params({
        "num_heads": WIDTH, "hidden_dim": WIDTH, "intermediate_dim": WIDTH,
        "activation": Options(*ACTIVATIONS), "dropout": DROPOUT, "attention_dropout": DROPOUT,
        "layer_norm_epsilon": EPSILON, "norm_first": Boolean(), "rotary": Boolean(),
        "rotary_max_wavelength": WAVELENGTH, "kernel_initializer": INITIALIZER,
        **IMPLEMENTATION_PARAMETERS, "causal": Boolean(),
    })
    def __init__(self, num_heads, hidden_dim, intermediate_dim,
                 activation="gelu", dropout=0.0, attention_dropout=0.0,
                 layer_norm_epsilon=1e-12, norm_first=False, rotary=False,
                 rotary_max_wavelength=10000,
                 kernel_initializer="glorot_uniform",
                 attention_implementation="auto", causal=False,
                 max_sequences_per_pack=None, segment_length=None, **kwargs):
        super().__init__(**kwargs)
        self._activation_fn = get_activation(activation)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = norm_first
        self.rotary = rotary
        self.rotary_max_wavelength = rotary_max_wavelength
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.attention_implementation = attention_implementation
        self.causal = bool(causal)
        self.max_sequences_per_pack = max_sequences_per_pack
        self.segment_length = segment_length
        policy = self.dtype_policy
        self.attention = PackedSelfAttention(
            num_heads, hidden_dim, dropout=attention_dropout, rotary=rotary,
            rotary_max_wavelength=rotary_max_wavelength,
            kernel_initializer=self.kernel_initializer,
            attention_implementation=attention_implementation, causal=causal,
            max_sequences_per_pack=max_sequences_per_pack,
            segment_length=segment_length, dtype=policy, name="attention")
        self.attention_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_norm")
        self.intermediate_dense = keras.layers.Dense(
            intermediate_dim, kernel_initializer=self.kernel_initializer,
            dtype=policy, name="intermediate")
        self.output_dense = keras.layers.Dense(
            hidden_dim, kernel_initializer=self.kernel_initializer,
            dtype=policy, name="output")
        self.output_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="output_norm")
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=policy)

    def build(self, input_shape):
        self.attention.build(input_shape)
        self.attention_norm.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build(
            tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.output_norm.build(input_shape)
        self.built = True

    def _feed_forward(self, x, training):
        x = self._activation_fn(self.intermediate_dense(x))
        return self.dropout_layer(self.output_dense(x), training=training)

    def call(self, inputs, attention_mask=None, position_ids=None,
             sequence_ids=None, training=None):
        x = inputs
        if self.norm_first:
            attended = self.attention(self.attention_norm(x), attention_mask,
                                      position_ids, sequence_ids,
                                      training=training)
            x = x + self.dropout_layer(attended, training=training)
            return x + self._feed_forward(self.output_norm(x), training)
        attended = self.attention(x, attention_mask, position_ids,
                                  sequence_ids, training=training)
        x = self.attention_norm(
            x + self.dropout_layer(attended, training=training))
        return self.output_norm(x + self._feed_forward(x, training))

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "norm_first": self.norm_first,
            "rotary": self.rotary,
            "rotary_max_wavelength": self.rotary_max_wavelength,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
            "attention_implementation": self.attention_implementation,
            "causal": self.causal,
            "max_sequences_per_pack": self.max_sequences_per_pack,
            "segment_length": self.segment_length,
        })
        return config
