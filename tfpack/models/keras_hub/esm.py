"""keras-hub ESM protein language models (ESM-2 rotary, ESM-1 absolute), packed.

ESM encoders are pre-norm transformers whose attention is RoFormer-V2's
with another rotary embedding (rotated halves, not interleaved pairs), or,
for ESM-1, learned absolute positions counted from `pad_token_id`. Packing
changes two things (seed 000): the rotary angles or the learned positions
come from `position_ids`, which restart for every sequence (keras-hub takes
row offsets), and attention gets the block-diagonal mask of `sequence_ids`
(keras-hub masks by `token_ids != pad_token_id`). With
`attention_implementation="segmented"` the layer's projections and
rotations feed tfpack's `packed_attention`.
"""

from keras import ops

from tfpack.layers.rotary_embedding import rotary_angles
from tfpack.layers.rotary_embedding import rotate as turn
from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.roformer import self_attention


def rotate(rotary, tensors, position_ids):
    """keras-hub's `ESMRotaryEmbedding.call` of `[B, L, h, d]` `tensors` at
    per-token `position_ids` instead of `arange(L)`."""
    x = tensors[0]
    dim = x.shape[-1]
    inverse = rotary.scaling_factor / (rotary.max_wavelength ** (
        ops.arange(0, dim, 2, dtype=x.dtype) / dim))
    angles = rotary_angles(position_ids, inverse)
    cos, sin = ops.cos(angles), ops.sin(angles)
    return [turn(t, cos, sin) for t in tensors]


def encoder_block(layer, x, context):
    """keras-hub's `ESMEncoder.call` (pre-norm; dropout before each norm)."""
    attention, training = layer.attention_layer, context.training
    rotary = None
    if attention.use_rotary:
        def rotary(query, key):
            return rotate(attention.rotary_embedding_layer, (query, key),
                          context.position_ids)
    normed = layer.attention_norm(layer.dropout_layer(x, training=training))
    residual = x + self_attention(attention, normed, context, rotary)
    x = layer.feedforward_norm(layer.dropout_layer(residual,
                                                   training=training))
    x = layer.feedforward_output_dense(layer.feedforward_intermediate_dense(x))
    return residual + layer.dropout_layer(x, training=training)


@register
class KerasHubESM(KerasHubBackbone):
    """A keras-hub ESM backbone (`ESMBackbone`, also `ESM2Backbone`) that
    reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.ESMBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> encoder = KerasHubESM(backbone)
    >>> encoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `ESMBackbone`, rotary (ESM-2) or absolute
            (ESM-1).
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation`, `max_sequences_per_pack` and
            `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("ESMBackbone",)
    family = "esm"

    @property
    def max_sequence_length(self):
        """Rows of ESM-1's position table (positions start at
        `pad_token_id`), or None for rotary ESM-2."""
        b = self.backbone
        if b.position_embedding_type != "absolute":
            return None
        return b.max_sequence_length - b.pad_token_id

    def embed(self, context):
        b = self.backbone
        x = b.token_embedding(context.input_ids)
        if b.position_embedding_type == "absolute":
            positions = b.position_embedding(
                x, positions=context.position_ids + b.pad_token_id)
            x = b.embeddings_add([x, positions])
        if b.use_pre_layer_norm:
            x = b.emb_layer_norm(x)
        return x

    def block(self, layer, x, context):
        return encoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.output_layer_norm(x)
