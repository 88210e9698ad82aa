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
from tfpack.models.keras_hub.base import attend_segmented
from tfpack.models.keras_hub.base import isolated
from tfpack.models.keras_hub.base import register


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


def segmented_alibi(query, key, value, slopes, position_ids, segmented, *,
                    scale, bias_scale, dropout_layer, training):
    """Segmented attention of `[B, L, heads, d]` q, k, v under ALiBi: the
    logits `scale * q . k + bias_scale * slopes[h] * position(key)`, with
    the positions of each row's own tokens."""
    slopes = ops.convert_to_tensor(slopes, "float32") * bias_scale

    def bias(rows):
        positions = ops.cast(rows["positions"], "float32")
        return slopes[None, :, None, None] * positions[:, None, None, :]

    context = attend_segmented(query, key, value, segmented, scale=scale,
                               dropout_layer=dropout_layer, training=training,
                               bias=bias,
                               row_features={"positions": position_ids})
    batch, length = ops.shape(context)[0], ops.shape(context)[1]
    return ops.reshape(context, (batch, length, -1))


def bloom_attention(attention, x, bias, mask, training):
    """keras-hub's `BloomAttention.call` under `bias` and `mask` (`[B, L, L]`
    boolean) in place of its `AlibiBias` and padding mask."""
    query = ops.transpose(attention._query_dense(x), [0, 2, 1, 3])
    key = ops.transpose(attention._key_dense(x), [0, 2, 3, 1])
    value = ops.transpose(attention._value_dense(x), [0, 2, 1, 3])
    scores = ops.matmul(query, key) * attention.inv_norm_factor + bias
    scores = attention._softmax(scores, ops.expand_dims(mask, 1))
    scores = attention._dropout_layer(scores, training=training)
    context = ops.transpose(ops.matmul(scores, value), [0, 2, 1, 3])
    batch, length = ops.shape(context)[0], ops.shape(context)[1]
    context = ops.reshape(
        context, (batch, length, attention.num_heads * attention.head_dim))
    context = attention._output_dense(context)
    return attention._dropout_layer(context, training=training)


def bloom_block(layer, x, position_ids, mask, training, segmented=None):
    """keras-hub's `BloomDecoder.call` with per-sequence ALiBi positions
    (dense under `mask`, or segmented with `segmented` options)."""
    attention = layer._self_attention_layer
    slopes = attention._alibi_layer._get_slopes(attention.num_heads)
    h = layer._pre_attention_layernorm(x)
    if segmented is None:
        bias = alibi_bias(slopes, position_ids, attention.compute_dtype)
        h = bloom_attention(attention, h, bias, mask, training)
    else:
        h = segmented_alibi(
            attention._query_dense(h), attention._key_dense(h),
            attention._value_dense(h), slopes, position_ids, segmented,
            scale=attention.inv_norm_factor, bias_scale=1.0,
            dropout_layer=attention._dropout_layer, training=training)
        h = attention._dropout_layer(attention._output_dense(h),
                                     training=training)
    x = x + h
    residual = x
    x = layer._mlp_intermediate_dense(layer._post_attention_layernorm(x))
    x = layer._mlp_output_dense(keras.activations.gelu(x, approximate=True))
    return layer._dropout_layer(x, training=training) + residual


def falcon_block(layer, x, position_ids, mask, training, segmented=None):
    """keras-hub's `FalconTransformerDecoder.call` with per-sequence ALiBi
    positions (its attention layer takes the bias as an argument)."""
    slopes = layer._get_slopes(layer.num_attention_heads)
    h = layer.input_layernorm(x)
    if segmented is None:
        bias = alibi_bias(slopes, position_ids, layer.compute_dtype)
        attention = layer.attention_layer(inputs=h, alibi=bias,
                                          attention_mask=mask,
                                          training=training)
    else:
        a = layer.attention_layer
        attention = a.output_dense(segmented_alibi(
            a.query_dense(h), a.key_dense(h), a.value_dense(h), slopes,
            position_ids, segmented, scale=a.inv_norm_factor,
            bias_scale=a.inv_norm_factor, dropout_layer=a.attention_dropout,
            training=training))
    x = layer.attention_dropout(attention, training=training) + x
    residual = x
    x = layer.dense_4h_to_h(layer.dense_h_to_4h(
        layer.post_attention_layernorm(x)))
    return layer.feedforward_dropout(x, training=training) + residual


@register
class KerasHubAlibiDecoder(KerasHubCausalBackbone):
    """A keras-hub BLOOM or Falcon backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and
    `KerasHubCausalBackbone` (`logits`: the tied output projection).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.BloomBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> decoder = KerasHubAlibiDecoder(backbone)
    >>> decoder({"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...          "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ...         )["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `BloomBackbone` or `FalconBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` computes the ALiBi
            bias per row), `max_sequences_per_pack` and `segment_length`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids`.
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}` (after the final
        layer norm, as the keras-hub backbone's output).
    """

    backbone_names = ("BloomBackbone", "FalconBackbone")

    def call(self, inputs, training=None):
        input_ids, sequence_ids, position_ids = self._features(inputs)
        b = self.backbone
        x = b.token_embedding(input_ids)
        falcon = hasattr(b, "final_layernorm")
        if not falcon:
            x = b.embeddings_layer_norm(x)  # BLOOM
        mask, segmented = self.attention_inputs(sequence_ids, x.shape[1])
        block = falcon_block if falcon else bloom_block
        for layer in b.transformer_layers:
            x, show = isolated(x, mask)
            x = show(block(layer, x, position_ids, mask, training, segmented))
        final_norm = b.final_layernorm if falcon else b.layer_norm
        return {"sequence_output": final_norm(x)}
