"""keras-hub Gemma (1 and 2) and Gemma 3 (text) decoders, packed.

Gemma scales token embeddings by sqrt(hidden_dim), may soft-cap attention
logits and alternate local (sliding-window) and global layers; Gemma 3 adds
query/key norms and a rotary base per layer. Packing changes the same two
things as for Llama (seed 002): rotary angles from `position_ids`, and a
causal block-diagonal mask in place of what keras-hub's
`_compute_attention_mask` builds from the padding mask. Each layer's
attention still applies its own sliding window (a band of row offsets,
which inside one sequence are position offsets) and soft cap. Gemma 3
embedding models (`use_bidirectional_attention`) get the block-diagonal
mask without the causal part.

With `attention_implementation="segmented"` the layer's own projections,
norms and rotary embeddings feed tfpack's `packed_attention`: each sequence
in its own row, with the layer's query scale, logit soft cap and sliding
window (a band of row offsets) exactly as keras-hub applies them.
"""

import keras
import numpy as np
from keras import ops

from tfpack.errors import TfpackError
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private


def query_scale(attention):
    """keras-hub's Gemma query normalization of `attention`."""
    if attention.query_head_dim_normalize:
        return 1 / np.sqrt(attention.head_dim)
    return 1 / np.sqrt(attention.hidden_dim // attention.num_query_heads)


def sliding_window(attention, causal):
    """The `(before, after)` band of a Gemma layer's sliding window, or
    None: `i - W < j <= i` causal; Gemma 3 embedding models see
    `W - W // 2 - 1` keys before and `W // 2` after."""
    if not attention.use_sliding_window_attention:
        return None
    size = attention.sliding_window_size
    return (size - 1, 0) if causal else (size - size // 2 - 1, size // 2)


def attend(attention, query, key, value, context):
    """keras-hub's attention of one Gemma layer on rotated q, k, v.

    The one place the Gemma adapters call attention: query scaling, soft
    cap and sliding window are the layer's. Rows that attend to nothing
    (padding) give zeros, as in keras-hub. Segmented (`context.options`,
    the layer's window included), tfpack's segmented attention runs.
    """
    def dense(mask):
        x = private(attention, "_compute_attention")(
            query, key, value, mask, training=context.training)
        nothing = ops.logical_not(ops.any(mask, axis=-1))[..., None, None]
        return ops.where(nothing, ops.zeros_like(x), x)

    return dispatch(  # query head h reads kv head h // groups
        context, lambda: (query, key, value), dense,
        scale=query_scale(attention), dropout_layer=attention.dropout_layer,
        logit_soft_cap=attention.logit_soft_cap)


def rotate(attention, x, position_ids):
    """Gemma's rotary embedding of `x` at per-token positions."""
    if type(attention).__name__ == "CachedGemmaAttention":
        # Gemma 1/2 interleave the rotated halves after rotating.
        return private(attention, "_apply_rope")(x, 0, positions=position_ids)
    return attention.rope_layer(x, positions=position_ids)


def self_attention(attention, x, context):
    """keras-hub's Gemma / Gemma 3 attention with per-token positions."""
    query = attention.query_dense(x)
    key = attention.key_dense(x)
    if getattr(attention, "use_query_key_norm", False):  # Gemma 3
        query = attention.query_norm(query)
        key = attention.key_norm(key)
    query = rotate(attention, query, context.position_ids)
    key = rotate(attention, key, context.position_ids)
    value = attention.value_dense(x)
    x = attend(attention, query, key, value, context)
    return attention.output_dense(x)


def _add(a, b):
    """`a + b`, clipped to the float16 range in float16 as Gemma 3 does."""
    if keras.backend.standardize_dtype(a.dtype) != "float16":
        return a + b
    total = ops.cast(a, "float32") + ops.cast(b, "float32")
    return ops.cast(ops.clip(total, -65504, 65504), "float16")


def decoder_block(layer, x, context):
    """keras-hub's `GemmaDecoderBlock.call` (and Gemma 3's, text only)."""
    if keras.backend.standardize_dtype(x.dtype) == "float16":
        x = ops.clip(x, -65504, 65504)
    attention = self_attention(layer.attention, layer.pre_attention_norm(x),
                               context)
    if layer.use_post_attention_norm:
        attention = layer.post_attention_norm(attention)
    if layer.dropout:
        attention = layer.attention_dropout(attention,
                                            training=context.training)
    attention_x = _add(x, attention)
    normalized = layer.pre_ffw_norm(attention_x)
    gated = keras.activations.gelu(layer.gating_ffw(normalized),
                                   approximate=True)
    x = layer.ffw_linear(gated * layer.gating_ffw_2(normalized))
    if layer.use_post_ffw_norm:
        x = layer.post_ffw_norm(x)
    return _add(x, attention_x)


@register
class KerasHubGemma(KerasHubCausalBackbone):
    """A keras-hub Gemma or Gemma 3 (text) backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.
    `logits(sequence_output)` is the backbone's tied output projection,
    with Gemma's final logit soft cap when configured.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.GemmaBackbone(
    ...     vocabulary_size=30, num_layers=1, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16,
    ...     head_dim=4)
    >>> decoder = KerasHubGemma(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `GemmaBackbone`, or a `Gemma3Backbone` without
            a vision encoder.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` keeps the soft caps,
            query scaling and local layers' sliding windows inside each
            sequence), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("GemmaBackbone", "Gemma3Backbone")
    family = "gemma"

    def __init__(self, backbone, **kwargs):
        if (self.accepts(backbone)
                and getattr(backbone, "vision_encoder", None) is not None):
            raise TfpackError(
                "Only text Gemma 3 backbones can be packed. Received: a "
                "Gemma3Backbone with a vision encoder")
        super().__init__(backbone, **kwargs)

    @classmethod
    def is_causal(cls, backbone):
        # Gemma 3 embedding models (EmbeddingGemma) attend both ways.
        return not getattr(backbone, "use_bidirectional_attention", False)

    def embed(self, context):
        x = self.backbone.token_embedding(context.input_ids)
        return x * ops.cast(ops.sqrt(self.backbone.hidden_dim), x.dtype)

    def window(self, layer):
        return sliding_window(layer.attention, self.causal)

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
