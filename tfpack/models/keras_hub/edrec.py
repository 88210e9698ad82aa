"""keras-hub EdRec, packed in pairs.

EdRec has no position encoding: one token embedding for both sides, then
pre-norm blocks (RMS norm, Keras multi-head attention, a gated feed-forward
layer); the decoder's blocks add cross-attention. Its blocks fold a padding
mask (and the decoder's causal mask) into their attention masks, so the
adapter runs each block's steps on its own sublayers with the packed masks:
block-diagonal in the encoder, causal inside each sequence in the decoder,
the pair mask for cross-attention (segmented: the Keras attention layers'
projections in rows). EdRec's LM head is a `Dense` layer of
`EdRecSeq2SeqLM`, not of the backbone: the adapter gives the backbone's
outputs, and `tfpack.models.Seq2SeqLM` (which ties the head to the token
embedding) refuses it.
"""

from tfpack.errors import TfpackError
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import keras_attention


def _attention(x, normalize, attention, mask, dropout, training, context=None):
    """EdRec's pre-norm attention residual: self-attention of `x`, or its
    cross-attention to `context`, under the boolean `mask` or in segmented
    `Rows`."""
    out = keras_attention(attention, normalize(x), mask, training, context)
    return x + dropout(out, training=training)


def _feedforward(layer, x, training):
    """A block's gated feed-forward residual (no dropout on it)."""
    return x + layer.mlp(layer.pre_ffw_norm(x), training=training)


@register
class KerasHubEdRec(KerasHubSeq2SeqBackbone):
    """A keras-hub EdRec backbone that reads pair packs.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubSeq2SeqBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.builders import pack_pairs
    >>> backbone = keras_hub.models.EdRecBackbone(
    ...     vocab_size=30, num_layers_enc=1, num_layers_dec=1, hidden_dim=8,
    ...     intermediate_dim=16, num_heads=2)
    >>> packed = KerasHubEdRec(backbone)
    >>> packs = pack_pairs([([5, 6], [2, 8]), ([7], [2])],
    ...                    max_encoder_length=4, max_decoder_length=3)
    >>> out = packed({k: packs[k] for k in packed.input_features})
    >>> tuple(out["encoder_sequence_output"].shape)
    (1, 4, 8)

    Args:
        backbone: a keras-hub `EdRecBackbone`.
        **kwargs: passed on to `KerasHubSeq2SeqBackbone`.
    """

    backbone_names = ("EdRecBackbone",)
    family = "edrec"

    def layers(self):
        return [*self.backbone.encoder_layers, *self.backbone.decoder_layers]

    @property
    def vocabulary_size(self):
        return self.backbone.vocab_size

    def encode(self, encoder, masks, training):
        x = self.backbone.embedding(encoder[0])
        for layer in self.backbone.encoder_layers:
            x = _attention(x, layer.pre_attention_norm, layer.attention, masks["encoder"],
                           layer.dropout1, training)
            x = _feedforward(layer, x, training)
        return x

    def decode(self, decoder, encoder_output, masks, training):
        x = self.backbone.embedding(decoder[0])
        for layer in self.backbone.decoder_layers:
            x = _attention(x, layer.pre_self_attn_norm, layer.self_attention,
                           masks["decoder"], layer.dropout1, training)
            x = _attention(x, layer.pre_cross_attn_norm, layer.cross_attention,
                           masks["cross"], layer.dropout2, training, context=encoder_output)
            x = _feedforward(layer, x, training)
        return x

    def logits(self, decoder_sequence_output):
        raise TfpackError(
            "EdRec's LM head is a Dense layer of keras-hub's EdRecSeq2SeqLM, not "
            "tied to the backbone's embedding: tfpack's Seq2SeqLM cannot score "
            "with it; use the adapter's decoder_sequence_output with that head. "
            "Received: backbone of type EdRecBackbone")
