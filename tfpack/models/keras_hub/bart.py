"""keras-hub BART, packed in pairs.

BART's encoder stacks keras-hub `TransformerEncoder` layers and its decoder
`TransformerDecoder` layers (with cross-attention), each side on its own
learned position table, after an embedding layer norm. Packed, each side's
`PositionEmbedding` looks positions up by its per-sequence positions
(`encoder_position_ids`, `decoder_position_ids`), and the layers get the
packed masks through their public mask arguments: block-diagonal for the
encoder, causal inside each sequence for the decoder (merged with the
layer's own causal mask, which it already implies), the pair mask for
cross-attention.
"""

from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone


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
            x = layer(x, attention_mask=masks["encoder"], training=training)
        return x

    def decode(self, decoder, encoder_output, masks, training):
        ids, _, positions = decoder
        x = self._embed(ids, positions, "decoder", training)
        for layer in self.backbone.decoder_transformer_layers:
            x = layer(decoder_sequence=x, encoder_sequence=encoder_output,
                      decoder_attention_mask=masks["decoder"],
                      encoder_attention_mask=masks["cross"], training=training)
        return x
