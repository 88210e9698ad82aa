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
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import function
from tfpack.models.keras_hub.internals import private


def relative_encoding(embedding, batch, length, training):
    """keras-hub's relative positional encoding of a row of `length`,
    `[batch, 2 * length, hidden]`, for every row of the batch."""
    encoding = embedding.relative_positional_encoding(length, length, bsz=1)
    encoding = ops.transpose(encoding, [1, 0, 2])  # [1, 2L, hidden]
    encoding = ops.broadcast_to(
        encoding, (batch, ops.shape(encoding)[1], ops.shape(encoding)[2]))
    return embedding.dropout_layer(encoding, training=training)


def row_bias(layer, embedding, training):
    """The `bias(rows)` of XLNet's segmented rows: content-bias, relative
    and segment scores of each row (`TwoStreamRelativeAttention.
    compute_attention` with the row's relative encoding and segments)."""
    rel_shift = function("keras_hub.src.models.xlnet.relative_attention",
                         "_rel_shift")
    attention = layer.relative_attention
    scale = 1.0 / math.sqrt(float(private(attention, "_key_dim")))
    content_bias = layer.content_attention_bias * scale
    position_bias = layer.positional_attention_bias * scale
    segment_bias = layer.segment_attention_bias * scale

    def bias(rows):
        query, key = rows["query"], rows["key"]  # query scaled
        length = query.shape[1] or ops.shape(query)[1]
        encoding = relative_encoding(embedding, 1, length, training)
        position = private(attention, "_encoding_dense")(encoding)[0]
        relative = rel_shift(  # position: [2N, heads, d]
            ops.einsum("ecd,abcd->acbe", position, query + position_bias),
            klen=length)
        content = ops.einsum("nd,bknd->bnk", content_bias, key)[:, :, None]
        segment = ops.einsum("bind,snd->bnis", query + segment_bias,
                             layer.segment_encoding)
        types = rows["token_types"]
        differ = ops.not_equal(types[:, :, None], types[:, None, :])[:, None]
        return relative + content + ops.where(differ, segment[..., 1:],
                                              segment[..., :1])

    return bias, scale


def encoder_block(layer, x, context):
    """keras-hub's `XLNetEncoder.call` on the content stream: the layer
    itself under the packed mask (float, 1 = may attend), or each sequence
    attending in its own row."""
    extras, training = context.extras, context.training
    attention = layer.relative_attention

    def dense(mask):
        mask = ops.cast(mask, "float32")
        output, _ = layer(output_content=x, attn_mask_content=mask,
                          attn_mask_query=mask, pos_emb=extras["encoding"],
                          seg_mat=extras["segments"], training=training)
        return output

    def project():
        return tuple(private(attention, name)(x) for name in (
            "_query_dense", "_key_dense", "_value_dense"))

    if context.options is None:
        return dispatch(context, project, dense)
    bias, scale = row_bias(layer, extras["embedding"], training)
    output = dispatch(
        context, project, dense, scale=scale,
        dropout_layer=private(attention, "_dropout_layer"), bias=bias,
        row_features={"token_types": extras["token_type_ids"]})
    h = layer.dropout_attn(private(attention, "_output_dense")(output),
                           training=training)
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

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.XLNetBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> encoder = KerasHubXLNet(backbone)
    >>> encoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `XLNetBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` scores each sequence
            in its own row), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone` (with optional `token_type_ids`, default 0).
    """

    backbone_names = ("XLNetBackbone",)
    family = "xlnet"

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

    def embed(self, context):
        embedding = self.backbone.content_query_embedding
        return embedding.dropout_layer(embedding.word_embed(context.input_ids),
                                       training=context.training)

    def extras(self, context, x):
        embedding = self.backbone.content_query_embedding
        token_type_ids = self._token_type_ids(context.inputs,
                                              context.input_ids)
        if context.segmented:
            return {"embedding": embedding, "token_type_ids": token_type_ids}
        batch = ops.shape(context.input_ids)[0]
        length = ops.shape(context.input_ids)[1]
        return {"encoding": relative_encoding(embedding, batch, length,
                                              context.training),
                "segments": ops.not_equal(token_type_ids[:, :, None],
                                          token_type_ids[:, None, :])}

    def block(self, layer, x, context):
        return encoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.get_layer("dropout")(x,
                                                  training=context.training)
