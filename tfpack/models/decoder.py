"""A pre-norm decoder backbone for packed sequences."""

import keras

from tfpack.layers.position_embedding import PackedPositionEmbedding
from tfpack.models.trunk import TRUNK_PARAMETERS, TransformerBackbone
from tfpack.params import Options, validate_params

POSITION_EMBEDDINGS = ("rotary", "learned")


@keras.saving.register_keras_serializable(package="tfpack")
class DecoderBackbone(TransformerBackbone):
    """Pre-norm decoder whose packed sequences cannot see each other.

    A backbone (`tfpack.models.backbone`); `CausalLM` adds the language-model
    head and loss. The packing adjustments of seed 002: positions (rotary or
    learned) reset at the start of every sequence via `position_ids`, and the
    attention mask is causal *and* block-diagonal, so token `i` of a sequence
    sees tokens `0..i` of that sequence only.

    Example:

    >>> import numpy as np
    >>> backbone = DecoderBackbone(vocabulary_size=40, num_layers=1,
    ...                            hidden_dim=8, num_heads=2,
    ...                            intermediate_dim=16)
    >>> features = {
    ...     "input_ids": np.array([[5, 6, 7, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ... }
    >>> backbone(features)["sequence_output"].shape
    TensorShape([1, 6, 8])

    Args:
        vocabulary_size: vocabulary size.
        num_layers: decoder layers.
        hidden_dim: model width.
        num_heads: attention heads.
        intermediate_dim: feed-forward width.
        max_sequence_length: rows of the learned position table (used with
            `position_embedding="learned"`), and the longest pack.
        position_embedding: `"rotary"` or `"learned"`.
        activation: `"gelu"`, `"gelu_tanh"` or `"relu"`.
        layer_norm_epsilon: epsilon of the layer norms.
        dropout: dropout after sublayers and on attention probabilities.
        rotary_max_wavelength: RoPE base.
        initializer_range: stddev of the truncated-normal initializers.
        reset_positions: positions from `position_ids`; `False` uses `0..L-1`
            (ablation only).
        block_diagonal_mask: keep sequences apart; `False` gives a plain
            causal mask over the whole row (ablation only).
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"` (JAX):
            how attention skips cross-sequence work (see docs/model.md).
        max_sequences_per_pack: `K` of the packs; needed by `"segmented"`
            and for `"auto"` to consider it.
        segment_length: longest sequence in the packs, if below `L`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [B, L, hidden_dim]}`, after the final layer norm.
    """

    @validate_params({**{k: v for k, v in TRUNK_PARAMETERS.items()
                         if k not in ("attention_dropout", "causal", "norm_first", "rotary")},
                      "position_embedding": Options(*POSITION_EMBEDDINGS)})
    def __init__(self, vocabulary_size, num_layers, hidden_dim, num_heads,
                 intermediate_dim, max_sequence_length=2048,
                 position_embedding="rotary", activation="gelu",
                 layer_norm_epsilon=1e-5, dropout=0.0,
                 rotary_max_wavelength=10000, initializer_range=0.02,
                 reset_positions=True, block_diagonal_mask=True,
                 attention_implementation="auto", max_sequences_per_pack=None,
                 segment_length=None, **kwargs):
        super().__init__(
            vocabulary_size, num_layers, hidden_dim, num_heads,
            intermediate_dim, max_sequence_length=max_sequence_length,
            activation=activation, layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout, attention_dropout=dropout,
            initializer_range=initializer_range,
            reset_positions=reset_positions,
            block_diagonal_mask=block_diagonal_mask, causal=True,
            norm_first=True, rotary=position_embedding == "rotary",
            rotary_max_wavelength=rotary_max_wavelength,
            attention_implementation=attention_implementation,
            max_sequences_per_pack=max_sequences_per_pack,
            segment_length=segment_length, **kwargs)
        self.position_embedding = position_embedding
        self.rotary_max_wavelength = rotary_max_wavelength
        policy = self.dtype_policy
        self.learned_positions = (
            PackedPositionEmbedding(max_sequence_length, hidden_dim,
                                    initializer=self._initializer,
                                    dtype=policy, name="position_embedding")
            if position_embedding == "learned" else None)
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="final_norm")

    def call(self, inputs, training=None):
        input_ids = keras.ops.cast(inputs["input_ids"], "int32")
        position_ids = self.position_ids(inputs)
        x = self.token_embedding(input_ids)
        if self.learned_positions is not None:
            x = x + self.learned_positions(position_ids)
        x = self.embeddings_dropout(x, training=training)
        x = self.run_layers(x, inputs, position_ids, training=training)
        return {"sequence_output": self.final_norm(x)}

    def get_config(self):
        config = super().get_config()
        config.update({
            "position_embedding": self.position_embedding,
            "rotary_max_wavelength": self.rotary_max_wavelength,
        })
        return config
