"""keras-hub Phi-3 decoders, packed, with their "su" (LongRoPE) scaling.

Phi-3's block is Llama's under other names. Its `"su"` rotary scaling
divides the rotary frequencies by a long factor when the sequence is longer
than `pretraining_sequence_length` and by a short one otherwise, and scales
cos and sin by `embedding_scaling_factor`. keras-hub picks the factor from
the length of the whole input; run on one sequence alone, that is the
sequence's length. Packed, the adapter picks it for every token from the
length of *its* sequence (`sequence_ids`), so each sequence gets the angles
it gets alone, whatever it is packed with.
"""

from keras import ops

from tfpack.layers.rotary_embedding import rotary_angles
from tfpack.layers.rotary_embedding import rotate as turn
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.decoders import attend
from tfpack.models.keras_hub.internals import private


def sequence_lengths(sequence_ids):
    """`[B, L]`: the length of the sequence each token belongs to."""
    same = ops.equal(ops.expand_dims(sequence_ids, 2),
                     ops.expand_dims(sequence_ids, 1))
    return ops.sum(ops.cast(same, "int32"), axis=-1)


def su_rotate(rope, x, position_ids, lengths):
    """keras-hub's `Phi3SuScaledRotaryEmbedding` of `x` (`[B, L, heads,
    head_dim]`) per token: positions `position_ids`, long or short factor
    from each token's sequence length `lengths`."""
    inverse_freq = private(rope, "_get_inverse_freq")(x.shape[-1])
    long = ops.expand_dims(lengths > rope.pretraining_sequence_length, -1)
    factor = ops.where(
        long, ops.convert_to_tensor(rope.inverese_freq_long_factor, "float32"),
        ops.convert_to_tensor(rope.inverese_freq_short_factor, "float32"))
    # Per token: the factor `[B, L, F]` divides the shared frequencies.
    embedding = rotary_angles(position_ids, inverse_freq / factor)
    cos = ops.cast(ops.cos(embedding) * rope.embedding_scaling_factor,
                   rope.compute_dtype)
    sin = ops.cast(ops.sin(embedding) * rope.embedding_scaling_factor,
                   rope.compute_dtype)
    return turn(x, cos, sin)


def rotate(attention, x, position_ids, lengths):
    rope = attention.rotary_embedding_layer
    if attention.rope_scaling_type == "su":
        return su_rotate(rope, x, position_ids, lengths)
    return rope(x, positions=position_ids)


def decoder_block(layer, x, context):
    """keras-hub's `Phi3Decoder.call` with per-token positions (and
    lengths, `context.extras["lengths"]`)."""
    attention, training = layer.attention, context.training
    positions, lengths = context.position_ids, context.extras["lengths"]
    residual = x
    h = layer.pre_attention_layernorm(x)
    query = rotate(attention, attention.query_dense(h), positions, lengths)
    key = rotate(attention, attention.key_dense(h), positions, lengths)
    h = attend(attention, query, key, attention.value_dense(h), context)
    h = attention.output_dense(attention.dropout_layer(h, training=training))
    x = layer.attention_dropout(h, training=training) + residual
    residual = x
    h = layer.post_attention_layernorm(x)
    gate = ops.cast(layer.feedforward_gate_dense(h), "float32")
    gate = ops.cast(layer.activation(gate), layer.compute_dtype)
    h = layer.feedforward_intermediate_dense(h)
    h = layer.feedforward_output_dense(ops.multiply(h, gate))
    return layer.feedforward_dropout(h, training=training) + residual


@register
class KerasHubPhi3(KerasHubCausalBackbone):
    """A keras-hub Phi-3 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring (the `"su"` scaling is chosen per sequence).

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.Phi3Backbone(
    ...     vocabulary_size=30, num_layers=1, hidden_dim=8,
    ...     intermediate_dim=16, num_query_heads=2, num_key_value_heads=1)
    >>> KerasHubPhi3(backbone)(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `Phi3Backbone`.
        **kwargs: passed on to `KerasHubBackbone`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("Phi3Backbone",)
    family = "phi3"

    def extras(self, context, x):
        return {"lengths": sequence_lengths(context.sequence_ids)}

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
