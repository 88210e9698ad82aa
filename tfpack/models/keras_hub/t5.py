"""keras-hub T5, packed in pairs.

T5 has no position embedding: the first layer of each stack turns the
distance between a query and a key into one of 32 buckets (bidirectional in
the encoder, backwards only in the decoder) and adds a learned bias per head
to the scores; the later layers reuse that bias, into which the padding and
causal masks are folded. Packed, the distance is taken between positions
inside each sequence (`encoder_position_ids`, `decoder_position_ids`), with
keras-hub's own bucketing, and the folded mask is the packed one
(block-diagonal, causal inside each sequence); cross-attention (no bias)
gets the pair mask. The adapter runs each layer's steps on its own
sublayers, so that segmented attention
(`KerasHubSeq2SeqBackbone.implementations`) can replace either: the bias of
each row from the row's positions, cross-attention in rows pairing target
k with input k.
"""

from keras import ops

from tfpack.models.keras_hub import internals
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import additive
from tfpack.models.keras_hub.seq2seq import cross_attend
from tfpack.models.keras_hub.seq2seq import relative_positions
from tfpack.models.keras_hub.seq2seq import segmented
from tfpack.models.keras_hub.seq2seq import self_attend


def position_bias(attention, position_ids):
    """T5's position bias `[B, H, L, L]` from per-sequence positions `[B, L]`,
    for the stack whose first layer's self-attention is `attention` (a
    keras-hub `T5MultiHeadAttention`)."""
    buckets = internals.private(type(attention), "_relative_position_bucket")(
        relative_positions(position_ids, position_ids),
        bidirectional=not attention.is_decoder,
        num_buckets=attention.relative_attention_buckets,
        max_distance=attention.relative_attention_max_distance)
    values = ops.take(attention.relative_attention_bias, buckets, axis=0)  # [B, L, L, H]
    return ops.transpose(values, (0, 3, 1, 2))


def relative_bias(attention, position_ids, allowed):
    """`position_bias` with the packed mask `allowed` folded in."""
    return additive(position_bias(attention, position_ids), allowed)


def _heads(attention, x):
    """`[B, L, inner]` -> `[B, L, heads, key_value_dim]`."""
    return ops.reshape(x, (ops.shape(x)[0], -1, attention.num_heads,
                           attention.key_value_dim))


def _rows(attention, x, rows, training, context=None, **bias):
    """`T5MultiHeadAttention` (unscaled scores, its probability dropout) in
    segmented `rows`: self-attention of `x` (`bias`: `attend_in_rows`'
    `bias` and `row_features`), or cross-attention to `context`."""
    query = _heads(attention, attention.query_projector(x))
    source = x if context is None else context
    key = _heads(attention, attention.key_projector(source))
    value = _heads(attention, attention.value_projector(source))
    options = dict(dropout_layer=attention.dropout_layer, training=training)
    if context is None:
        out = self_attend(rows, query, key, value, **bias, **options)
    else:
        out = cross_attend(rows, query, key, value, **options)
    return attention.output_projector(ops.reshape(out, (ops.shape(x)[0], -1,
                                                        attention.inner_dim)))


def _self_attention(first, positions, allowed, training):
    """A stack's self-attention `attend(layer, h)`: keras-hub's, under T5's
    bias with the packed mask `allowed` folded in, or in segmented rows
    (`allowed` is `Rows`) with the bias of each row from its positions;
    `first` is the stack's first self-attention, which owns the bias."""
    if segmented(allowed):
        bias = dict(bias=lambda rows: position_bias(first, rows["positions"]),
                    row_features={"positions": positions})
        return lambda layer, h: _rows(layer.self_attention, h, allowed, training, **bias)
    folded = relative_bias(first, positions, allowed)
    return lambda layer, h: layer.self_attention(h, position_bias=folded,
                                                 training=training)[0]


