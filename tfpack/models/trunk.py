"""The transformer trunk shared by the BERT encoder and the decoder backbone.

`TransformerBackbone` owns what both backbones have in common: the token
embedding, the packed attention mask (block-diagonal from ``sequence_ids``,
causal for decoders), the stack of `PackedTransformerBlock` layers, the
choice of ``position_ids`` (reset per sequence, or ``0..L-1`` for the
ablation) and the common constructor arguments and config. A subclass adds
its embeddings around it (BERT: learned positions, token types, a layer norm;
decoder: rotary or learned positions, a final norm).

A new option of the attention layers is threaded through here once: add it
to `TransformerBackbone.__init__`, pass it to the blocks built there, add it
to ``get_config`` and to the two subclasses' signatures; both backbones get it.

Example:

>>> import numpy as np
>>> from tfpack.models import BertEncoder, DecoderBackbone
>>> features = {"input_ids": np.array([[5, 6, 7, 0]]),
...             "sequence_ids": np.array([[1, 1, 2, 0]]),
...             "position_ids": np.array([[0, 1, 0, 0]])}
>>> for cls in (BertEncoder, DecoderBackbone):
...     model = cls(vocabulary_size=10, num_layers=1, hidden_dim=8,
...                 num_heads=2, intermediate_dim=16)
...     print(cls.__name__, model(features)["sequence_output"].shape)
BertEncoder (1, 4, 8)
DecoderBackbone (1, 4, 8)
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.arguments import DROPOUT, EPSILON, POSITIVE, WAVELENGTH, WIDTH
from tfpack.layers.attention_implementation import IMPLEMENTATION_PARAMETERS
from tfpack.layers.attention_implementation import validate_implementation
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.transformer_block import ACTIVATIONS
from tfpack.layers.transformer_block import PackedTransformerBlock
from tfpack.models.backbone import Backbone
from tfpack.params import Boolean, Options, validate_params

# The declared arguments (`tfpack.params`) of the transformer backbones.
TRUNK_PARAMETERS = {
    "vocabulary_size": WIDTH, "num_layers": WIDTH, "hidden_dim": WIDTH, "num_heads": WIDTH,
    "intermediate_dim": WIDTH, "max_sequence_length": WIDTH,
    "activation": Options(*ACTIVATIONS), "layer_norm_epsilon": EPSILON, "dropout": DROPOUT,
    "attention_dropout": DROPOUT, "initializer_range": POSITIVE, "reset_positions": Boolean(),
    "block_diagonal_mask": Boolean(), "causal": Boolean(), "norm_first": Boolean(),
    "rotary": Boolean(), "rotary_max_wavelength": WAVELENGTH, **IMPLEMENTATION_PARAMETERS,
}


class TransformerBackbone(Backbone):
    """Token embedding, packed attention mask and transformer layers.

    Args:
        vocabulary_size: token vocabulary size.
        num_layers: transformer layers.
        hidden_dim: model width.
        num_heads: attention heads.
        intermediate_dim: feed-forward width.
        max_sequence_length: capacity of the position table (the longest
            pack).
        activation: `"gelu"` (exact), `"gelu_tanh"` or `"relu"`.
        layer_norm_epsilon: epsilon of the layer norms.
        dropout: dropout after sublayers and embeddings.
        attention_dropout: dropout on attention probabilities.
        initializer_range: stddev of the truncated-normal initializers.
        reset_positions: positions from `position_ids`; `False` uses `0..L-1`
            for every row (ablation only).
        block_diagonal_mask: keep sequences apart in attention; `False`
            masks padding only (or is plainly causal) (ablation only).
        causal: causal attention (decoders).
        norm_first: pre-norm layers (decoders) or post-norm (BERT).
        rotary: rotary position embeddings inside attention.
        rotary_max_wavelength: RoPE base.
        attention_implementation: `"auto"` (default), `"dense"`,
            `"segmented"` or `"flash"` (JAX); see `PackedSelfAttention`. With
            `block_diagonal_mask=False` (the ablation) attention is dense.
        max_sequences_per_pack: `K` the packs were made with; lets `"auto"`
            pick segmented attention where it measured faster, and is
            required by `"segmented"`.
        segment_length: longest sequence of the packs (`S`), when the data
            bounds it below the pack length; None = `L`.
        **kwargs: passed on to `keras.Model`.
    """

    @validate_params(TRUNK_PARAMETERS)
    def __init__(self, vocabulary_size, num_layers, hidden_dim, num_heads,
                 intermediate_dim, *, max_sequence_length, activation,
                 layer_norm_epsilon, dropout, attention_dropout,
                 initializer_range, reset_positions, block_diagonal_mask,
                 causal=False, norm_first=False, rotary=False,
                 rotary_max_wavelength=10000, attention_implementation="auto",
                 max_sequences_per_pack=None, segment_length=None, **kwargs):
        super().__init__(**kwargs)
        validate_implementation(attention_implementation,
                                max_sequences_per_pack, segment_length)
        if (attention_implementation in ("segmented", "flash")
                and not block_diagonal_mask):
            raise TfpackError(
                f"`attention_implementation={attention_implementation!r}` "
                "keeps sequences apart; the ablation `block_diagonal_mask="
                "False` needs dense attention. Received: attention_"
                f"implementation={attention_implementation!r}, "
                "block_diagonal_mask=False")
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.reset_positions = reset_positions
        self.block_diagonal_mask = block_diagonal_mask
        self.attention_implementation = attention_implementation
        self.max_sequences_per_pack = max_sequences_per_pack
        self.segment_length = segment_length

        policy = self.dtype_policy
        self._initializer = keras.initializers.TruncatedNormal(
            stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, hidden_dim,
            embeddings_initializer=self._initializer, dtype=policy,
            name="token_embedding")
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.attention_mask = PackedAttentionMask(
            causal=causal, mask_type="additive",
            block_diagonal=block_diagonal_mask, dtype=policy,
            name="attention_mask")
        self.transformer_layers = [
            PackedTransformerBlock(
                num_heads, hidden_dim, intermediate_dim, activation=activation,
                dropout=dropout, attention_dropout=attention_dropout,
                layer_norm_epsilon=layer_norm_epsilon, norm_first=norm_first,
                rotary=rotary, rotary_max_wavelength=rotary_max_wavelength,
                kernel_initializer=self._initializer,
                attention_implementation=(attention_implementation
                                          if block_diagonal_mask else "dense"),
                causal=causal, max_sequences_per_pack=max_sequences_per_pack,
                segment_length=segment_length, dtype=policy,
                name=f"transformer_layer_{i}")
            for i in range(num_layers)
        ]

    def position_ids(self, inputs):
        """``position_ids`` of the features, or ``0..L-1`` for the ablation."""
        input_ids = inputs["input_ids"]
        if self.reset_positions:
            return ops.cast(inputs["position_ids"], "int32")
        length = ops.shape(input_ids)[1]
        return ops.zeros_like(ops.cast(input_ids, "int32")) + ops.arange(
            length, dtype="int32")

    def run_layers(self, x, inputs, position_ids, training=None):
        """The transformer layers under the packed mask of ``sequence_ids``.

        Dense attention gets the mask built once here; segmented attention
        gets ``sequence_ids`` only (a layer builds the mask itself in the
        rare batch its rows cannot hold).
        """
        sequence_ids = inputs["sequence_ids"]
        attention = self.transformer_layers[0].attention if (
            self.transformer_layers) else None
        mask = None
        if attention is None or attention.implementation_for(
                x.shape[1]) == "dense":
            mask = self.attention_mask(sequence_ids)
        for layer in self.transformer_layers:
            x = layer(x, mask, position_ids, sequence_ids, training=training)
        return x

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "initializer_range": self.initializer_range,
            "reset_positions": self.reset_positions,
            "block_diagonal_mask": self.block_diagonal_mask,
            "attention_implementation": self.attention_implementation,
            "max_sequences_per_pack": self.max_sequences_per_pack,
            "segment_length": self.segment_length,
        })
        return config
