"""keras-hub BART, packed in pairs.

BART's encoder stacks keras-hub `TransformerEncoder` layers and its decoder
`TransformerDecoder` layers (with cross-attention), each side on its own
learned position table, after an embedding layer norm. Packed, each side's
`PositionEmbedding` looks positions up by its per-sequence positions
(`encoder_position_ids`, `decoder_position_ids`), and the layers get the
blocks' steps run on their own sublayers with the packed masks:
block-diagonal for the encoder, causal inside each sequence for the
decoder, the pair mask for cross-attention (segmented: the Keras attention
layers' projections in rows, `KerasHubSeq2SeqBackbone.implementations`).
"""

from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.internals import private
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import keras_attention


def _residual(layer, x, name, sublayer, training):
    """keras-hub's `TransformerEncoder`/`TransformerDecoder` residual around
    `sublayer`, with the block's `_{name}_layer_norm` (first or last) and
    `_{name}_dropout`."""
    norm = private(layer, f"_{name}_layer_norm")
    h = sublayer(norm(x) if layer.normalize_first else x)
    x = x + private(layer, f"_{name}_dropout")(h, training=training)
    return x if layer.normalize_first else norm(x)


def block(layer, x, mask, training, context=None, cross=None):
    """keras-hub's `TransformerEncoder.call` (or `TransformerDecoder.call`
    with cross-attention to `context`) under the packed `mask` and `cross`
    (boolean masks or segmented `Rows`)."""
    x = _residual(layer, x, "self_attention", lambda h: keras_attention(
        private(layer, "_self_attention_layer"), h, mask, training), training)
    if context is not None:
        x = _residual(layer, x, "cross_attention", lambda h: keras_attention(
            private(layer, "_cross_attention_layer"), h, cross, training, context), training)
    return _residual(layer, x, "feedforward", lambda h: private(
        layer, "_feedforward_output_dense")(private(
            layer, "_feedforward_intermediate_dense")(h)), training)


@register
class KerasHubBart(KerasHubSeq2SeqBackbone):
    """A keras-hub BART backbone that reads pair packs.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubSeq2SeqBackbone`.
    Positions of each side must stay below the backbone's
    `max_sequence_length` (its position tables).

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.BartBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> packed = KerasHubBart(backbone)
    >>> packed({"encoder_input_ids": np.array([[0, 5, 2, 0, 6, 2]]),
    ...         "encoder_sequence_ids": np.array([[1, 1, 1, 2, 2, 2]]),
    ...         "encoder_position_ids": np.array([[0, 1, 2, 0, 1, 2]]),
    ...         "decoder_input_ids": np.array([[2, 0, 7, 2, 0]]),
    ...         "decoder_sequence_ids": np.array([[1, 1, 1, 2, 2]]),
    ...         "decoder_position_ids": np.array([[0, 1, 2, 0, 1]])},
    ...        )["decoder_sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `BartBackbone`.
        **kwargs: passed on to `KerasHubSeq2SeqBackbone`.
    """

    backbone_names = ("BartBackbone",)
    family = "bart"

    def layers(self):
        return [*self.backbone.encoder_transformer_layers,
                *self.backbone.decoder_transformer_layers]

    def _embed(self, ids, positions, side, training):
        b = self.backbone
        tokens = b.token_embedding(ids)
        table = getattr(b, f"{side}_position_embedding")
        x = getattr(b, f"{side}_embeddings_add")((tokens, table(tokens, positions=positions)))
        x = getattr(b, f"{side}_embeddings_layer_norm")(x)
        return getattr(b, f"{side}_embeddings_dropout")(x, training=training)

    def encode(self, encoder, masks, training):
        ids, _, positions = encoder
        x = self._embed(ids, positions, "encoder", training)
        for layer in self.backbone.encoder_transformer_layers:
            x = block(layer, x, masks["encoder"], training)
        return x

    def decode(self, decoder, encoder_output, masks, training):
        ids, _, positions = decoder
        x = self._embed(ids, positions, "decoder", training)
        for layer in self.backbone.decoder_transformer_layers:
            x = block(layer, x, masks["decoder"], training, encoder_output, masks["cross"])
        return x
