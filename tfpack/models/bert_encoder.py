"""BERT encoder backbone for packed (and unpacked) inputs."""

import keras

from tfpack.layers.position_embedding import PackedPositionEmbedding
from tfpack.models.trunk import TRUNK_PARAMETERS, TransformerBackbone
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class BertEncoder(TransformerBackbone):
    """BERT's embeddings and transformer encoder, adjusted for packing.

    A backbone (`tfpack.models.backbone`): packed features in,
    `sequence_output` out, no heads and no loss; wrap it in a task
    (`BertPretrainer`, `BertClassifier`) to train it.

    The two model changes of PackedBERT (seed 000, section 3.2): position
    embeddings are looked up by `position_ids`, which restart for every
    packed sequence, and attention is masked block-diagonally from
    `sequence_ids`, computed on the device. On an unpacked batch (one
    sequence per row) the model is vanilla BERT, and
    `from_pretrained` loads Hugging Face BERT checkpoints.

    Example:

    >>> import numpy as np
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> features = {
    ...     "input_ids": np.array([[5, 6, 7, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ... }
    >>> encoder(features)["sequence_output"].shape
    TensorShape([1, 6, 8])

    Args:
        vocabulary_size: token vocabulary size (`vocab_size`).
        num_layers: transformer layers (`num_hidden_layers`).
        hidden_dim: model width (`hidden_size`).
        num_heads: attention heads (`num_attention_heads`).
        intermediate_dim: feed-forward width (`intermediate_size`).
        activation: `"gelu"` (exact, Hugging Face's "gelu"), `"gelu_tanh"`
            (tanh approximation, as keras-hub) or `"relu"`.
        max_sequence_length: rows of the position table
            (`max_position_embeddings`).
        type_vocabulary_size: token types (`type_vocab_size`).
        layer_norm_epsilon: `layer_norm_eps`.
        dropout: `hidden_dropout_prob`.
        attention_dropout: `attention_probs_dropout_prob`.
        initializer_range: stddev of the truncated-normal initializers.
        reset_positions: look positions up by `position_ids`. `False` uses
            `0..L-1` for every row, as vanilla BERT (ablation only).
        block_diagonal_mask: keep sequences apart in attention. `False` masks
            padding only, as vanilla BERT (ablation only).
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"` (JAX):
            how attention skips cross-sequence work (see docs/model.md).
        max_sequences_per_pack: `K` of the packs; needed by `"segmented"`
            and for `"auto"` to consider it.
        segment_length: longest sequence in the packs, if below `L`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict of features: `input_ids`, `sequence_ids`,
            `position_ids` (needed with `reset_positions`), optional
            `token_type_ids`; other keys are ignored.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}`.
    """

    input_features = ("input_ids", "sequence_ids", "position_ids",
                      "token_type_ids")
    optional_features = ("token_type_ids",)

    @validate_params({**{k: v for k, v in TRUNK_PARAMETERS.items()
                         if k not in ("causal", "norm_first", "rotary", "rotary_max_wavelength")},
                      "type_vocabulary_size": TRUNK_PARAMETERS["vocabulary_size"]})
    def __init__(self, vocabulary_size, num_layers, hidden_dim, num_heads,
                 intermediate_dim, activation="gelu", max_sequence_length=512,
                 type_vocabulary_size=2, layer_norm_epsilon=1e-12, dropout=0.1,
                 attention_dropout=0.1, initializer_range=0.02,
                 reset_positions=True, block_diagonal_mask=True,
                 attention_implementation="auto", max_sequences_per_pack=None,
                 segment_length=None, **kwargs):
        super().__init__(
            vocabulary_size, num_layers, hidden_dim, num_heads,
            intermediate_dim, max_sequence_length=max_sequence_length,
            activation=activation, layer_norm_epsilon=layer_norm_epsilon,
            dropout=dropout, attention_dropout=attention_dropout,
            initializer_range=initializer_range,
            reset_positions=reset_positions,
            block_diagonal_mask=block_diagonal_mask,
            attention_implementation=attention_implementation,
            max_sequences_per_pack=max_sequences_per_pack,
            segment_length=segment_length, **kwargs)
        self.type_vocabulary_size = type_vocabulary_size
        self.attention_dropout = attention_dropout
        policy = self.dtype_policy
        self.position_embedding = PackedPositionEmbedding(
            max_sequence_length, hidden_dim, initializer=self._initializer,
            dtype=policy, name="position_embedding")
        self.token_type_embedding = keras.layers.Embedding(
            type_vocabulary_size, hidden_dim,
            embeddings_initializer=self._initializer, dtype=policy,
            name="token_type_embedding")
        self.embeddings_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="embeddings_norm")

    def call(self, inputs, training=None):
        input_ids = keras.ops.cast(inputs["input_ids"], "int32")
        position_ids = self.position_ids(inputs)
        token_type_ids = inputs.get("token_type_ids")
        if token_type_ids is None:
            token_type_ids = keras.ops.zeros_like(input_ids)
        x = (self.token_embedding(input_ids)
             + self.position_embedding(position_ids)
             + self.token_type_embedding(
                 keras.ops.cast(token_type_ids, "int32")))
        x = self.embeddings_dropout(self.embeddings_norm(x), training=training)
        return {"sequence_output": self.run_layers(x, inputs, position_ids,
                                                   training=training)}

    @classmethod
    def from_pretrained(cls, path, **overrides):
        """Builds an encoder from a Hugging Face BERT checkpoint directory.

        Reads `config.json` and `model.safetensors` (numpy API of the
        `safetensors` package; no torch, no download). Keyword arguments
        override the converted config, e.g. `activation="gelu_tanh"`.

        Example (not run: needs a checkpoint directory):

        >>> encoder = BertEncoder.from_pretrained(path)  # doctest: +SKIP
        """
        from tfpack.models import hf_bert

        config = hf_bert.encoder_config(path)
        config.update(overrides)
        encoder = cls(**config)
        hf_bert.load_encoder_weights(encoder, path)
        return encoder

    def get_config(self):
        config = super().get_config()
        config.update({
            "type_vocabulary_size": self.type_vocabulary_size,
            "attention_dropout": self.attention_dropout,
        })
        return config
