"""keras-hub Gemma 4 decoders (text), packed.

Gemma 4 interleaves local (sliding-window) and global layers with their own
head dims, rotary wavelengths and partial rotation, normalizes queries,
keys and values, may soft-cap attention logits and the final logits, may
feed every layer a per-layer token embedding, lets its last layers reuse
the keys and values of an earlier layer of the same kind ("shared KV"), and
may add a mixture of experts beside the feed-forward. Every one of these is
per token, except attention. Packing changes (seed 002): the attention
layers get `position_ids` (Gemma 4's attention takes per-token positions),
and each layer's mask is the block-diagonal packed mask, causal unless the
model attends both ways, banded by keras-hub's own sliding-window rule on
local layers (row offsets, which inside one sequence are position offsets).
Shared-KV layers reuse the packed keys and values, so they stay inside each
sequence too. Dense attention is keras-hub's layer, called as is.

With `attention_implementation="segmented"` the layer's own projections,
norms and (partial) rotary embedding feed tfpack's segmented attention:
each sequence in its own row, with Gemma 4's unit query scale, its logit
soft cap and the local layers' window `(W - 1, 0)` (causal models; two-way
models leave the mask unbanded, as keras-hub does). Backbones with a vision
or audio encoder are refused: only the text path packs.
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private


def _add(a, b):
    """`a + b`, clipped to the float16 range in float16 as Gemma 4 does."""
    if keras.backend.standardize_dtype(a.dtype) != "float16":
        return a + b
    total = ops.cast(a, "float32") + ops.cast(b, "float32")
    return ops.cast(ops.clip(total, -65504, 65504), "float16")


def feedforward(layer, x):
    """The block's gated GELU feed-forward, and its experts if enabled."""
    normalized = layer.pre_ffw_norm(x)
    gated = keras.activations.gelu(
        ops.matmul(normalized, layer.gating_ffw.kernel), approximate=True)
    h = ops.matmul(gated * ops.matmul(normalized, layer.gating_ffw_2.kernel),
                   layer.ffw_linear.kernel)
    if layer.enable_moe_block:
        h = layer.post_ffw_norm_dense(h)
        moe_in = layer.pre_ffw_norm_moe(x)
        shape = ops.shape(moe_in)
        moe = layer.moe_expert_bank(ops.reshape(moe_in, (-1, shape[-1])),
                                    layer.moe_router(x))
        h = h + layer.post_ffw_norm_moe_path(ops.reshape(moe, shape))
    return layer.post_ffw_norm(h)


def self_attention(attention, x, shared_kv, context):
    """keras-hub's `Gemma4TextAttention.call` (no cache): its own layer
    under the packed mask, or its projections, norms and rotation in
    segmented rows; returns the output and the layer's stacked keys and
    values."""
    kv = []
    rope = private(attention, "_apply_rope")
    positions = context.position_ids

    def project():
        query = rope(attention.query_norm(attention.query_dense(x)), 0,
                     positions=positions)
        if attention.is_kv_shared_layer and shared_kv is not None:
            key, value = shared_kv[:, 0, ...], shared_kv[:, 1, ...]
        else:
            raw = attention.key_dense(x)
            key = rope(attention.key_norm(raw), 0, positions=positions)
            value = attention.value_norm(raw if attention.attention_k_eq_v
                                         else attention.value_dense(x))
        kv.append(ops.stack((key, value), axis=1))
        return query, key, value

    def dense(mask):
        output, stacked = attention(x, attention_mask=mask,
                                    shared_kv=shared_kv, positions=positions)
        kv.append(stacked)
        return output

    output = dispatch(
        context, project, dense, scale=1.0,
        dropout_layer=attention.dropout_layer if attention.dropout else None,
        logit_soft_cap=attention.logit_soft_cap)
    if context.options is not None:
        output = attention.output_dense(output)
    return output, kv[0]


