"""keras-hub XLNet encoders, packed.

XLNet adds no position embedding to the tokens; each layer's two-stream
relative attention (Transformer-XL) scores query `i` against key `j` with a
sinusoidal encoding of the offset `i - j` (a relative shift over the row)
and a learned bias for whether `i` and `j` share a segment. The backbone
returns the content stream only. Packing changes the mask (seed 000): the
block-diagonal mask of `sequence_ids` replaces keras-hub's padding mask.
Inside one sequence the row offset `i - j` *is* the position offset, and
every pair across sequences is masked, so the relative encodings of the
row are exact; the segment matrix compares the token types of each pair.

With `attention_implementation="segmented"` each sequence attends in its
own row of `N` tokens (`segmented_block`): the content-bias, relative and
segment scores are computed per row, the relative ones from the encoding of
a row of `N` (offsets inside a row are offsets inside its sequence, so the
scores are the pack's).
"""

import math

from keras import ops

from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import attend_segmented
from tfpack.models.keras_hub.base import isolated
from tfpack.models.keras_hub.base import register


def relative_encoding(embedding, batch, length, training):
    """keras-hub's relative positional encoding of a row of `length`,
    `[batch, 2 * length, hidden]`, for every row of the batch."""
    encoding = embedding.relative_positional_encoding(length, length, bsz=1)
    encoding = ops.transpose(encoding, [1, 0, 2])  # [1, 2L, hidden]
    encoding = ops.broadcast_to(
        encoding, (batch, ops.shape(encoding)[1], ops.shape(encoding)[2]))
    return embedding.dropout_layer(encoding, training=training)


def segmented_block(layer, x, embedding, token_type_ids, segmented,
                    training):
    """keras-hub's `XLNetEncoder.call` on the content stream, each sequence
    attending in its own row (`TwoStreamRelativeAttention.compute_attention`
    with the row's relative encoding and segment matrix)."""
    from keras_hub.src.models.xlnet.relative_attention import _rel_shift

    attention = layer.relative_attention
    scale = 1.0 / math.sqrt(float(attention._key_dim))
    content_bias = layer.content_attention_bias * scale
    position_bias = layer.positional_attention_bias * scale
    segment_bias = layer.segment_attention_bias * scale

    def bias(rows):
        query, key = rows["query"], rows["key"]  # query scaled
        length = query.shape[1] or ops.shape(query)[1]
        encoding = relative_encoding(embedding, 1, length, training)
        position = attention._encoding_dense(encoding)[0]  # [2N, heads, d]
        relative = _rel_shift(
            ops.einsum("ecd,abcd->acbe", position, query + position_bias),
            klen=length)
        content = ops.einsum("nd,bknd->bnk", content_bias, key)[:, :, None]
        segment = ops.einsum("bind,snd->bnis", query + segment_bias,
                             layer.segment_encoding)
        types = rows["token_types"]
        differ = ops.not_equal(types[:, :, None], types[:, None, :])[:, None]
        return relative + content + ops.where(differ, segment[..., 1:],
                                              segment[..., :1])

    context = attend_segmented(
        attention._query_dense(x), attention._key_dense(x),
        attention._value_dense(x), segmented, scale=scale,
        dropout_layer=attention._dropout_layer, training=training, bias=bias,
        row_features={"token_types": token_type_ids})
    h = layer.dropout_attn(attention._output_dense(context), training=training)
    h = layer.layer_norm(h + x)
    ff = layer.activation_function_ff(layer.feedforward_intermediate_dense(h))
    ff = layer.dropout_ff(ff, training=training)
    ff = layer.dropout_ff(layer.feedforward_output_dense(ff),
                          training=training)
    return layer.layer_norm_ff(ff + h)


@register
class KerasHubXLNet(KerasHubBackbone):
    """A keras-hub XLNet backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.XLNetBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> encoder = KerasHubXLNet(backbone)
    >>> encoder({"input_ids": np.array([[5, 6, 7, 8, 0]]),
    ...          "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
    ...          "position_ids": np.array([[0, 1, 0, 1, 0]])},
    ...         )["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `XLNetBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` scores each sequence
            in its own row), `max_sequences_per_pack` and `segment_length`.

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids` and
            optional `token_type_ids` (default 0).
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}` (the content
        stream, as the keras-hub backbone's output).
    """

    backbone_names = ("XLNetBackbone",)

    def __init__(self, backbone, **kwargs):
        super().__init__(backbone, **kwargs)
        self.input_features = self.input_features + ("token_type_ids",)

    @property
    def token_embedding(self):
        return self.backbone.content_query_embedding.word_embed

    @property
    def max_sequence_length(self):
        """None: sinusoidal relative encodings have no table."""
        return None

    def call(self, inputs, training=None):
        input_ids, sequence_ids, _ = self._features(inputs)  # offsets
        token_type_ids = self._token_type_ids(inputs, input_ids)
        b = self.backbone
        embedding = b.content_query_embedding
        x = embedding.dropout_layer(embedding.word_embed(input_ids),
                                    training=training)
        if self.implementation(x.shape[1]) == "segmented":
            options = self.segmented_options(sequence_ids)
            for layer in b.transformer_layers:
                x = segmented_block(layer, x, embedding, token_type_ids,
                                    options, training)
            return {"sequence_output": b.get_layer("dropout")(
                x, training=training)}
        batch, length = ops.shape(input_ids)[0], ops.shape(input_ids)[1]
        encoding = relative_encoding(embedding, batch, length, training)
        # keras-hub's float masks: 1 = may attend.
        allowed = self.attention_mask(sequence_ids)
        mask = ops.cast(allowed, "float32")
        segments = ops.not_equal(token_type_ids[:, :, None],
                                 token_type_ids[:, None, :])
        for layer in b.transformer_layers:
            x, show = isolated(x, allowed)
            x, _ = layer(output_content=x, attn_mask_content=mask,
                         attn_mask_query=mask, pos_emb=encoding,
                         seg_mat=segments, training=training)
            x = show(x)
        return {"sequence_output": b.get_layer("dropout")(x,
                                                          training=training)}