def _feedforward(layer, x, training):
    """keras-hub `T5TransformerLayer`'s feed-forward residual."""
    h = layer.layer_norm(x)
    if layer.use_gated_activation:
        h = layer.input_projector(h) * layer.gate_projector(h)
    else:
        h = layer.input_projector(h)
    h = layer.dropout_layer(layer.output_projector(
        layer.dropout_layer(h, training=training)), training=training)
    return x + h


def _layer(layer, x, attend, training, context=None, cross=None):
    """keras-hub `T5TransformerLayer.call`'s steps with the stack's
    `attend(layer, h)` and, in the decoder, cross-attention to `context`
    (under the pair mask `cross`, or in its segmented rows)."""
    h = layer.self_attention_layer_norm(x)
    x = x + layer.self_attention_dropout(attend(layer, h), training=training)
    if context is not None:
        h = layer.cross_attention_layer_norm(x)
        if segmented(cross):
            h = _rows(layer.cross_attention, h, cross, training, context=context)
        else:
            h = layer.cross_attention(h, key_value_states=context, mask=cross,
                                      training=training)[0]
        x = x + layer.cross_attention_dropout(h, training=training)
    return _feedforward(layer, x, training)


@register
class KerasHubT5(KerasHubSeq2SeqBackbone):
    """A keras-hub T5 backbone that reads pair packs.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubSeq2SeqBackbone`.

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.T5Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> packed = KerasHubT5(backbone)
    >>> packed({"encoder_input_ids": np.array([[5, 6, 7]]),
    ...         "encoder_sequence_ids": np.array([[1, 1, 2]]),
    ...         "encoder_position_ids": np.array([[0, 1, 0]]),
    ...         "decoder_input_ids": np.array([[0, 8, 0]]),
    ...         "decoder_sequence_ids": np.array([[1, 1, 2]]),
    ...         "decoder_position_ids": np.array([[0, 1, 0]])},
    ...        )["decoder_sequence_output"].shape
    TensorShape([1, 3, 8])

    Args:
        backbone: a keras-hub `T5Backbone`.
        **kwargs: passed on to `KerasHubSeq2SeqBackbone`.
    """

    backbone_names = ("T5Backbone",)
    family = "t5"

    def layers(self):
        return [*self.backbone.encoder_transformer_layers,
                *self.backbone.decoder_transformer_layers]

    def _stack(self, side, ids, positions, allowed, training, context=None, cross=None):
        """One side's stack (`side`: "encoder" or "decoder"): embedding, the
        layers' steps with T5's bias from per-sequence positions (dense under
        the packed mask `allowed`, or per row of its `Rows`; `context`,
        `cross`: the decoder's encoder output and its cross mask or rows),
        the final norm."""
        b = self.backbone
        layers = getattr(b, f"{side}_transformer_layers")
        x = getattr(b, f"{side}_embedding_dropout")(b.token_embedding(ids), training=training)
        attend = _self_attention(layers[0].self_attention, positions, allowed, training)
        for layer in layers:
            x = _layer(layer, x, attend, training, context, cross)
        return getattr(b, f"{side}_dropout")(getattr(b, f"{side}_layer_norm")(x),
                                             training=training)

    def encode(self, encoder, masks, training):
        ids, _, positions = encoder
        return self._stack("encoder", ids, positions, masks["encoder"], training)

    def decode(self, decoder, encoder_output, masks, training):
        ids, _, positions = decoder
        return self._stack("decoder", ids, positions, masks["decoder"], training,
                           context=encoder_output, cross=masks["cross"])

    def logits(self, decoder_sequence_output):
        """keras-hub `T5Seq2SeqLM`'s head: scaled by ``hidden_dim**-0.5`` when
        tied to the token embedding."""
        x = decoder_sequence_output
        if self.backbone.tie_embedding_weights:
            x = x * ops.cast(self.backbone.hidden_dim ** -0.5, x.dtype)
        return super().logits(x)
