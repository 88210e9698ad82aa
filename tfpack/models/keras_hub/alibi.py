"""keras-hub ALiBi decoders (BLOOM, Falcon), packed.

Both add no position embedding; each head adds `slope * position(key)` to
its attention logits (ALiBi, Press et al. 2022, in the key-position form
keras-hub uses: BLOOM's `AlibiBias` counts `j - (n - 1)`, Falcon counts
the `j`-th unpadded token). Packing changes two things (seed 002): the bias
comes from `position_ids`, which restart for every sequence, and the mask is
causal and block-diagonal.

Positions from the pack's row offsets would differ from the per-sequence
ones by a constant along each query's row, which the softmax ignores; they
are still wrong: the logits then grow with the offset of the sequence in the
pack, and in float32 a logit of a few thousand keeps only about three
decimals. Per-sequence positions give each sequence the logits it has alone.

With `attention_implementation="segmented"` every sequence attends in its
own row (`tfpack.layers.segmented_attention.attend_in_rows`), with the same
ALiBi bias computed per row from the positions gathered with it: BLOOM adds
`slope * position(key)` to the scaled scores, Falcon adds it before the
`1 / sqrt(head_dim)` scale.
"""

import keras
from keras import ops

from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private


def alibi_bias(slopes, position_ids, dtype):
    """`slopes[h] * position_ids[b, j]` as `[batch, heads, 1, length]`.

    >>> import numpy as np
    >>> bias = alibi_bias([0.5, 0.25], np.array([[0, 1, 0]]), "float32")
    >>> np.asarray(bias)[0, :, 0].tolist()
    [[0.0, 0.5, 0.0], [0.0, 0.25, 0.0]]
    """
    slopes = ops.convert_to_tensor(slopes, dtype=dtype)
    positions = ops.cast(position_ids, dtype)
    return slopes[None, :, None, None] * positions[:, None, None, :]


def alibi_attention(context, project, dense, slopes, *, scale, bias_scale,
                    dropout_layer):
    """One layer's attention under ALiBi (`base.attend`): `dense(mask)`
    under the packed mask, or segmented rows of the `[B, L, heads, d]`
    `project()` with the logits `scale * q . k + bias_scale * slopes[h] *
    position(key)`, from the positions of each row's own tokens."""
    slopes = ops.convert_to_tensor(slopes, "float32") * bias_scale

    def bias(rows):
        positions = ops.cast(rows["positions"], "float32")
        return slopes[None, :, None, None] * positions[:, None, None, :]

    output = dispatch(context, project, dense, scale=scale,
                      dropout_layer=dropout_layer, bias=bias,
                      row_features={"positions": context.position_ids})
    if context.options is None:
        return output
    batch, length = ops.shape(output)[0], ops.shape(output)[1]
    return ops.reshape(output, (batch, length, -1))


def bloom_attention(attention, x, bias, mask, training):
    """keras-hub's `BloomAttention.call` under `bias` and `mask` (`[B, L, L]`
    boolean) in place of its `AlibiBias` and padding mask."""
    dropout = private(attention, "_dropout_layer")
    query = ops.transpose(private(attention, "_query_dense")(x), [0, 2, 1, 3])
    key = ops.transpose(private(attention, "_key_dense")(x), [0, 2, 3, 1])
    value = ops.transpose(private(attention, "_value_dense")(x), [0, 2, 1, 3])
    scores = ops.matmul(query, key) * attention.inv_norm_factor + bias
    scores = private(attention, "_softmax")(scores, ops.expand_dims(mask, 1))
    scores = dropout(scores, training=training)
    context = ops.transpose(ops.matmul(scores, value), [0, 2, 1, 3])
    batch, length = ops.shape(context)[0], ops.shape(context)[1]
    context = ops.reshape(
        context, (batch, length, attention.num_heads * attention.head_dim))
    context = private(attention, "_output_dense")(context)
    return dropout(context, training=training)


def bloom_block(layer, x, context):
    """keras-hub's `BloomDecoder.call` with per-sequence ALiBi positions
    (dense under the packed mask, or segmented)."""
    attention = private(layer, "_self_attention_layer")
    slopes = private(private(attention, "_alibi_layer"), "_get_slopes")(
        attention.num_heads)
    dropout = private(attention, "_dropout_layer")
    training = context.training
    h = private(layer, "_pre_attention_layernorm")(x)

    def dense(mask):
        bias = alibi_bias(slopes, context.position_ids,
                          attention.compute_dtype)
        return bloom_attention(attention, h, bias, mask, training)

    def project():
        return tuple(private(attention, name)(h) for name in (
            "_query_dense", "_key_dense", "_value_dense"))

    h = alibi_attention(context, project, dense, slopes,
                        scale=attention.inv_norm_factor, bias_scale=1.0,
                        dropout_layer=dropout)
    if context.options is not None:
        h = dropout(private(attention, "_output_dense")(h), training=training)
    x = x + h
    residual = x
    x = private(layer, "_mlp_intermediate_dense")(
        private(layer, "_post_attention_layernorm")(x))
    x = private(layer, "_mlp_output_dense")(
        keras.activations.gelu(x, approximate=True))
    return private(layer, "_dropout_layer")(x, training=training) + residual


def falcon_block(layer, x, context):
    """keras-hub's `FalconTransformerDecoder.call` with per-sequence ALiBi
    positions (its attention layer takes the bias as an argument)."""
    slopes = private(layer, "_get_slopes")(layer.num_attention_heads)
    h = layer.input_layernorm(x)
    a = layer.attention_layer

    def dense(mask):
        bias = alibi_bias(slopes, context.position_ids, layer.compute_dtype)
        return a(inputs=h, alibi=bias, attention_mask=mask,
                 training=context.training)

    attention = alibi_attention(
        context, lambda: (a.query_dense(h), a.key_dense(h), a.value_dense(h)),
        dense, slopes, scale=a.inv_norm_factor, bias_scale=a.inv_norm_factor,
        dropout_layer=a.attention_dropout)
    if context.options is not None:
        attention = a.output_dense(attention)
    x = layer.attention_dropout(attention, training=context.training) + x
    residual = x
    x = layer.dense_4h_to_h(layer.dense_h_to_4h(
        layer.post_attention_layernorm(x)))
    return layer.feedforward_dropout(x, training=context.training) + residual


@register
class KerasHubAlibiDecoder(KerasHubCausalBackbone):
    """A keras-hub BLOOM or Falcon backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and
    `KerasHubCausalBackbone` (`logits`: the tied output projection).

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.BloomBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> decoder = KerasHubAlibiDecoder(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `BloomBackbone` or `FalconBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` computes the ALiBi
            bias per row), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("BloomBackbone", "FalconBackbone")
    family = "alibi"

    def embed(self, context):
        b = self.backbone
        x = b.token_embedding(context.input_ids)
        if self.falcon:
            return x
        return b.embeddings_layer_norm(x)  # BLOOM

    def block(self, layer, x, context):
        block = falcon_block if self.falcon else bloom_block
        return block(layer, x, context)

    def final_norm(self, x, context):
        b = self.backbone
        return b.final_layernorm(x) if self.falcon else b.layer_norm(x)

    @property
    def falcon(self):
        """Whether the backbone is Falcon's (else BLOOM's)."""
        return hasattr(self.backbone, "final_layernorm")
