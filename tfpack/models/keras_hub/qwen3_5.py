"""keras-hub Qwen3.5 and Qwen3.5-MoE (text), packed: gated DeltaNet beside attention.

Each layer mixes tokens one of two ways (`layer_types`):

- `"linear_attention"` (`Qwen3_5GatedDeltaNet`): a short causal depthwise
  convolution, then the gated delta rule, a state carried along the row.
  Packing resets both at every sequence start, inside them
  (`tfpack.layers.recurrence`): no convolution tap reads the previous
  sequence, and the chunked rule pairs only tokens of one sequence and
  carries its state only to the sequence that continues. Chunks are
  keras-hub's 64 tokens; a row of `L` tokens costs what keras-hub's rule
  costs on `L` tokens, whatever the sequences in it.
- `"full_attention"`: gated grouped-query attention with query/key norms
  and partial rotary positions, which packing changes as for Llama (seed
  002): rotary angles from `position_ids`, a causal block-diagonal mask
  (dense), or each sequence in its own row (segmented). keras-hub applies
  the sliding window where it computes attention itself (not where it calls
  the fused JAX kernel); the adapter does the same.

The feed-forward is a gated SiLU, or (Qwen3.5-MoE) routed experts with a
gated shared expert, per token; the router's load-balancing loss counts
real tokens only (`sequence_ids > 0`), as in the Llama-style decoders.
"""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.recurrence import causal_conv1d
from tfpack.layers.recurrence import chunked_gated_delta_rule
from tfpack.layers.recurrence import isolate_in_sequences
from tfpack.layers.recurrence import segments_of
from tfpack.layers.rotary_embedding import rotate_partial
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.decoders import feedforward
from tfpack.models.keras_hub.internals import function
from tfpack.models.keras_hub.internals import private

# keras-hub's `_chunk_gated_delta_rule` default.
CHUNK_SIZE = 64


def gated_delta_net(net, x, segments):
    """keras-hub's `Qwen3_5GatedDeltaNet.call` (no cache), reset per sequence."""
    batch, length = ops.shape(x)[0], x.shape[1]
    mixed = net.in_proj_qkv(x)
    z = ops.reshape(net.in_proj_z(x),
                    (batch, length, net.num_v_heads, net.head_v_dim))
    b, a = net.in_proj_b(x), net.in_proj_a(x)
    mixed = causal_conv1d(mixed, net.conv1d_weight, segments)
    mixed = mixed * ops.sigmoid(mixed)
    query = ops.reshape(mixed[..., :net.key_dim],
                        (batch, length, net.num_k_heads, net.head_k_dim))
    key = ops.reshape(mixed[..., net.key_dim:net.key_dim * 2],
                      (batch, length, net.num_k_heads, net.head_k_dim))
    value = ops.reshape(mixed[..., net.key_dim * 2:],
                        (batch, length, net.num_v_heads, net.head_v_dim))
    beta = ops.sigmoid(b)
    g = -ops.exp(ops.cast(net.A_log, "float32")) * keras.activations.softplus(
        ops.cast(a, "float32") + ops.cast(net.dt_bias, "float32"))
    repeats = net.num_v_heads // net.num_k_heads
    if repeats > 1:
        query = ops.repeat(query, repeats=repeats, axis=2)
        key = ops.repeat(key, repeats=repeats, axis=2)
    core = chunked_gated_delta_rule(query, key, value, g, beta, segments,
                                    chunk_size=CHUNK_SIZE)
    core = net.norm(ops.reshape(core, (-1, net.head_v_dim)))
    core = core * keras.activations.silu(ops.reshape(z, (-1, net.head_v_dim)))
    return net.out_proj(ops.reshape(core, (batch, length, -1)))


def sliding_window(attention):
    """The `(before, after)` band keras-hub applies, or None: its window
    where it computes attention itself, none under the fused kernel."""
    fused = function("keras_hub.src.utils.keras_utils",
                     "fused_attention_op_available")
    size = attention.sliding_window_size
    return None if not size or fused() else (size - 1, 0)


