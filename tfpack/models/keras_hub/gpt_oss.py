"""keras-hub GPT-OSS decoders, packed: attention sinks, sliding windows, experts.

GPT-OSS alternates global layers with sliding-window layers (query `i`
sees keys `i - W <= j <= i`), adds a learned "sink" logit per head to every
softmax, and routes each token to its top-k experts (no load-balancing loss
in keras-hub). Packing changes the same two things as for Llama (seed
002): rotary angles from `position_ids`, and a causal block-diagonal mask.
The attention layer applies its own window on row offsets, which inside one
sequence are position offsets, and its own sinks; routing is per token.

With `attention_implementation="segmented"` each sequence attends in its
own row with the layer's sink logits in every softmax denominator and its
window as the band `(W, 0)` of row offsets.
"""

from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.decoders import attend
from tfpack.models.keras_hub.decoders import part
from tfpack.models.keras_hub.decoders import project


def sliding_window(attention):
    """The `(before, after)` band of a GPT-OSS layer's window, or None:
    query `i` sees keys `i - W <= j <= i`."""
    window = attention.sliding_window
    return (window, 0) if window is not None and window > 0 else None


def self_attention(attention, x, context):
    """keras-hub's `GptOssAttention.call` with per-token positions: dense
    (its own `_compute_attention`, window and sinks) under the packed
    mask, or segmented with the layer's sinks."""
    query, key, value = project(attention, x, context.position_ids)
    x = attend(attention, query, key, value, context, sinks=attention.sinks)
    x = part(attention, "dropout_layer")(x, training=context.training)
    return part(attention, "output_dense")(x)


def decoder_block(layer, x, context):
    """keras-hub's `GptOssTransformerDecoder.call` with per-token positions."""
    h = self_attention(layer.self_attention_layer, layer.input_layernorm(x),
                       context)
    x = h + x
    h, _ = layer.sparse_moe_block(layer.post_attention_layernorm(x))
    return h + x


@register
class KerasHubGptOss(KerasHubCausalBackbone):
    """A keras-hub GPT-OSS backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.GptOssBackbone(
    ...     vocabulary_size=30, num_layers=2, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16,
    ...     num_experts=2, sliding_window=2)
    >>> KerasHubGptOss(backbone)(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `GptOssBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` keeps the sinks and
            the windows inside each sequence), `max_sequences_per_pack` and
            `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("GptOssBackbone",)
    family = "gpt_oss"

    def window(self, layer):
        return sliding_window(layer.self_attention_layer)

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
