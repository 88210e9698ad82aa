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
Segmented (`KerasHubSeq2SeqBackbone.implementations`), the same
projections attend in rows: each sequence alone (windows as bands of row
offsets, which are position offsets inside a sequence; soft caps, query
scaling) and each target with its own input.
"""

from keras import ops

from tfpack.models.keras_hub import internals
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.seq2seq import cross_attend
from tfpack.models.keras_hub.seq2seq import relative_positions
from tfpack.models.keras_hub.seq2seq import segmented
from tfpack.models.keras_hub.seq2seq import self_attend


def additive_mask(allowed, dtype):
    """keras-hub's `(1 - mask) * -1e9` of a boolean `[B, Lq, Lk]`, as `[B, 1, Lq, Lk]`."""
    return ops.expand_dims((1.0 - ops.cast(allowed, dtype)) * -1e9, 1)


def within(allowed, position_ids, window):
    """`allowed` `[B, L, L]` limited to keys at most `before` positions before
    and `after` after the query (`window = (before, after)`, in positions
    inside a sequence; None: unchanged)."""
    if window is None:
        return allowed
    before, after = window
    offset = relative_positions(position_ids, position_ids)  # key minus query
    return ops.logical_and(allowed, ops.logical_and(offset >= -before, offset <= after))


def row_options(attention, training):
    """The segmented rows' arguments of a Gemma-style attention layer."""
    return dict(scale=attention.scaling, dropout_layer=attention.dropout_layer,
                training=training, logit_soft_cap=attention.logit_soft_cap)


def attend(attention, query, key, value, allowed, position_ids, window, training):
    """The attention of a T5Gemma (or T5Gemma 2) layer on its rotated
    `query`, `key`, `value` (before the output projection): keras-hub's
    grouped-query `_compute_attention` under the boolean `allowed`
    narrowed by `window`, or in segmented rows (`allowed` is `Rows`)."""
    if segmented(allowed):
        return self_attend(allowed, query, key, value, window=window,
                           **row_options(attention, training))
    repeat = internals.function(type(attention).__module__, "repeat_kv")
    groups = attention.num_key_value_groups
    compute = internals.private(attention, "_compute_attention")
    mask = additive_mask(within(allowed, position_ids, window), query.dtype)
    return compute(query, repeat(key, groups), repeat(value, groups), mask, training=training)


def self_attention(attention, x, position_ids, allowed, window, training):
    """`T5GemmaAttention`'s self-attention with rotary angles at
    `position_ids`, under `allowed` (boolean or `Rows`) and `window`."""
    query = attention.rotary_embedding(attention.query_dense(x), positions=position_ids)
    key = attention.rotary_embedding(attention.key_dense(x), positions=position_ids)
    return attention.output_dense(attend(attention, query, key, attention.value_dense(x),
                                         allowed, position_ids, window, training))


def cross_attention(attention, x, encoder_output, allowed, training):
    """`T5GemmaAttention`'s cross-attention of `x` to `encoder_output` under
    the pair mask `allowed` (boolean) or in segmented `Rows`."""
    if not segmented(allowed):
        return attention(inputs=[x, encoder_output], attention_mask=additive_mask(
            allowed, x.dtype), training=training)[0]
    out = cross_attend(allowed, attention.query_dense(x), attention.key_dense(encoder_output),
                       attention.value_dense(encoder_output), **row_options(attention, training))
    return attention.output_dense(out)


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

    def encoder_window(self, layer):
        """The encoder layer's `(before, after)` window, or None: none
        (keras-hub 0.32 does not window T5Gemma's encoder)."""
        return None

    def encode(self, encoder, masks, training):
        b = self.backbone
        ids, _, positions = encoder
        x = self._embed(b.token_embedding, b.encoder_hidden_dim, ids, b.encoder_dropout,
                        training)
        for layer in b.encoder_layers:
            x = _sublayer(x, layer.pre_self_attn_layernorm,
                          lambda h, layer=layer: self.self_attention(
                              layer.self_attn, h, positions, masks["encoder"],
                              self.encoder_window(layer), training),
                          layer.post_self_attn_layernorm, layer.dropout, training)
            x = self._feedforward(layer, x, training)
        return b.encoder_dropout(b.encoder_norm(x), training=training)

    def decoder_window(self, layer):
        """The decoder layer's window: on "sliding_attention" layers keys at
        most `sliding_window` positions back (keras-hub's `q - W <= k`)."""
        if layer.layer_type != "sliding_attention":
            return None
        return (layer.sliding_window, 0)

    def decoder_attention(self, layer, x, positions, encoder_output, masks, training):
        """The decoder layer's attention sublayers: self-attention, then
        cross-attention to the pair's own encoder sequence."""
        x = _sublayer(x, layer.pre_self_attn_layernorm,
                      lambda h: self.self_attention(layer.self_attn, h, positions,
                                                    masks["decoder"],
                                                    self.decoder_window(layer), training),
                      layer.post_self_attn_layernorm, layer.dropout, training)
        return _sublayer(x, layer.pre_cross_attn_layernorm,
                         lambda h: cross_attention(layer.cross_attn, h, encoder_output,
                                                   masks["cross"], training),
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