def gated_attention(attention, x, context):
    """keras-hub's `Qwen3_5Attention.call` (no cache) at per-token positions."""
    head_dim = attention.head_dim
    batch, length = ops.shape(x)[0], x.shape[1]

    def rotate(t):
        return rotate_partial(t, attention.rotary_dim, lambda part: (
            attention.rotary_embedding_layer(
                part, positions=context.position_ids)))

    projected = private(attention, "_query_dense")(x)
    gate = ops.reshape(projected[..., head_dim:], (batch, length, -1))
    query = rotate(private(attention, "_query_norm")(
        projected[..., :head_dim]))
    key = rotate(private(attention, "_key_norm")(
        private(attention, "_key_dense")(x)))
    value = private(attention, "_value_dense")(x)

    def dense(mask):
        groups = attention.num_key_value_groups
        return private(attention, "_compute_attention")(
            query, ops.repeat(key, groups, axis=2),
            ops.repeat(value, groups, axis=2), mask)

    x = attend(context, lambda: (query, key, value), dense,
               scale=private(attention, "_inv_norm_factor"))
    x = private(attention, "_dropout_layer")(x, training=context.training)
    x = ops.reshape(x, (batch, length, -1)) * ops.sigmoid(gate)
    x = ops.reshape(x, (batch, length, attention.num_query_heads, head_dim))
    return private(attention, "_output_dense")(x)


def decoder_block(layer, x, context):
    """keras-hub's `Qwen3_5TransformerDecoder.call` (and the MoE one's)."""
    residual = x
    x = private(layer, "_input_layernorm")(x)
    if layer.layer_type == "linear_attention":
        x = gated_delta_net(private(layer, "_linear_attn"), x,
                            context.extras["segments"])
    else:
        x = gated_attention(private(layer, "_self_attention_layer"), x,
                            context)
    x = private(layer, "_self_attention_dropout")(
        x, training=context.training) + residual
    residual = x
    # The gated SiLU feed-forward, or Qwen3.5-MoE's experts (their
    # load-balancing loss over real tokens), as in the Llama-style decoders.
    x = feedforward(layer, private(layer, "_post_attention_layernorm")(x),
                    context.sequence_ids > 0, context.training)
    return ops.cast(x, residual.dtype) + residual


@register
class KerasHubQwen3_5(KerasHubCausalBackbone):
    """A keras-hub Qwen3.5 or Qwen3.5-MoE (text) backbone on packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring. `logits(sequence_output)` is the backbone's own output
    projection (tied or not).

    Example:

    >>> import keras_hub
    >>> backbone = keras_hub.models.Qwen3_5Backbone(
    ...     vocabulary_size=30, num_layers=2, num_query_heads=2,
    ...     num_key_value_heads=1, head_dim=8, hidden_dim=8,
    ...     intermediate_dim=16, linear_num_key_heads=1,
    ...     linear_num_value_heads=2, linear_key_head_dim=4,
    ...     linear_value_head_dim=4,
    ...     layer_types=["linear_attention", "full_attention"])
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> decoder = KerasHubQwen3_5(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `Qwen3_5Backbone` or `Qwen3_5MoeBackbone`
            without a vision encoder.
        **kwargs: passed on to `KerasHubBackbone`
            (`attention_implementation` applies to the full-attention
            layers).

    Call arguments and returns: those of `KerasHubBackbone` (`training`
    also adds the experts' load-balancing loss).
    """

    flash_kernel = False  # its flash path is not checked

    backbone_names = ("Qwen3_5Backbone", "Qwen3_5MoeBackbone")
    family = "qwen3_5"

    def __init__(self, backbone, **kwargs):
        if (self.accepts(backbone)
                and getattr(backbone, "vision_encoder", None) is not None):
            raise TfpackError(
                "Only text Qwen3.5 backbones can be packed: a vision "
                "encoder's image tokens would need their images in the "
                f"pack. Received: a {type(backbone).__name__} with a vision "
                "encoder")
        super().__init__(backbone, **kwargs)

    def extras(self, context, x):
        return {"segments": segments_of(context.sequence_ids)}

    def window(self, layer):
        if layer.layer_type != "full_attention":
            return None
        return sliding_window(private(layer, "_self_attention_layer"))

    def block(self, layer, x, context):
        # Dense: `forward` isolates each block under the causal packed mask,
        # which also bounds what a gated DeltaNet layer mixes. Segmented
        # attention isolates inside its rows, but the gated DeltaNet runs on
        # the whole row: there it is isolated per sequence.
        if context.mask is not None or layer.layer_type != "linear_attention":
            return decoder_block(layer, x, context)
        clean, show = isolate_in_sequences(x, context.extras["segments"])
        return show(decoder_block(layer, clean, context))

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
