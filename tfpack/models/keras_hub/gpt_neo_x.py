"""keras-hub GPT-NeoX decoders, packed.

GPT-NeoX rotates the first `rotary_percentage` of every query and key head
and adds attention and feed-forward in parallel to the residual
(`x + attention(norm_1(x)) + feedforward(norm_2(x))`). Packing changes the
same two things as for Llama (seed 002): the rotary angles come from
`position_ids`, which restart for every sequence, and the mask is causal
and block-diagonal. With `attention_implementation="segmented"` the layer's
projections and rotary embedding feed tfpack's `packed_attention` instead,
with keras-hub's `1 / sqrt(head_dim)` query scale.
"""

from keras import ops

from tfpack.layers.rotary_embedding import rotate_partial
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend_segmented
from tfpack.models.keras_hub.base import isolated
from tfpack.models.keras_hub.base import register


def dense_attention(attention, query, key, value, mask, training):
    """keras-hub's `GPTNeoXAttention._compute_attention` with its scores
    laid out query-first.

    The same steps (scores scaled after the product, its masked softmax,
    its dropout layer), but keras-hub's key-first `aecd,abcd->acbe`
    compiles under XLA on CPU to a slower batched matmul (see
    `tfpack.models.keras_hub.encoders.dense_attention`). Where keras-hub
    takes its fused kernel instead (JAX, torch, no dropout), it runs that.
    """
    from keras_hub.src.utils.keras_utils import fused_attention_op_available

    if fused_attention_op_available() and attention.dropout == 0:
        return attention._compute_attention(query, key, value, mask,
                                            training=training)
    scores = ops.einsum("bquh,bkuh->buqk", query, key)
    scores = ops.multiply(scores, ops.cast(attention._inv_norm_factor,
                                           attention.compute_dtype))
    probabilities = attention._masked_softmax(scores, mask)
    probabilities = attention._attn_dropout_layer(probabilities,
                                                  training=training)
    return ops.einsum("buqk,bkuh->bquh", probabilities, value)


def self_attention(attention, x, position_ids, mask, training,
                   segmented=None):
    """keras-hub's `GPTNeoXAttention.call` with per-token positions."""
    qkv = attention._qkv_dense(x)
    size = attention.attn_head_size
    query, key = qkv[..., :size], qkv[..., size:2 * size]
    value = qkv[..., 2 * size:]

    def turn(x):
        return attention.rotary_embedding_layer(x, positions=position_ids)

    query, key = (rotate_partial(x, attention.rotary_dim, turn)
                  for x in (query, key))
    if segmented is None:
        context = dense_attention(attention, query, key, value, mask, training)
    else:
        context = attend_segmented(
            query, key, value, segmented, scale=attention._inv_norm_factor,
            dropout_layer=attention._attn_dropout_layer, training=training)
    batch, length = ops.shape(context)[0], ops.shape(context)[1]
    context = ops.reshape(context, (batch, length, attention.hidden_dim))
    return attention._output_dense(context)


def decoder_block(layer, x, position_ids, mask, training, segmented=None):
    """keras-hub's `GPTNeoXDecoder.call`: parallel attention and MLP."""
    attention = self_attention(
        layer._self_attention_layer, layer._self_attention_layer_norm(x),
        position_ids, mask, training, segmented)
    attention = layer._self_attention_dropout(attention, training=training)
    feedforward = layer._feedforward_output_dense(
        layer._feedforward_intermediate_dense(layer._feedforward_layer_norm(x)))
    return feedforward + attention + x


@register
class KerasHubGPTNeoX(KerasHubCausalBackbone):
    """A keras-hub GPT-NeoX backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and
    `KerasHubCausalBackbone` (`logits`: the tied output projection).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.GPTNeoXBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=16)
    >>> decoder = KerasHubGPTNeoX(backbone)
    >>> decoder({"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...          "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ...         )["sequence_output"].shape
    TensorShape([1, 5, 16])

    Args:
        backbone: a keras-hub `GPTNeoXBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` stays causal inside
            each sequence), `max_sequences_per_pack` and `segment_length`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}` (after the final
        layer norm, as the keras-hub backbone's output).
    """

    backbone_names = ("GPTNeoXBackbone",)

    @property
    def max_sequence_length(self):
        """None: rotary positions have no table (keras-hub's
        `max_sequence_length` of GPT-NeoX sizes nothing)."""
        return None

    def call(self, inputs, training=None):
        input_ids, sequence_ids, position_ids = self._features(inputs)
        x = self.backbone.token_embedding(input_ids)
        x = self.backbone.embeddings_dropout(x, training=training)
        mask, segmented = self.attention_inputs(sequence_ids, x.shape[1])
        for layer in self.backbone.transformer_layers:
            x, show = isolated(x, mask)
            x = show(decoder_block(layer, x, position_ids, mask, training,
                                   segmented))
        return {"sequence_output": self.backbone.layer_norm(x)}
