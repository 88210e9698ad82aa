"""keras-hub T5Gemma, packed in pairs.

T5Gemma's encoder and decoder are Gemma 2 stacks (scaled embeddings, rotary
self-attention, soft caps, sandwich norms); the decoder's layers add
cross-attention, and its "sliding_attention" layers see only the last
`sliding_window` positions. keras-hub builds every mask inside its layers
from a padding mask and rotates queries and keys at row offsets, so the
adapter runs each layer's steps itself on the layer's own sublayers: rotary
angles from the per-sequence positions, the packed masks (block-diagonal in
the encoder, which keras-hub 0.32 does not window; causal inside each
sequence and windowed by position distance in the decoder) and the pair
mask for cross-attention, all as keras-hub's additive -1e9 masks.
"""

from keras import ops

from tfpack.models.keras_hub import internals
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import relative_positions


def _repeat_kv(attention, states):
    """keras-hub's grouped-query `repeat_kv` (T5Gemma's attention module)."""
    repeat = internals.function(type(attention).__module__, "repeat_kv")
    return repeat(states, attention.num_key_value_groups)


def additive_mask(allowed, dtype):
    """keras-hub's `(1 - mask) * -1e9` of a boolean `[B, Lq, Lk]`, as `[B, 1, Lq, Lk]`."""
    return ops.expand_dims((1.0 - ops.cast(allowed, dtype)) * -1e9, 1)


def self_attention(attention, x, position_ids, mask, training):
    """`T5GemmaAttention`'s self-attention with rotary angles at `position_ids`
    under the additive `mask` `[B, 1, L, L]`."""
    query = attention.rotary_embedding(attention.query_dense(x), positions=position_ids)
    key = attention.rotary_embedding(attention.key_dense(x), positions=position_ids)
    value = attention.value_dense(x)
    compute = internals.private(attention, "_compute_attention")
    output = compute(query, _repeat_kv(attention, key), _repeat_kv(attention, value), mask,
                     training=training)
    return attention.output_dense(output)


def _sublayer(x, normalize, block, finish, dropout, training):
    """keras-hub's sandwich: `x + dropout(finish(block(normalize(x))))`."""
    return x + dropout(finish(block(normalize(x))), training=training)


