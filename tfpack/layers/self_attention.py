"""Multi-head self-attention over a pack: dense masked or segmented."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.attention_implementation import choose_implementation
from tfpack.layers.attention_implementation import default_device
from tfpack.layers.attention_implementation import IMPLEMENTATION_PARAMETERS
from tfpack.layers.attention_implementation import validate_implementation
from tfpack.layers.arguments import DROPOUT, INITIALIZER, WAVELENGTH, WIDTH
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.packed_attention import packed_attention
from tfpack.layers.rotary_embedding import PackedRotaryEmbedding
from tfpack.params import Boolean, validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class PackedSelfAttention(keras.layers.Layer):
    """Self-attention over a pack, kept inside each packed sequence.

    The layout of the projections is BERT's (one `[hidden, hidden]` dense for
    each of query, key, value and output, with biases), so Hugging Face BERT
    weights load as plain transposes. The softmax runs in float32 under mixed
    precision. With `rotary=True` queries and keys are rotated by
    `PackedRotaryEmbedding` using the per-sequence `position_ids`.

    Two computations give the same outputs on real tokens (to float32
    rounding; padding tokens' outputs are unspecified):

    - `"dense"`: all `L x L` scores plus the additive `attention_mask` of
      `PackedAttentionMask` (built from `sequence_ids` when not given).
    - `"segmented"`: each sequence gathered into its own row (rows sized
      at trace time from `L`, `K = max_sequences_per_pack` and
      `S = segment_length`; see `segmented_attention`), attended there,
      scattered back. A batch the rows cannot hold falls back to dense, so
      results never depend on `K` and `S`, only speed does. Needs `sequence_ids`; ignores
      `attention_mask` except in that fallback, so the mask must be the
      block-diagonal one (with `causal` matching this layer's).
    - `"flash"` (JAX backend only): the fused Pallas kernel of
      `flash_attention`, whose key loop visits only the key blocks of each
      query block's sequences; no `L x L` buffer; no attention dropout
      while training. Needs `sequence_ids`; ignores `attention_mask`.
    - `"auto"` (default): the rule of `attention_implementation`, measured;
      dense whenever a call is given an `attention_mask` (a mask other than
      the block-diagonal one, e.g. shared prompts' branches, must be read).

    On the JAX backend, without active dropout, both use
    `jax.nn.dot_product_attention` (cuDNN on GPUs where it applies, XLA
    otherwise).

    Example:

    >>> import numpy as np
    >>> sequence_ids = np.array([[1, 1, 2, 0]])
    >>> layer = PackedSelfAttention(num_heads=2, hidden_dim=8,
    ...                             attention_implementation="segmented",
    ...                             max_sequences_per_pack=2)
    >>> layer(np.ones((1, 4, 8), "float32"), sequence_ids=sequence_ids).shape
    TensorShape([1, 4, 8])

    Args:
        num_heads: number of attention heads; must divide `hidden_dim`.
        hidden_dim: width of the inputs and outputs.
        dropout: dropout rate on the attention probabilities.
        rotary: apply rotary position embedding to queries and keys.
        rotary_max_wavelength: RoPE base when `rotary=True`.
        kernel_initializer: initializer of the four dense kernels.
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"`.
        causal: tokens attend to earlier tokens of their sequence only (used
            where the layer builds the mask itself, and by `"segmented"`).
        max_sequences_per_pack: `K`, sequences per pack the segmented rows
            hold; required by `"segmented"`, and `"auto"` does not pick
            segmented without it.
        segment_length: `S`, longest sequence the segmented rows hold;
            None = `L`.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        inputs: `[batch, length, hidden_dim]`.
        attention_mask: additive `[batch, 1, length, length]` mask, or None
            to build it from `sequence_ids`.
        position_ids: int `[batch, length]`; required when `rotary=True`.
        sequence_ids: int `[batch, length]`, 1..K per sequence, 0 on padding;
            required by `"segmented"` and when `attention_mask` is None.
        training: whether dropout is active.

    Returns:
        `[batch, length, hidden_dim]`.
    """

    @validate_params({
        "num_heads": WIDTH, "hidden_dim": WIDTH, "dropout": DROPOUT, "rotary": Boolean(),
        "rotary_max_wavelength": WAVELENGTH, "kernel_initializer": INITIALIZER,
        **IMPLEMENTATION_PARAMETERS, "causal": Boolean(),
    })
    def __init__(self, num_heads, hidden_dim, dropout=0.0, rotary=False,
                 rotary_max_wavelength=10000, kernel_initializer="glorot_uniform",
                 attention_implementation="auto", causal=False,
                 max_sequences_per_pack=None, segment_length=None, **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise TfpackError(
                "`hidden_dim` must be divisible by `num_heads`. "
                f"Received: hidden_dim={hidden_dim}, num_heads={num_heads}")
        validate_implementation(attention_implementation,
                                max_sequences_per_pack, segment_length)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.rotary = rotary
        self.rotary_max_wavelength = rotary_max_wavelength
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.attention_implementation = attention_implementation
        self.causal = bool(causal)
        self.max_sequences_per_pack = max_sequences_per_pack
        self.segment_length = segment_length
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
        self.mask_layer = PackedAttentionMask(
            causal=causal, mask_type="additive", dtype=self.dtype_policy,
            name="attention_mask")

    def build(self, input_shape):
        for layer in (self.query_dense, self.key_dense, self.value_dense,
                      self.output_dense):
            layer.build(input_shape)
        self.built = True

    def _heads(self, x):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, length, self.num_heads, self.head_dim))

    def implementation_for(self, length):
        """`"dense"`, `"segmented"` or `"flash"`: what a call at row
        `length` runs."""
        return choose_implementation(
            self.attention_implementation, backend=keras.backend.backend(),
            length=length, max_sequences_per_pack=self.max_sequences_per_pack,
            segment_length=self.segment_length,
            device=default_device(keras.backend.backend()),
            flash=not self.dropout)

    def call(self, inputs, attention_mask=None, position_ids=None,
             sequence_ids=None, training=None):
        query = self._heads(self.query_dense(inputs))
        key = self._heads(self.key_dense(inputs))
        value = self._heads(self.value_dense(inputs))
        if self.rotary_embedding is not None:
            query = self.rotary_embedding(query, position_ids)
            key = self.rotary_embedding(key, position_ids)
        query = query * ops.cast(1.0 / self.head_dim ** 0.5, query.dtype)
        if attention_mask is None and sequence_ids is None:
            raise TfpackError("PackedSelfAttention needs `attention_mask` or "
                              "`sequence_ids`. Received: neither")
        # "auto" never passes over a mask it is given (a branch mask, an
        # ablation's): only dense attention reads one.
        implementation = ("dense" if attention_mask is not None
                          and self.attention_implementation == "auto"
                          else self.implementation_for(inputs.shape[1]))
        context = packed_attention(
            query, key, value, implementation=implementation,
            dense_bias=lambda: (attention_mask if attention_mask is not None
                                else self.mask_layer(sequence_ids)),
            sequence_ids=sequence_ids, causal=self.causal,
            max_sequences_per_pack=self.max_sequences_per_pack,
            segment_length=self.segment_length, dropout=self.dropout,
            training=training,
            seed_generator=getattr(self.dropout_layer, "seed_generator", None))
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
            "attention_implementation": self.attention_implementation,
            "causal": self.causal,
            "max_sequences_per_pack": self.max_sequences_per_pack,
            "segment_length": self.segment_length,
        })
        return config
