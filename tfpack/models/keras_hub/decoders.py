"""keras-hub Llama-style decoders, packed: Llama (and Llama 3), Mistral, Qwen2,
Qwen3, and the mixture-of-experts Mixtral, Qwen MoE and Qwen3 MoE.

They share one block: RMS-normed grouped-query attention with rotary
positions (Qwen3's with RMS-normed queries and keys), then a gated SiLU
feed-forward or a mixture of experts. Packing changes (seed 002): the
rotary angles come from `position_ids`, which restart for every sequence,
and the attention mask is causal *and* block-diagonal. Sliding windows
stay: Mistral's and Mixtral's are added to the mask here, Qwen2's and
Qwen3's are applied by their attention layers; all compare row offsets,
which inside one sequence equal position offsets.

Mixture of experts routes every token on its own, so packed outputs equal
unpacked ones. The router's load-balancing loss (added with `add_loss` when
training, scaled by the backbone's coefficient) is a statistic of the
batch's tokens: the adapter gives keras-hub's loss function the real
tokens (`sequence_ids > 0`) as its mask, so padding never counts. (keras-hub
0.32's own Mixtral decoder calls its MoE block without `training` and never
adds the loss; the adapter does, as the block's `router_aux_loss_coef`
intends.)

With `attention_implementation="segmented"` the layers' own projections
and rotary embeddings feed tfpack's `packed_attention` instead: each
sequence in its own row, causal, with the layer's window as a band of row
offsets and keras-hub's `1 / sqrt(head_dim)` query scale.
"""

import inspect

from keras import ops

from tfpack.layers.rotary_embedding import rotate_partial
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import function
from tfpack.models.keras_hub.internals import private


def part(layer, name):
    """`layer._name`, or `layer.name`: keras-hub families spell their
    sublayers both ways (`_query_dense` in Llama, `query_dense` in
    Mixtral)."""
    found = private(layer, "_" + name, None)
    return found if found is not None else getattr(layer, name)


def attend(attention, query, key, value, context, **extras):
    """keras-hub's attention of one decoder layer on rotated q, k, v.

    The one place the decoder adapters call attention. `query` is
    `[B, L, heads, head_dim]`, `key`/`value` `[B, L, kv_heads, head_dim]`;
    `context` the layer's `base.Context` (dense: its boolean `[B, L, L]`
    packed mask; segmented: its options, the layer's window included).
    """
    def dense(mask):
        groups = getattr(attention, "num_key_value_groups", None) or private(
            attention, "_num_key_value_groups")
        repeated = (ops.repeat(t, repeats=groups, axis=2)
                    for t in (key, value))
        return private(attention, "_compute_attention")(query, *repeated,
                                                        mask)

    return dispatch(context, lambda: (query, key, value), dense,
                    scale=private(attention, "_inv_norm_factor"), **extras)


def rotate(attention, x, position_ids):
    """The layer's rotary embedding of `x` at per-token positions, on the
    first `_rotary_dim` features where only those rotate (GPT-OSS)."""
    return rotate_partial(
        x, private(attention, "_rotary_dim", None),
        lambda t: attention.rotary_embedding_layer(t, positions=position_ids))


def project(attention, x, position_ids):
    """Rotated query and key and the value of keras-hub's attention layer
    (with Qwen3's query and key norms before the rotation)."""
    query = part(attention, "query_dense")(x)
    key = part(attention, "key_dense")(x)
    norm = private(attention, "_query_dense_layer_norm", None)
    if norm is not None:  # Qwen3
        query = norm(query)
        key = private(attention, "_key_dense_layer_norm")(key)
    return (rotate(attention, query, position_ids),
            rotate(attention, key, position_ids),
            part(attention, "value_dense")(x))


def self_attention(attention, x, context):
    """keras-hub's decoder attention with per-token positions."""
    query, key, value = project(attention, x, context.position_ids)
    x = attend(attention, query, key, value, context)
    x = part(attention, "dropout_layer")(x, training=context.training)
    return part(attention, "output_dense")(x)


def sliding_window(layer):
    """The `(before, after)` band of a layer's sliding window, or None:
    Mistral's and Mixtral's decoder layers and Qwen2's / Qwen3's attention
    all let query `i` see keys `i - W < j <= i`."""
    window = getattr(layer, "sliding_window", None)  # Mistral, Mixtral
    attention = private(layer, "_self_attention_layer")
    if getattr(attention, "use_sliding_window_attention", True):
        # Qwen2 and Qwen MoE behind a flag, Qwen3 whenever set.
        window = getattr(attention, "sliding_window_size", None) or window
    return None if window is None else (window - 1, 0)


