"""keras-hub Llama-style decoders (Llama, Mistral, Qwen2), packed.

The three share one block: RMS-normed grouped-query attention with rotary
positions and a gated SiLU feed-forward. Packing changes (seed 002): the
rotary angles come from `position_ids`, which restart for every sequence,
and the attention mask is causal *and* block-diagonal. Sliding windows stay:
Mistral's is added to the mask here, Qwen2's is applied by its attention
layer; both compare row offsets, which inside one sequence equal position
offsets.

With `attention_implementation="segmented"` the layers' own projections
and rotary embeddings feed tfpack's `packed_attention` instead: each
sequence in its own row, causal, with the layer's window as a band of row
offsets and keras-hub's `1 / sqrt(head_dim)` query scale.
"""

import keras
from keras import ops

from tfpack.layers.packed_attention import packed_attention
from tfpack.models.keras_hub.base import KerasHubBackbone


def attend(attention, query, key, value, mask, segmented=None):
    """keras-hub's attention of one decoder layer on rotated q, k, v.

    The one place the decoder adapters call attention. `query` is
    `[B, L, heads, head_dim]`, `key`/`value` `[B, L, kv_heads, head_dim]`;
    `mask` the boolean `[B, L, L]` packed mask (True = may attend), or None
    with `segmented`, the `packed_attention` options of
    `KerasHubBackbone.segmented_options` (the layer's window included).
    """
    groups = getattr(attention, "num_key_value_groups", None) or getattr(
        attention, "_num_key_value_groups")
    key = ops.repeat(key, repeats=groups, axis=2)
    value = ops.repeat(value, repeats=groups, axis=2)
    if segmented is None:
        return attention._compute_attention(query, key, value, mask)
    query = query * ops.cast(attention._inv_norm_factor, query.dtype)
    return packed_attention(query, key, value, implementation="segmented",
                            **segmented)


def self_attention(attention, x, position_ids, mask, training,
                   segmented=None):
    """keras-hub's Llama/Mistral/Qwen attention with per-token positions."""
    rope = attention.rotary_embedding_layer
    query = rope(attention._query_dense(x), positions=position_ids)
    key = rope(attention._key_dense(x), positions=position_ids)
    value = attention._value_dense(x)
    x = attend(attention, query, key, value, mask, segmented)
    x = attention._dropout_layer(x, training=training)
    return attention._output_dense(x)


def sliding_window(layer):
    """The `(before, after)` band of a layer's sliding window, or None:
    Mistral's decoder layer and Qwen2's attention both let query `i` see
    keys `i - W < j <= i`."""
    window = getattr(layer, "sliding_window", None)  # Mistral
    attention = layer._self_attention_layer
    if getattr(attention, "use_sliding_window_attention", False):  # Qwen2
        window = attention.sliding_window_size
    return None if window is None else (window - 1, 0)


def decoder_block(layer, x, position_ids, mask, training, segmented=None):
    """keras-hub's `LlamaTransformerDecoder.call` (and Mistral's, Qwen's)."""
    residual = x
    x = layer._self_attention_layernorm(x)
    x = self_attention(layer._self_attention_layer, x, position_ids, mask,
                       training, segmented)
    x = layer._self_attention_dropout(x, training=training)
    x = x + residual
    residual = x
    x = layer._feedforward_layernorm(x)
    gate = ops.cast(layer._feedforward_gate_dense(x), "float32")
    gate = ops.cast(layer.activation(gate), layer.compute_dtype)
    x = layer._feedforward_intermediate_dense(x)
    x = layer._feedforward_output_dense(ops.multiply(x, gate))
    return x + residual


def sliding_window_mask(mask, window):
    """`mask` and Mistral's window: query i sees keys j with i - j < window."""
    length = ops.shape(mask)[-1]
    index = ops.arange(length, dtype="int32")
    near = ops.expand_dims(index, 1) < ops.expand_dims(index, 0) + window
    return ops.logical_and(mask, ops.expand_dims(near, 0))


@keras.saving.register_keras_serializable(package="tfpack")
class KerasHubDecoder(KerasHubBackbone):
    """A keras-hub Llama, Mistral or Qwen2 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.
    `logits(sequence_output)` is the backbone's own output projection
    (`token_embedding(x, reverse=True)`: tied or not, as configured).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.LlamaBackbone(
    ...     vocabulary_size=30, num_layers=1, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)
    >>> decoder = KerasHubDecoder(backbone)
    >>> decoder({"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...          "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ...         )["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `LlamaBackbone`, `MistralBackbone` or
            `Qwen2Backbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` keeps causality and
            Mistral's / Qwen2's sliding windows inside each sequence),
            `max_sequences_per_pack` and `segment_length`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}` (after the final
        norm, as the keras-hub backbone's output).
    """

    backbone_names = ("LlamaBackbone", "MistralBackbone", "Qwen2Backbone")

    @classmethod
    def is_causal(cls, backbone):
        return True

    def call(self, inputs, training=None):
        input_ids, sequence_ids, position_ids = self._features(inputs)
        x = self.backbone.token_embedding(input_ids)
        segmented = self.implementation(x.shape[1]) == "segmented"
        mask = None if segmented else self.attention_mask(sequence_ids)
        for layer in self.backbone.transformer_layers:
            options, layer_mask = None, mask
            if segmented:
                options = self.segmented_options(sequence_ids,
                                                 sliding_window(layer))
            elif getattr(layer, "sliding_window", None) is not None:
                # Mistral's; Qwen2's attention layer applies its own.
                layer_mask = sliding_window_mask(mask, layer.sliding_window)
            x = decoder_block(layer, x, position_ids, layer_mask, training,
                              options)
        return {"sequence_output": self.backbone.layer_norm(x)}

    def logits(self, sequence_output):
        """Next-token logits `[B, L, vocabulary_size]`, float32."""
        return ops.cast(self.backbone.token_embedding(sequence_output,
                                                      reverse=True), "float32")
