"""keras-hub DeBERTa-v3 encoders, packed.

DeBERTa adds no position embedding to the tokens; each layer's disentangled
attention adds content-to-position and position-to-content scores that
look up a shared table of relative embeddings by the bucketed relative
position `i - j` of query and key. Packing changes two things (seed 000):
the relative positions are `position_ids[i] - position_ids[j]`, from the
positions inside each sequence (keras-hub takes row offsets `i - j`), and
attention gets the block-diagonal mask of `sequence_ids`. Pairs from two
sequences get a bucket too, but the mask removes them, so no score ever
depends on where a sequence sits in its pack.

With `attention_implementation="segmented"` each sequence attends in its
own row and the c2p and p2c scores are computed per row, from the buckets
of the positions gathered with it (`segmented_self_attention`): the tables
are shared, so a row of `N` tokens scores `N x 2k` table entries instead of
the pack's `L x 2k`.
"""

from keras import ops

from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private


def relative_buckets(attention, position_ids):
    """keras-hub's bucketed `position_ids[i] - position_ids[j]`: int
    `[batch, 1, L, L]` (query `i`, key `j`)."""
    positions = ops.cast(position_ids, "int32")
    relative = positions[:, :, None] - positions[:, None, :]
    return private(attention, "_make_log_bucket_position")(relative)[:, None]


def _gather_last(scores, index):
    """`scores[b, h, i, index[b, h, i, j]]` (keras-hub's `tf.gather` with
    `batch_dims=3`, for any backend)."""
    return ops.take_along_axis(scores, ops.cast(index, "int32"), axis=3)


def disentangled_scores(attention, query, key, rel_embeddings, buckets):
    """keras-hub's c2p and p2c scores under relative `buckets`."""
    span = attention.bucket_size
    shape = (ops.shape(query)[0], attention.num_heads, ops.shape(query)[1],
             ops.shape(query)[1])
    scale = attention.scale_factor
    pos_query = private(attention, "_query_dense")(rel_embeddings)
    pos_key = private(attention, "_key_dense")(rel_embeddings)
    c2p = ops.einsum("aecd,abcd->acbe", pos_key, query)
    c2p_index = ops.broadcast_to(ops.clip(buckets + span, 0, 2 * span - 1),
                                 shape)
    score = ops.multiply(_gather_last(c2p, c2p_index), scale)
    p2c = ops.einsum("aecd,abcd->acbe", pos_query, key)
    p2c_index = ops.broadcast_to(ops.clip(-buckets + span, 0, 2 * span - 1),
                                 shape)
    p2c = ops.transpose(_gather_last(p2c, p2c_index), [0, 1, 3, 2])
    return score + ops.multiply(p2c, scale)


def row_bias(attention, rel_embeddings, training):
    """The `bias(rows)` of segmented rows: c2p and p2c scores from the
    relative buckets of each row's own positions."""
    # The table is the same for every row (keras-hub repeats it per batch).
    table = private(attention, "_position_dropout_layer")(
        rel_embeddings[:1], training=training)
    pos_key = private(attention, "_key_dense")(table)[0]  # [2k, heads, d]
    pos_query = private(attention, "_query_dense")(table)[0]
    span, scale = attention.bucket_size, attention.scale_factor

    def bias(rows):
        positions = ops.cast(rows["positions"], "int32")
        buckets = private(attention, "_make_log_bucket_position")(
            positions[:, :, None] - positions[:, None, :])[:, None]
        rows_query, rows_key = rows["query"], rows["key"]  # query scaled
        shape = (ops.shape(rows_query)[0], attention.num_heads,
                 ops.shape(rows_query)[1], ops.shape(rows_query)[1])
        c2p = _gather_last(
            ops.einsum("ecd,abcd->acbe", pos_key, rows_query),
            ops.broadcast_to(ops.clip(buckets + span, 0, 2 * span - 1), shape))
        p2c = _gather_last(
            ops.einsum("ecd,abcd->acbe", pos_query, rows_key),
            ops.broadcast_to(ops.clip(-buckets + span, 0, 2 * span - 1),
                             shape))
        return c2p + ops.multiply(ops.transpose(p2c, [0, 1, 3, 2]), scale)

    return bias


