"""keras-hub SmolLM3 decoders, packed: rotary layers and layers without RoPE.

SmolLM3 is Llama-like, but some layers use no positional encoding at all
(NoPE, `rope_layer_enabled_list`): there positions enter only through the
causal mask. Packing changes (seed 002): the rotary layers' angles come from
`position_ids` (restarting for every sequence), and every layer's mask is
causal *and* block-diagonal, so NoPE layers too see their own sequence only.
SmolLM3 computes its cos/sin tables itself (`SmolLM3RotaryEmbedding`, from
its `inv_freq` weight); `rotate` does the same at per-token positions.
"""

from keras import ops

from tfpack.layers.rotary_embedding import rotary_angles
from tfpack.layers.rotary_embedding import rotate as turn
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.decoders import attend


def rotate(attention, x, position_ids):
    """SmolLM3's rotary embedding of `x` (`[B, L, heads, head_dim]`) at
    per-token positions (its `SmolLM3RotaryEmbedding` and
    `apply_rotary_pos_emb`)."""
    rope = attention.rotary_embedding
    angles = rotary_angles(position_ids, ops.cast(rope.inv_freq, "float32"))
    cos = ops.cast(ops.cos(angles) * rope.attention_scaling, x.dtype)
    sin = ops.cast(ops.sin(angles) * rope.attention_scaling, x.dtype)
    return turn(x, cos, sin)


def self_attention(attention, x, context):
    """keras-hub's `SmolLM3Attention.call` with per-token positions."""
    heads = (attention.num_attention_heads, attention.head_dim)
    kv_heads = (attention.num_key_value_heads, attention.head_dim)
    shape = tuple(ops.shape(x)[:-1])
    query = ops.reshape(attention.q_proj(x), shape + heads)
    key = ops.reshape(attention.k_proj(x), shape + kv_heads)
    value = ops.reshape(attention.v_proj(x), shape + kv_heads)
    if attention.use_rope:
        query = rotate(attention, query, context.position_ids)
        key = rotate(attention, key, context.position_ids)
    return attention.o_proj(attend(attention, query, key, value, context))


def decoder_block(layer, x, context):
    """keras-hub's `SmolLM3DecoderLayer.call`."""
    x = x + self_attention(layer.self_attn, layer.input_layernorm(x), context)
    return x + layer.mlp(layer.post_attention_layernorm(x))


@register
class KerasHubSmolLM3(KerasHubCausalBackbone):
    """A keras-hub SmolLM3 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.SmolLM3Backbone(
    ...     vocabulary_size=30, hidden_dim=8, intermediate_dim=16,
    ...     num_layers=2, num_attention_heads=2, num_key_value_heads=1,
    ...     attention_bias=False, attention_dropout=0.0,
    ...     rope_layer_enabled_list=[True, False],
    ...     layer_types=["attention"] * 2, mlp_bias=False,
    ...     layer_norm_epsilon=1e-6, max_position_embeddings=32,
    ...     rope_theta=10000.0, partial_rotary_factor=1.0)
    >>> KerasHubSmolLM3(backbone)(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `SmolLM3Backbone`.
        **kwargs: passed on to `KerasHubBackbone`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("SmolLM3Backbone",)
    family = "smollm3"

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.norm(x)
