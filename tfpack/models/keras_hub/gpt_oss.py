"""keras-hub GPT-OSS decoders, packed: attention sinks, sliding windows, experts.

GPT-OSS alternates global layers with sliding-window layers (query `i`
sees keys `i - W <= j <= i`), adds a learned "sink" logit per head to every
softmax, and routes each token to its top-k experts (no load-balancing loss
in keras-hub). Packing changes the same two things as for Llama (seed
002): rotary angles from `position_ids`, and a causal block-diagonal mask.
The attention layer applies its own window on row offsets, which inside one
sequence are position offsets, and its own sinks; routing is per token.

The sinks are not part of tfpack's segmented attention, so this family
runs dense attention only (`"auto"` is dense; `"segmented"` is refused).
"""

import keras
from keras import ops

from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.decoders import self_attention


def decoder_block(layer, x, position_ids, mask, training):
    """keras-hub's `GptOssTransformerDecoder.call` with per-token positions."""
    h = self_attention(layer.self_attention_layer, layer.input_layernorm(x),
                       position_ids, mask, training)
    x = h + x
    h, _ = layer.sparse_moe_block(layer.post_attention_layernorm(x))
    return h + x


@keras.saving.register_keras_serializable(package="tfpack")
class KerasHubGptOss(KerasHubBackbone):
    """A keras-hub GPT-OSS backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring (dense attention only: attention sinks).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.GptOssBackbone(
    ...     vocabulary_size=30, num_layers=2, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16,
    ...     num_experts=2, sliding_window=2)
    >>> KerasHubGptOss(backbone)(
    ...     {"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...      "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...      "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ... )["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `GptOssBackbone`.
        **kwargs: passed on to `KerasHubBackbone` (`attention_implementation`
            `"auto"` or `"dense"`).

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}`.
    """

    backbone_names = ("GptOssBackbone",)
    dense_only = "its attention sinks are not in tfpack's segmented attention"

    @classmethod
    def is_causal(cls, backbone):
        return True

    def call(self, inputs, training=None):
        input_ids, sequence_ids, position_ids = self._features(inputs)
        x = self.backbone.token_embedding(input_ids)
        mask = self.attention_mask(sequence_ids)
        for layer in self.backbone.transformer_layers:
            x = decoder_block(layer, x, position_ids, mask, training)
        return {"sequence_output": self.backbone.layer_norm(x)}

    def logits(self, sequence_output):
        """Next-token logits `[B, L, vocabulary_size]`, float32."""
        return ops.cast(self.backbone.token_embedding(sequence_output,
                                                      reverse=True), "float32")