def dense_attention(attention, query, key, value, rel_embeddings,
                    position_ids, mask, training):
    """keras-hub's `DisentangledSelfAttention` scores and context with
    relative positions from `position_ids` and the boolean `[B, L, L]`
    packed `mask`."""
    scores = ops.multiply(ops.einsum("aecd,abcd->acbe", key, query),
                          attention.scale_factor)
    rel_embeddings = private(attention, "_position_dropout_layer")(
        rel_embeddings, training=training)
    buckets = relative_buckets(attention, position_ids)
    scores += disentangled_scores(attention, query, key, rel_embeddings,
                                  buckets)
    scores = private(attention, "_masked_softmax")(scores, mask)
    scores = private(attention, "_attn_dropout_layer")(scores,
                                                       training=training)
    return ops.einsum("acbe,aecd->abcd", scores, value)


def self_attention(attention, x, rel_embeddings, context):
    """keras-hub's `DisentangledSelfAttention.call` with relative positions
    from `position_ids`: dense under the packed mask, or each sequence in
    its own row with the c2p and p2c scores of its own positions."""
    training = context.training
    query, key, value = (private(attention, name)(x) for name in (
        "_query_dense", "_key_dense", "_value_dense"))
    if context.options is None:
        bias = None
    else:
        bias = row_bias(attention, rel_embeddings, training)
    output = dispatch(
        context, lambda: (query, key, value),
        lambda mask: dense_attention(attention, query, key, value,
                                     rel_embeddings, context.position_ids,
                                     mask, training),
        scale=attention.scale_factor,
        dropout_layer=private(attention, "_attn_dropout_layer"), bias=bias,
        row_features={"positions": context.position_ids})
    batch, length = ops.shape(output)[0], ops.shape(output)[1]
    output = ops.reshape(output, (batch, length, attention.hidden_dim))
    return private(attention, "_output_dense")(output)


def encoder_block(layer, x, rel_embeddings, context):
    """keras-hub's `DisentangledAttentionEncoder.call` (post-norm)."""
    training = context.training
    residual = x
    x = self_attention(private(layer, "_self_attention_layer"), x,
                       rel_embeddings, context)
    x = private(layer, "_self_attention_dropout")(x, training=training)
    x = private(layer, "_self_attention_layer_norm")(x + residual)
    residual = x
    x = private(layer, "_feedforward_output_dense")(
        private(layer, "_feedforward_intermediate_dense")(x))
    x = private(layer, "_feedforward_dropout")(x, training=training)
    return private(layer, "_feedforward_layer_norm")(x + residual)


@register
class KerasHubDeberta(KerasHubBackbone):
    """A keras-hub DeBERTa-v3 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.DebertaV3Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16, bucket_size=4)
    >>> encoder = KerasHubDeberta(backbone)
    >>> encoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `DebertaV3Backbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` computes the relative
            scores per row), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("DebertaV3Backbone",)
    family = "deberta"
    initializer_range = 0.02  # Head hint: keras-hub's DeBERTa init.
    layer_norm_epsilon = 1e-7  # Head hint: keras-hub's DeBERTa norms.

    @property
    def max_sequence_length(self):
        """None: relative positions have no table; beyond keras-hub's
        `max_sequence_length` they share the last log bucket."""
        return None

    def embed(self, context):
        b = self.backbone
        x = b.embeddings_layer_norm(b.token_embedding(context.input_ids))
        return b.embeddings_dropout(x, training=context.training)

    def extras(self, context, x):
        return {"rel_embeddings": self.backbone.relative_embeddings(x)}

    def block(self, layer, x, context):
        return encoder_block(layer, x, context.extras["rel_embeddings"],
                             context)