def feedforward(layer, x, real, training):
    """The layer's gated SiLU feed-forward or mixture of experts.

    `real` (`[B, L]` boolean, `sequence_ids > 0`) masks the router's
    load-balancing loss, added by keras-hub's MoE block when training.
    """
    moe = private(layer, "_sparse_moe_block", None)
    if moe is not None:  # Mixtral
        x, _ = moe(x, attention_mask=real, training=training)
        return x
    mlp = getattr(layer, "mlp", None)  # Qwen MoE, Qwen3 MoE
    if mlp is not None:
        if "attention_mask" in inspect.signature(mlp.call).parameters:
            # A sparse block: it reduces its `[B, L, L]` mask with `any`.
            x = mlp(x, training=training, attention_mask=real[..., None])
        else:
            x = mlp(x)
        return x[0] if isinstance(x, tuple) else x
    gate = ops.cast(private(layer, "_feedforward_gate_dense")(x), "float32")
    gate = ops.cast(layer.activation(gate), layer.compute_dtype)
    x = private(layer, "_feedforward_intermediate_dense")(x)
    return private(layer, "_feedforward_output_dense")(ops.multiply(x, gate))


def decoder_block(layer, x, context):
    """keras-hub's `LlamaTransformerDecoder.call` (and the others')."""
    residual = x
    x = private(layer, "_self_attention_layernorm")(x)
    x = self_attention(private(layer, "_self_attention_layer"), x, context)
    x = private(layer, "_self_attention_dropout")(x, training=context.training)
    x = x + residual
    residual = x
    x = feedforward(layer, private(layer, "_feedforward_layernorm")(x),
                    context.sequence_ids > 0, context.training)
    return ops.cast(x, residual.dtype) + residual


def sliding_window_mask(mask, window):
    """`mask` and Mistral's window: query i sees keys j with i - j < window."""
    length = ops.shape(mask)[-1]
    index = ops.arange(length, dtype="int32")
    near = ops.expand_dims(index, 1) < ops.expand_dims(index, 0) + window
    return ops.logical_and(mask, ops.expand_dims(near, 0))


@register
class KerasHubDecoder(KerasHubCausalBackbone):
    """A keras-hub Llama-style decoder that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.
    `logits(sequence_output)` is the backbone's own output projection
    (`token_embedding(x, reverse=True)`: tied or not, as configured).

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.LlamaBackbone(
    ...     vocabulary_size=30, num_layers=1, num_query_heads=2,
    ...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)
    >>> decoder = KerasHubDecoder(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `LlamaBackbone` (or `Llama3Backbone`),
            `MistralBackbone`, `Qwen2Backbone`, `Qwen3Backbone`,
            `MixtralBackbone`, `QwenMoeBackbone` or `Qwen3MoeBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` keeps causality and
            Mistral's / Qwen2's sliding windows inside each sequence),
            `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("LlamaBackbone", "MistralBackbone", "Qwen2Backbone",
                      "Qwen3Backbone", "MixtralBackbone", "QwenMoeBackbone",
                      "Qwen3MoeBackbone")
    family = "decoders"

    def window(self, layer):
        return sliding_window(layer)

    def dense_mask(self, layer, mask):
        # Mistral's window, and Qwen's, which keras-hub's attention applies
        # again where it computes attention itself (the same band), and drops
        # where it calls the fused kernel (JAX): the dense path keeps it, as
        # segmented and flash do.
        band = sliding_window(layer)
        return mask if band is None else sliding_window_mask(mask, band[0] + 1)

    @property
    def keras_hub_known_wrong(self):
        """Why keras-hub's own backbone is not the exactness check's
        reference here, or None: where keras-hub calls the fused attention
        kernel (JAX), its Qwen attention drops the sliding window; the
        reference is then the adapter's own computation on packs of one."""
        fused = function("keras_hub.src.utils.keras_utils",
                         "fused_attention_op_available")
        if not any(getattr(layer, "sliding_window", None) is None
                   and sliding_window(layer) is not None
                   for layer in self.layers()) or not fused():
            return None
        return "keras-hub's fused attention drops Qwen's sliding window"

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
