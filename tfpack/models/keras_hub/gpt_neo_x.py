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
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import function
from tfpack.models.keras_hub.internals import private


def dense_attention(attention, query, key, value, mask, training):
    """keras-hub's `GPTNeoXAttention._compute_attention` with its scores
    laid out query-first.

    The same steps (scores scaled after the product, its masked softmax,
    its dropout layer), but keras-hub's key-first `aecd,abcd->acbe`
    compiles under XLA on CPU to a slower batched matmul (see
    `tfpack.models.keras_hub.encoders.dense_attention`). Where keras-hub
    takes its fused kernel instead (JAX, torch, no dropout), it runs that.
    """
    available = function("keras_hub.src.utils.keras_utils",
                         "fused_attention_op_available")
    if available() and attention.dropout == 0:
        return private(attention, "_compute_attention")(
            query, key, value, mask, training=training)
    scores = ops.einsum("bquh,bkuh->buqk", query, key)
    scores = ops.multiply(scores, ops.cast(
        private(attention, "_inv_norm_factor"), attention.compute_dtype))
    probabilities = private(attention, "_masked_softmax")(scores, mask)
    probabilities = private(attention, "_attn_dropout_layer")(
        probabilities, training=training)
    return ops.einsum("buqk,bkuh->bquh", probabilities, value)


def self_attention(attention, x, context):
    """keras-hub's `GPTNeoXAttention.call` with per-token positions."""
    qkv = private(attention, "_qkv_dense")(x)
    size = attention.attn_head_size
    query, key = qkv[..., :size], qkv[..., size:2 * size]
    value = qkv[..., 2 * size:]

    def turn(x):
        return attention.rotary_embedding_layer(
            x, positions=context.position_ids)

    query, key = (rotate_partial(x, attention.rotary_dim, turn)
                  for x in (query, key))
    context_ = dispatch(
        context, lambda: (query, key, value),
        lambda mask: dense_attention(attention, query, key, value, mask,
                                     context.training),
        scale=private(attention, "_inv_norm_factor"),
        dropout_layer=private(attention, "_attn_dropout_layer"))
    batch, length = ops.shape(context_)[0], ops.shape(context_)[1]
    context_ = ops.reshape(context_, (batch, length, attention.hidden_dim))
    return private(attention, "_output_dense")(context_)


def decoder_block(layer, x, context):
    """keras-hub's `GPTNeoXDecoder.call`: parallel attention and MLP."""
    attention = self_attention(
        private(layer, "_self_attention_layer"),
        private(layer, "_self_attention_layer_norm")(x), context)
    attention = private(layer, "_self_attention_dropout")(
        attention, training=context.training)
    feedforward = private(layer, "_feedforward_output_dense")(
        private(layer, "_feedforward_intermediate_dense")(
            private(layer, "_feedforward_layer_norm")(x)))
    return feedforward + attention + x


@register
class KerasHubGPTNeoX(KerasHubCausalBackbone):
    """A keras-hub GPT-NeoX backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and
    `KerasHubCausalBackbone` (`logits`: the tied output projection).

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.GPTNeoXBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=16,
    ...     intermediate_dim=16)
    >>> decoder = KerasHubGPTNeoX(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 16])

    Args:
        backbone: a keras-hub `GPTNeoXBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` stays causal inside
            each sequence), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("GPTNeoXBackbone",)
    family = "gpt_neo_x"

    @property
    def max_sequence_length(self):
        """None: rotary positions have no table (keras-hub's
        `max_sequence_length` of GPT-NeoX sizes nothing)."""
        return None

    def embed(self, context):
        x = self.backbone.token_embedding(context.input_ids)
        return self.backbone.embeddings_dropout(x, training=context.training)

    def block(self, layer, x, context):
        return decoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