def decoder_block(layer, x, context):
    """keras-hub's `Gemma4TextDecoderBlock.call` under `context` (dense:
    the layer's packed mask; segmented: its options); keeps this layer's
    keys and values in `context.extras["shared"]`."""
    shared = context.extras["shared"]
    shared_kv = (shared.get(layer.kv_shared_layer_index)
                 if layer.is_kv_shared_layer else None)
    if keras.backend.standardize_dtype(x.dtype) == "float16":
        x = ops.clip(x, -65504, 65504)
    attention, shared[context.index] = self_attention(
        layer.attention, layer.pre_attention_norm(x), shared_kv, context)
    attention = layer.post_attention_norm(attention)
    if layer.dropout:
        attention = layer.attention_dropout(attention,
                                            training=context.training)
    x = _add(x, attention)
    h = feedforward(layer, x)
    if layer.dropout:
        h = layer.feedforward_dropout(h, training=context.training)
    x = _add(x, h)
    per_layer_input = context.extras["per_layer_inputs"][context.index]
    if layer.hidden_size_per_layer_input > 0 and per_layer_input is not None:
        gated = keras.activations.gelu(layer.per_layer_input_gate(x),
                                       approximate=True)
        gated = layer.per_layer_up_proj(
            gated * ops.cast(per_layer_input, gated.dtype))
        x = x + layer.post_per_layer_input_norm(gated)
    if layer.is_text_layer:
        x = x * ops.cast(layer.layer_scalar, x.dtype)
    return x


def is_banded(layer):
    """Whether keras-hub bands the layer's mask by its sliding window."""
    return (layer.use_sliding_window_attention
            and not layer.is_global_attention
            and not layer.use_bidirectional_attention)


def layer_mask(layer, mask):
    """The packed `mask` with the layer's sliding window, as keras-hub's
    `_compute_attention_mask` bands its causal mask (its two-way mask it
    leaves unbanded)."""
    if is_banded(layer):
        return private(layer.attention, "_mask_sliding_window")(mask)
    return mask


@register
class KerasHubGemma4(KerasHubCausalBackbone):
    """A keras-hub Gemma 4 backbone (text) that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring. `logits(sequence_output)` is the tied output
    projection with the final logit soft cap when configured.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.Gemma4Backbone(
    ...     vocabulary_size=30, image_size=16, num_layers=2,
    ...     num_query_heads=2, num_key_value_heads=1, hidden_dim=8,
    ...     intermediate_dim=16, head_dim=4, sliding_window_size=2,
    ...     sliding_window_pattern=2)
    >>> KerasHubGemma4(backbone)(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `Gemma4Backbone` without vision or audio
            encoder.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` keeps the soft cap and
            the local layers' windows inside each sequence),
            `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("Gemma4Backbone",)
    family = "gemma4"

    def __init__(self, backbone, **kwargs):
        if self.accepts(backbone) and (
                getattr(backbone, "vision_encoder", None) is not None
                or getattr(backbone, "audio_encoder", None) is not None):
            raise TfpackError(
                "Only text Gemma 4 backbones can be packed. Received: a "
                "Gemma4Backbone with a vision or audio encoder")
        super().__init__(backbone, **kwargs)

    @classmethod
    def is_causal(cls, backbone):
        return not backbone.transformer_layers[0].use_bidirectional_attention

    def _per_layer_inputs(self, input_ids, x):
        """Each layer's per-layer input `[B, L, width]` (or Nones), as
        keras-hub's backbone computes them from the tokens and `x`."""
        backbone = self.backbone
        width = backbone.hidden_size_per_layer_input
        layers = len(backbone.transformer_layers)
        if width <= 0:
            return [None] * layers
        embedded = ops.cast(backbone.per_layer_token_embedding(input_ids),
                            x.dtype)
        embedded = embedded * ops.cast(float(width) ** 0.5, x.dtype)
        projected = backbone.per_layer_model_projection(x) * ops.cast(
            float(backbone.hidden_dim) ** -0.5, x.dtype)
        return [(backbone.per_layer_projection_norm(
                    projected[:, :, i * width:(i + 1) * width])
                 + embedded[:, :, i * width:(i + 1) * width])
                * ops.cast(2.0 ** -0.5, x.dtype) for i in range(layers)]

    def embed(self, context):
        x = self.backbone.token_embedding(context.input_ids)
        return x * ops.cast(ops.sqrt(self.backbone.hidden_dim), x.dtype)

    def extras(self, context, x):
        return {"per_layer_inputs": self._per_layer_inputs(context.input_ids,
                                                           x),
                "shared": {}}

    def window(self, layer):
        banded = (layer.sliding_window_size - 1, 0)
        return banded if is_banded(layer) else None

    def dense_mask(self, layer, mask):
        return layer_mask(layer, mask)

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
