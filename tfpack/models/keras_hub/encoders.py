"""keras-hub BERT-family encoders (BERT, ELECTRA, RoBERTa, XLM-RoBERTa,
DistilBERT, ALBERT), packed.

All stack keras-hub `TransformerEncoder` layers on learned position
embeddings (ALBERT factorizes them through a projection and shares its
layers in groups, called in keras-hub's order). Packing changes two things
(seed 000, section 3.2): the `PositionEmbedding` looks positions up by
`position_ids`, which restart for every sequence, and self-attention gets
the block-diagonal mask of `sequence_ids` instead of a padding mask.
"""

import keras
from keras import ops

from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import attend as dispatch
from tfpack.models.keras_hub.base import backbone_classes
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private

# Backbones with BERT's separate token, position and segment embeddings.
_SEGMENTED = ("AlbertBackbone", "BertBackbone", "ElectraBackbone")
# Backbones with one `TokenAndPositionEmbedding` and no token types.
_UNSEGMENTED = ("RobertaBackbone", "XLMRobertaBackbone", "DistilBertBackbone")


def dense_attention(mha, x, mask, training):
    """keras `MultiHeadAttention`'s self-attention of `x` under `mask`, with
    its scores laid out query-first.

    The same computation as `mha(query=x, value=x, attention_mask=mask)`
    (its projections and query scale, its masked softmax and its dropout
    layer on the probabilities), but keras's score equation
    (`aecd,abcd->acbe`, key first) compiles under XLA on CPU to a batched
    matmul with a transposed operand: the whole step ran 1.6-1.7x slower at
    L=2,048 and 2.5x at 4,096 than with the query-first `bquh,bkuh->buqk`
    (benchmarks/keras_hub_dense.py; issue 23: the segmented path looked up
    to 2.2x faster than dense where it did no less work). Without dropout
    (ALBERT) keras calls `ops.dot_product_attention`, whose TensorFlow
    version was 1.1-1.2x slower; on other backends that call stays (fused
    kernels where they exist), as it does for other attention axes.
    """
    fused = (not private(mha, "_dropout") > 0.0
             and keras.backend.backend() != "tensorflow")
    axes = tuple(private(mha, "_attention_axes"))
    if fused or axes != (1,) or len(x.shape) != 3:
        return mha(query=x, value=x, attention_mask=mask, training=training)
    query = private(mha, "_query_dense")(x)
    query = query * ops.cast(private(mha, "_inverse_sqrt_key_dim"),
                             query.dtype)
    scores = ops.einsum("bquh,bkuh->buqk", query,
                        private(mha, "_key_dense")(x))
    probabilities = private(mha, "_dropout_layer")(
        private(mha, "_masked_softmax")(scores, mask), training=training)
    context = ops.einsum("buqk,bkuh->bquh", probabilities,
                         private(mha, "_value_dense")(x))
    return private(mha, "_output_dense")(context)


def self_attention(layer, x, context):
    """Self-attention of one keras-hub `TransformerEncoder` under
    `context` (dense: `dense_attention` under its mask; segmented: the
    layer's own projections in tfpack's rows)."""
    mha = private(layer, "_self_attention_layer")

    def project():
        return tuple(private(mha, name)(x) for name in (
            "_query_dense", "_key_dense", "_value_dense"))

    def segmented_output(context_):
        return private(mha, "_output_dense")(context_)

    out = dispatch(
        context, project,
        lambda mask: dense_attention(mha, x, mask, context.training),
        scale=private(mha, "_inverse_sqrt_key_dim"),
        dropout_layer=private(mha, "_dropout_layer"))
    return out if context.options is None else segmented_output(out)


def encoder_block(layer, x, context):
    """keras-hub's `TransformerEncoder.call`, with the packed mask as the
    whole mask (or segmented attention, see `self_attention`)."""
    training = context.training
    norm_first = layer.normalize_first
    attention_norm = private(layer, "_self_attention_layer_norm")
    feedforward_norm = private(layer, "_feedforward_layer_norm")
    residual = x
    if norm_first:
        x = attention_norm(x)
    x = self_attention(layer, x, context)
    x = private(layer, "_self_attention_dropout")(x, training=training)
    x = x + residual
    if not norm_first:
        x = attention_norm(x)
    residual = x
    if norm_first:
        x = feedforward_norm(x)
    x = private(layer, "_feedforward_intermediate_dense")(x)
    x = private(layer, "_feedforward_output_dense")(x)
    x = private(layer, "_feedforward_dropout")(x, training=training)
    x = x + residual
    if not norm_first:
        x = feedforward_norm(x)
    return x


def encoder_layers(backbone):
    """The backbone's `TransformerEncoder` layers in the order it calls them:
    ALBERT's `num_layers // num_groups` passes through each group of shared
    layers, or the one list of every other encoder."""
    groups = getattr(backbone, "num_groups", None)
    if groups is None:
        return list(backbone.transformer_layers)
    passes = backbone.num_layers // groups
    return [layer for group in backbone.transformer_layers
            for _ in range(passes) for layer in group]


@register
class KerasHubEncoder(KerasHubBackbone):
    """A keras-hub BERT-family encoder that reads packed features.

    Wraps `BertBackbone`, `ElectraBackbone`, `AlbertBackbone` (with
    `token_type_ids`), `RobertaBackbone`, `XLMRobertaBackbone` and
    `DistilBertBackbone` (without). Built by
    `tfpack.models.from_keras_hub`; see `KerasHubBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.RobertaBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> encoder = KerasHubEncoder(backbone)
    >>> encoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: one of the six keras-hub backbones above.
        **kwargs: passed on to `KerasHubBackbone`.

    Call arguments and returns: those of `KerasHubBackbone` (with optional `token_type_ids`, default 0).
    """

    backbone_names = _SEGMENTED + _UNSEGMENTED
    family = "encoders"
    initializer_range = 0.02  # Head hint: keras-hub's BERT-family init.

    def __init__(self, backbone, **kwargs):
        super().__init__(backbone, **kwargs)
        self.has_token_types = isinstance(backbone,
                                          backbone_classes(_SEGMENTED))
        if self.has_token_types:
            self.input_features = self.input_features + ("token_type_ids",)

    @property
    def activation(self):
        """Head hint: BERT, ELECTRA and ALBERT use tanh-approximate GELU in
        keras-hub."""
        return "gelu_tanh" if self.has_token_types else "gelu"

    @property
    def layer_norm_epsilon(self):
        """Head hint: the backbone's own epsilon."""
        return self.backbone.embeddings_layer_norm.epsilon

    def embed(self, context):
        """keras-hub's embeddings with per-token positions (and ELECTRA's
        and ALBERT's projection)."""
        b = self.backbone
        input_ids, position_ids = context.input_ids, context.position_ids
        if not self.has_token_types:
            x = b.embeddings(input_ids, positions=position_ids)
        else:
            tokens = b.token_embedding(input_ids)
            token_type_ids = self._token_type_ids(context.inputs, input_ids)
            x = (tokens + b.position_embedding(tokens, positions=position_ids)
                 + b.segment_embedding(token_type_ids))
        x = b.embeddings_dropout(b.embeddings_layer_norm(x),
                                 training=context.training)
        if getattr(b, "embeddings_projection", None) is not None:
            x = b.embeddings_projection(x)  # ELECTRA, ALBERT
        return x

    def layers(self):
        return encoder_layers(self.backbone)

    def block(self, layer, x, context):
        return encoder_block(layer, x, context)