@register
class KerasHubT5Gemma(KerasHubSeq2SeqBackbone):
    """A keras-hub T5Gemma backbone that reads pair packs.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubSeq2SeqBackbone`.
    `hidden_dim` and `token_embedding` are the decoder's.

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.T5GemmaBackbone(
    ...     vocabulary_size=30, encoder_hidden_dim=8, encoder_intermediate_dim=16,
    ...     encoder_num_layers=1, encoder_num_attention_heads=2,
    ...     encoder_num_key_value_heads=1, encoder_head_dim=4,
    ...     encoder_layer_types=["full_attention"], decoder_hidden_dim=8,
    ...     decoder_intermediate_dim=16, decoder_num_layers=1,
    ...     decoder_num_attention_heads=2, decoder_num_key_value_heads=1,
    ...     decoder_head_dim=4, decoder_layer_types=["sliding_attention"],
    ...     sliding_window=2)
    >>> packed = KerasHubT5Gemma(backbone)
    >>> packed({"encoder_input_ids": np.array([[5, 6, 7]]),
    ...         "encoder_sequence_ids": np.array([[1, 1, 2]]),
    ...         "encoder_position_ids": np.array([[0, 1, 0]]),
    ...         "decoder_input_ids": np.array([[2, 8, 2]]),
    ...         "decoder_sequence_ids": np.array([[1, 1, 2]]),
    ...         "decoder_position_ids": np.array([[0, 1, 0]])},
    ...        )["decoder_sequence_output"].shape
    TensorShape([1, 3, 8])

    Args:
        backbone: a keras-hub `T5GemmaBackbone`.
        **kwargs: passed on to `KerasHubSeq2SeqBackbone`.
    """

    backbone_names = ("T5GemmaBackbone",)
    family = "t5gemma"

    def layers(self):
        return [*self.backbone.encoder_layers, *self.backbone.decoder_layers]

    @property
    def hidden_dim(self):
        return self.backbone.decoder_hidden_dim

    @property
    def token_embedding(self):
        return self.backbone.decoder_token_embedding

    @property
    def vocabulary_size(self):
        return self.backbone.vocabulary_size

    def _embed(self, embedding, width, ids, dropout, training):
        """keras-hub's scaled token embedding of one side, then its dropout."""
        x = embedding(ids)
        return dropout(x * ops.cast(ops.sqrt(width), x.dtype), training=training)

    def _feedforward(self, layer, x, training):
        return _sublayer(x, layer.pre_feedforward_layernorm,
                         lambda h: layer.mlp(h, training=training),
                         layer.post_feedforward_layernorm, layer.dropout, training)

    # The family's self-attention at per-sequence positions (a hook for T5Gemma 2).
    self_attention = staticmethod(self_attention)

    def encoder_self_mask(self, layer, positions, block):
        """The encoder layer's boolean self-attention mask: block-diagonal
        (keras-hub 0.32 does not window T5Gemma's encoder)."""
        return block

    def encode(self, encoder, masks, training):
        b = self.backbone
        ids, _, positions = encoder
        x = self._embed(b.token_embedding, b.encoder_hidden_dim, ids, b.encoder_dropout,
                        training)
        for layer in b.encoder_layers:
            mask = additive_mask(self.encoder_self_mask(layer, positions, masks["encoder"]),
                                 x.dtype)
            x = _sublayer(x, layer.pre_self_attn_layernorm,
                          lambda h, layer=layer, mask=mask: self.self_attention(
                              layer.self_attn, h, positions, mask, training),
                          layer.post_self_attn_layernorm, layer.dropout, training)
            x = self._feedforward(layer, x, training)
        return b.encoder_dropout(b.encoder_norm(x), training=training)

    def decoder_self_mask(self, layer, positions, causal):
        """The layer's boolean self-attention mask: the packed causal mask, and
        for "sliding_attention" layers keys at most `sliding_window` positions
        back (keras-hub's `q - W <= k`, in positions inside the sequence)."""
        if layer.layer_type != "sliding_attention":
            return causal
        back = -relative_positions(positions, positions)  # query minus key position
        return ops.logical_and(causal, back <= layer.sliding_window)

    def decoder_attention(self, layer, x, positions, encoder_output, masks, training):
        """The decoder layer's attention sublayers: self-attention, then
        cross-attention to the pair's own encoder sequence."""
        mask = additive_mask(self.decoder_self_mask(layer, positions, masks["decoder"]),
                             x.dtype)
        x = _sublayer(x, layer.pre_self_attn_layernorm,
                      lambda h: self.self_attention(layer.self_attn, h, positions, mask,
                                                    training),
                      layer.post_self_attn_layernorm, layer.dropout, training)
        cross = additive_mask(masks["cross"], x.dtype)
        return _sublayer(x, layer.pre_cross_attn_layernorm,
                         lambda h: layer.cross_attn(inputs=[h, encoder_output],
                                                    attention_mask=cross,
                                                    training=training)[0],
                         layer.post_cross_attn_layernorm, layer.dropout, training)

    def decode(self, decoder, encoder_output, masks, training):
        b = self.backbone
        ids, _, positions = decoder
        x = self._embed(b.decoder_token_embedding, b.decoder_hidden_dim, ids,
                        b.decoder_dropout, training)
        for layer in b.decoder_layers:
            x = self.decoder_attention(layer, x, positions, encoder_output, masks, training)
            x = self._feedforward(layer, x, training)
        return b.decoder_dropout(b.decoder_norm(x), training=training)

    def logits(self, decoder_sequence_output):
        """keras-hub `T5GemmaSeq2SeqLM`'s head: the tied decoder embedding, then
        the final soft cap."""
        logits = super().logits(decoder_sequence_output)
        cap = self.backbone.final_logit_softcapping
        if cap is not None:
            logits = ops.tanh(logits / cap) * cap
        return logits
