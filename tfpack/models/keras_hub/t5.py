"""keras-hub T5, packed in pairs.

T5 has no position embedding: the first layer of each stack turns the
distance between a query and a key into one of 32 buckets (bidirectional in
the encoder, backwards only in the decoder) and adds a learned bias per head
to the scores; the later layers reuse that bias, into which the padding and
causal masks are folded. Packed, the distance is taken between positions
inside each sequence (`encoder_position_ids`, `decoder_position_ids`), with
keras-hub's own bucketing, and the folded mask is the packed one
(block-diagonal, causal inside each sequence); cross-attention (no bias)
gets the pair mask.
"""

from keras import ops

from tfpack.models.keras_hub import internals
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import additive
from tfpack.models.keras_hub.seq2seq import relative_positions


def relative_bias(attention, position_ids, allowed):
    """T5's position bias `[B, H, L, L]` from per-sequence positions, with the
    packed mask `allowed` folded in, for the stack whose first layer's
    self-attention is `attention` (a keras-hub `T5MultiHeadAttention`)."""
    buckets = internals.private(type(attention), "_relative_position_bucket")(
        relative_positions(position_ids, position_ids),
        bidirectional=not attention.is_decoder,
        num_buckets=attention.relative_attention_buckets,
        max_distance=attention.relative_attention_max_distance)
    values = ops.take(attention.relative_attention_bias, buckets, axis=0)  # [B, L, L, H]
    return additive(ops.transpose(values, (0, 3, 1, 2)), allowed)


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

    def _stack(self, side, ids, positions, allowed, training, **cross):
        """One side's stack (`side`: "encoder" or "decoder"): embedding, T5's
        bias from per-sequence positions with the packed mask `allowed`
        folded in, the layers (`cross`: the decoder's cross-attention
        arguments), the final norm."""
        b = self.backbone
        layers = getattr(b, f"{side}_transformer_layers")
        x = getattr(b, f"{side}_embedding_dropout")(b.token_embedding(ids), training=training)
        bias = relative_bias(layers[0].self_attention, positions, allowed)
        for layer in layers:
            x, _ = layer(x, position_bias=bias, use_causal_mask=False, training=training,
                         **cross)
        return getattr(b, f"{side}_dropout")(getattr(b, f"{side}_layer_norm")(x),
                                             training=training)

    def encode(self, encoder, masks, training):
        ids, _, positions = encoder
        return self._stack("encoder", ids, positions, masks["encoder"], training)

    def decode(self, decoder, encoder_output, masks, training):
        ids, _, positions = decoder
        return self._stack("decoder", ids, positions, masks["decoder"], training,
                           encoder_hidden_states=encoder_output,
                           encoder_attention_mask=masks["cross"])

    def logits(self, decoder_sequence_output):
        """keras-hub `T5Seq2SeqLM`'s head: scaled by ``hidden_dim**-0.5`` when
        tied to the token embedding."""
        x = decoder_sequence_output
        if self.backbone.tie_embedding_weights:
            x = x * ops.cast(self.backbone.hidden_dim ** -0.5, x.dtype)
        return super().logits(x)
