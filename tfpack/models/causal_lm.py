"""A small decoder-only language model for packed sequences."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.losses import causal_lm_statistics
from tfpack.layers.position_embedding import PackedPositionEmbedding
from tfpack.layers.transformer_block import ACTIVATIONS
from tfpack.layers.transformer_block import PackedTransformerBlock
from tfpack.models.base import PackedModel

POSITION_EMBEDDINGS = ("rotary", "learned")


@keras.saving.register_keras_serializable(package="tfpack")
class CausalLM(PackedModel):
    """Pre-norm decoder whose packed sequences cannot see each other.

    The packing adjustments of seed 002: positions (rotary or learned) reset
    at the start of every sequence via `position_ids`, and the attention mask
    is causal *and* block-diagonal, so token `i` of a sequence sees tokens
    `0..i` of that sequence only. `labels` are next-token targets with -100
    on padding and on the last token of every sequence.

    Example:

    >>> import numpy as np
    >>> model = CausalLM(vocabulary_size=40, num_layers=1, hidden_dim=8,
    ...                  num_heads=2, intermediate_dim=16)
    >>> features = {
    ...     "input_ids": np.array([[5, 6, 7, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "labels": np.array([[6, -100, 8, 9, -100, -100]]),
    ... }
    >>> model(features)["logits"].shape
    TensorShape([1, 6, 40])

    Args:
        vocabulary_size: vocabulary size.
        num_layers: decoder layers.
        hidden_dim: model width.
        num_heads: attention heads.
        intermediate_dim: feed-forward width.
        max_sequence_length: rows of the learned position table (used with
            `position_embedding="learned"`).
        position_embedding: `"rotary"` or `"learned"`.
        activation: `"gelu"`, `"gelu_tanh"` or `"relu"`.
        layer_norm_epsilon: epsilon of the layer norms.
        dropout: dropout after sublayers and on attention probabilities.
        rotary_max_wavelength: RoPE base.
        tie_embeddings: output projection is the transposed token embedding.
        initializer_range: stddev of the truncated-normal initializers.
        reset_positions: positions from `position_ids`; `False` uses `0..L-1`
            (ablation only).
        block_diagonal_mask: keep sequences apart; `False` gives a plain
            causal mask over the whole row (ablation only).
        expected_counts: loss balancing, e.g. `{"lm": 480.0}` targets per pack.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"logits": [B, L, vocabulary_size]}`, float32.
    """

    loss_terms = ("lm",)
    packed_outputs = {"logits": "token"}
    input_features = ("input_ids", "sequence_ids", "position_ids")

    def __init__(self, vocabulary_size, num_layers, hidden_dim, num_heads,
                 intermediate_dim, max_sequence_length=2048,
                 position_embedding="rotary", activation="gelu",
                 layer_norm_epsilon=1e-5, dropout=0.0,
                 rotary_max_wavelength=10000, tie_embeddings=True,
                 initializer_range=0.02, reset_positions=True,
                 block_diagonal_mask=True, expected_counts=None, **kwargs):
        super().__init__(expected_counts=expected_counts, **kwargs)
        if position_embedding not in POSITION_EMBEDDINGS:
            raise TfpackError(
                f"`position_embedding` must be one of {POSITION_EMBEDDINGS}. "
                f"Received: position_embedding={position_embedding!r}")
        if activation not in ACTIVATIONS:
            raise TfpackError(f"`activation` must be one of {ACTIVATIONS}. "
                              f"Received: activation={activation!r}")
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.position_embedding = position_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.dropout = dropout
        self.rotary_max_wavelength = rotary_max_wavelength
        self.tie_embeddings = tie_embeddings
        self.initializer_range = initializer_range
        self.reset_positions = reset_positions
        self.block_diagonal_mask = block_diagonal_mask

        policy = self.dtype_policy
        initializer = keras.initializers.TruncatedNormal(
            stddev=initializer_range)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, hidden_dim, embeddings_initializer=initializer,
            dtype=policy, name="token_embedding")
        self.learned_positions = (
            PackedPositionEmbedding(max_sequence_length, hidden_dim,
                                    initializer=initializer, dtype=policy,
                                    name="position_embedding")
            if position_embedding == "learned" else None)
        self.attention_mask = PackedAttentionMask(
            causal=True, mask_type="additive",
            block_diagonal=block_diagonal_mask, dtype=policy,
            name="attention_mask")
        self.embeddings_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.transformer_layers = [
            PackedTransformerBlock(
                num_heads, hidden_dim, intermediate_dim, activation=activation,
                dropout=dropout, attention_dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon, norm_first=True,
                rotary=position_embedding == "rotary",
                rotary_max_wavelength=rotary_max_wavelength,
                kernel_initializer=initializer, dtype=policy,
                name=f"transformer_layer_{i}")
            for i in range(num_layers)
        ]
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="final_norm")
        self.output_dense = (
            None if tie_embeddings else keras.layers.Dense(
                vocabulary_size, kernel_initializer=initializer,
                dtype=policy, name="output_projection"))

    def call(self, inputs, training=None):
        input_ids = ops.cast(inputs["input_ids"], "int32")
        if self.reset_positions:
            position_ids = ops.cast(inputs["position_ids"], "int32")
        else:
            length = ops.shape(input_ids)[1]
            position_ids = ops.zeros_like(input_ids) + ops.arange(
                length, dtype="int32")
        x = self.token_embedding(input_ids)
        if self.learned_positions is not None:
            x = x + self.learned_positions(position_ids)
        x = self.embeddings_dropout(x, training=training)
        mask = self.attention_mask(inputs["sequence_ids"])
        for layer in self.transformer_layers:
            x = layer(x, mask, position_ids, training=training)
        x = self.final_norm(x)
        if self.output_dense is None:
            logits = ops.matmul(
                x, ops.cast(ops.transpose(self.token_embedding.embeddings),
                            x.dtype))
        else:
            logits = self.output_dense(x)
        return {"logits": ops.cast(logits, "float32")}

    def loss_statistics(self, x, y_pred):
        return causal_lm_statistics(y_pred["logits"], x["labels"], term="lm")

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "position_embedding": self.position_embedding,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "dropout": self.dropout,
            "rotary_max_wavelength": self.rotary_max_wavelength,
            "tie_embeddings": self.tie_embeddings,
            "initializer_range": self.initializer_range,
            "reset_positions": self.reset_positions,
            "block_diagonal_mask": self.block_diagonal_mask,
        })
        return config
