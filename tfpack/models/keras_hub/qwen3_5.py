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
from tfpack.layers.recurrence import segments_of
from tfpack.layers.rotary_embedding import rotate_partial
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend_segmented
from tfpack.models.keras_hub.base import isolated
from tfpack.models.keras_hub.base import register

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
    from keras_hub.src.utils.keras_utils import fused_attention_op_available

    size = attention.sliding_window_size
    if not size or fused_attention_op_available():
        return None
    return (size - 1, 0)


def gated_attention(attention, x, position_ids, mask, training,
                    segmented=None):
    """keras-hub's `Qwen3_5Attention.call` (no cache) at per-token positions."""
    head_dim = attention.head_dim
    batch, length = ops.shape(x)[0], x.shape[1]

    def rotate(t):
        return rotate_partial(t, attention.rotary_dim, lambda part: (
            attention.rotary_embedding_layer(part, positions=position_ids)))

    projected = attention._query_dense(x)
    gate = ops.reshape(projected[..., head_dim:], (batch, length, -1))
    query = rotate(attention._query_norm(projected[..., :head_dim]))
    key = rotate(attention._key_norm(attention._key_dense(x)))
    value = attention._value_dense(x)
    if segmented is not None:
        x = attend_segmented(query, key, value, segmented,
                             scale=attention._inv_norm_factor)
    else:
        groups = attention.num_key_value_groups
        x = attention._compute_attention(
            query, ops.repeat(key, groups, axis=2),
            ops.repeat(value, groups, axis=2), mask)
    x = attention._dropout_layer(x, training=training)
    x = ops.reshape(x, (batch, length, -1)) * ops.sigmoid(gate)
    x = ops.reshape(x, (batch, length, attention.num_query_heads, head_dim))
    return attention._output_dense(x)


def feedforward(layer, x, real, training):
    """The layer's gated SiLU feed-forward, or Qwen3.5-MoE's experts."""
    mlp = getattr(layer, "mlp", None)
    if mlp is not None:
        return mlp(x, attention_mask=real, training=training)[0]
    gate = ops.cast(layer._feedforward_gate_dense(x), "float32")
    gate = ops.cast(layer.activation(gate), layer.compute_dtype)
    x = layer._feedforward_intermediate_dense(x)
    return layer._feedforward_output_dense(ops.multiply(x, gate))


def decoder_block(layer, x, context, mask, segmented, training):
    """keras-hub's `Qwen3_5TransformerDecoder.call` (and the MoE one's).

    `context` is `(segments, position_ids, real)`."""
    segments, position_ids, real = context
    residual = x
    x = layer._input_layernorm(x)
    if layer.layer_type == "linear_attention":
        x = gated_delta_net(layer._linear_attn, x, segments)
    else:
        x = gated_attention(layer._self_attention_layer, x, position_ids,
                            mask, training, segmented)
    x = layer._self_attention_dropout(x, training=training) + residual
    residual = x
    x = feedforward(layer, layer._post_attention_layernorm(x), real, training)
    return ops.cast(x, residual.dtype) + residual


@register
class KerasHubQwen3_5(KerasHubCausalBackbone):
    """A keras-hub Qwen3.5 or Qwen3.5-MoE (text) backbone on packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring. `logits(sequence_output)` is the backbone's own output
    projection (tied or not).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.Qwen3_5Backbone(
    ...     vocabulary_size=30, num_layers=2, num_query_heads=2,
    ...     num_key_value_heads=1, head_dim=8, hidden_dim=8,
    ...     intermediate_dim=16, linear_num_key_heads=1,
    ...     linear_num_value_heads=2, linear_key_head_dim=4,
    ...     linear_value_head_dim=4,
    ...     layer_types=["linear_attention", "full_attention"])
    >>> decoder = KerasHubQwen3_5(backbone)
    >>> decoder({"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...          "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ...         )["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `Qwen3_5Backbone` or `Qwen3_5MoeBackbone`
            without a vision encoder.
        **kwargs: passed on to `KerasHubBackbone`
            (`attention_implementation` applies to the full-attention
            layers).

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active (and the router's loss added).

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}` (after the final
        norm, as the keras-hub backbone's output).
    """

    backbone_names = ("Qwen3_5Backbone", "Qwen3_5MoeBackbone")

    def __init__(self, backbone, **kwargs):
        if (self.accepts(backbone)
                and getattr(backbone, "vision_encoder", None) is not None):
            raise TfpackError(
                "Only text Qwen3.5 backbones can be packed: a vision "
                "encoder's image tokens would need their images in the "
                f"pack. Received: a {type(backbone).__name__} with a vision "
                "encoder")
        super().__init__(backbone, **kwargs)

    def call(self, inputs, training=None):
        input_ids, sequence_ids, position_ids = self._features(inputs)
        x = self.backbone.token_embedding(input_ids)
        segmented = self.implementation(x.shape[1]) == "segmented"
        # Dense: the causal packed mask, which also bounds what a recurrent
        # layer mixes (earlier tokens of the same sequence) for `isolated`.
        mask = None if segmented else self.attention_mask(sequence_ids)
        context = (segments_of(sequence_ids), position_ids, sequence_ids > 0)
        for layer in self.backbone.transformer_layers:
            options = None
            if segmented and layer.layer_type == "full_attention":
                options = self.segmented_options(
                    sequence_ids, sliding_window(layer._self_attention_layer))
            x, show = isolated(x, mask)
            x = show(decoder_block(layer, x, context, mask, options, training))
        return {"sequence_output": self.backbone.layer_norm(x)}
