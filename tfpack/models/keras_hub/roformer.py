"""keras-hub RoFormer-V2 encoders, packed.

RoFormer-V2 adds token and segment embeddings only; every layer rotates
queries and keys by their positions (bert4keras' interleaved rotary
embedding) and normalizes with a scale-only RMS norm after each residual.
Packing changes two things (seed 000): the rotary angles come from
`position_ids`, which restart for every sequence (keras-hub takes row
offsets), and attention gets the block-diagonal mask of `sequence_ids`
(keras-hub masks by `token_ids != 0`). With
`attention_implementation="segmented"` the layer's projections and
rotations feed tfpack's `packed_attention`, with the `1 / sqrt(head_size)`
query scale of `ops.dot_product_attention`.
"""

import keras
import numpy as np
from keras import ops

from tfpack.layers.rotary_embedding import rotate as turn
from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register


def rotate(rotary, tensors, position_ids):
    """keras-hub's `RoformrPositionalEmbedding.call` of `[B, L, h, d]`
    `tensors` at per-token `position_ids` instead of `arange(L)`."""
    positions = ops.cast(position_ids, tensors[0].dtype)
    angles = rotary.sinusoidal_embeddings(positions, rotary.output_dim,
                                          rotary.max_wavelength)
    angles = ops.cast(angles, rotary.compute_dtype)[:, :, None, :]
    cos = ops.repeat(angles[..., 1::2], 2, -1)
    sin = ops.repeat(angles[..., ::2], 2, -1)
    return [turn(x, cos, sin, interleaved=True) for x in tensors]


def dense_attention(query, key, value, mask):
    """`ops.dot_product_attention(query, key, value, mask=mask[:, None])`
    (scale `1 / sqrt(head_size)`, the boolean `[B, L, L]` packed `mask`).

    On TensorFlow the same steps written out (query-first scores, scaled,
    masked with `where`, softmax in float32): keras's TensorFlow
    `dot_product_attention` made the whole step 1.6x slower at L=4,096
    (1.0-1.2x at 2,048) under XLA on CPU (issue 23;
    `benchmarks/keras_hub_dense.py`).
    Other backends keep keras's (fused kernels where they have them).
    """
    if keras.backend.backend() != "tensorflow":
        return ops.dot_product_attention(
            query, key, value, mask=ops.expand_dims(mask, 1),
            flash_attention=keras.config.is_flash_attention_enabled())
    scores = ops.cast(ops.einsum("bquh,bkuh->buqk", query, key), "float32")
    scores = scores * (1.0 / np.sqrt(query.shape[-1]))
    scores = ops.where(ops.expand_dims(mask, 1), scores, -1e9)
    probabilities = ops.cast(ops.softmax(scores, axis=-1), value.dtype)
    return ops.einsum("buqk,bkuh->bquh", probabilities, value)


def self_attention(attention, x, context, rotary=None):
    """keras-hub's `RoformerAttention.call` (and ESM's) under `context`
    (the boolean `[B, L, L]` packed mask, or segmented rows): `rotary(query,
    key)` turns the `[B, L, heads, head_size]` queries and keys by their
    positions, if given."""
    batch, length = ops.shape(x)[0], ops.shape(x)[1]
    shape = (batch, length, attention.heads, attention.head_size)
    query, key, value = (ops.reshape(dense(x), shape) for dense in (
        attention.q_dense, attention.k_dense, attention.v_dense))
    if rotary is not None:
        query, key = rotary(query, key)
    output = dispatch(
        context, lambda: (query, key, value),
        lambda mask: dense_attention(query, key, value, mask),
        scale=1 / np.sqrt(attention.head_size))
    return attention.o_dense(ops.reshape(output, (batch, length, -1)))


def encoder_block(layer, x, context):
    """keras-hub's `RoformerV2Encoder.call` (post-norm)."""
    attention = layer.attention_layer

    def rotary(query, key):
        return rotate(attention.rotary_embedding_layer, (query, key),
                      context.position_ids)

    attention = self_attention(attention, x, context, rotary)
    x = layer.attention_norm(
        x + layer.dropout_layer(attention, training=context.training))
    feedforward = layer.feedforward_output_dense(
        layer.feedforward_intermediate_dense(x))
    return layer.feedforward_norm(
        x + layer.dropout_layer(feedforward, training=context.training))


@register
class KerasHubRoformerV2(KerasHubBackbone):
    """A keras-hub RoFormer-V2 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.RoformerV2Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, head_size=4)
    >>> encoder = KerasHubRoformerV2(backbone)
    >>> encoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `RoformerV2Backbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation`, `max_sequences_per_pack` and
            `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone` (with optional `token_type_ids`, default 0).
    """

    backbone_names = ("RoformerV2Backbone",)
    family = "roformer"
    initializer_range = 0.02  # Head hint: keras-hub's RoFormer init.

    def __init__(self, backbone, **kwargs):
        super().__init__(backbone, **kwargs)
        self.input_features = self.input_features + ("token_type_ids",)

    @property
    def max_sequence_length(self):
        """None: rotary positions have no table."""
        return None

    def embed(self, context):
        b = self.backbone
        token_type_ids = self._token_type_ids(context.inputs,
                                              context.input_ids)
        x = b.embeddings_add((b.token_embedding(context.input_ids),
                              b.segment_embedding(token_type_ids)))
        return b.embeddings_dropout(b.embeddings_layer_norm(x),
                                    training=context.training)

    def block(self, layer, x, context):
        return encoder_block(layer, x, context)
