"""keras-hub T5Gemma 2, text only, packed in pairs.

T5Gemma 2's stacks are Gemma 3 layers (T5Gemma's, plus RMS-normalised
queries and keys); its encoder's "sliding_attention" layers see a window
around each query (`(W + 1) // 2` positions back, `W // 2` ahead), its
decoder's `W - 1` positions back, and each decoder layer attends to itself
and to the encoder in one softmax ("merged" attention: the decoder's keys
and values, then the encoder's, under one mask). Packed, the adapter runs
each layer's steps on its own sublayers as for T5Gemma
(`tfpack.models.keras_hub.t5gemma`): rotary angles from per-sequence
positions, windows by position distance inside a sequence, and the merged
mask's two halves the packed causal mask and the pair mask (segmented:
rows holding a target's own keys, then its input's, under one softmax;
the decoder's self-attention is segmented exactly when its cross-attention
is, as they share it). A backbone
with a `vision_encoder` (images interleaved into the encoder row) is
refused: a pair pack carries no images.
"""

from keras import ops

from tfpack.errors import TfpackError
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.seq2seq import cross_attend
from tfpack.models.keras_hub.seq2seq import segmented
from tfpack.models.keras_hub.t5gemma import KerasHubT5Gemma
from tfpack.models.keras_hub.t5gemma import row_options
from tfpack.models.keras_hub.t5gemma import _sublayer
from tfpack.models.keras_hub.t5gemma import attend
from tfpack.models.keras_hub.t5gemma import within


def _project(attention, x, position_ids):
    """Rotated, normalised queries and keys and the values of `x`."""
    query, key = attention.query_dense(x), attention.key_dense(x)
    if attention.use_query_key_norm:
        query, key = attention.query_norm(query), attention.key_norm(key)
    return (attention.rotary_embedding(query, positions=position_ids),
            attention.rotary_embedding(key, positions=position_ids),
            attention.value_dense(x))


def self_attention(attention, x, position_ids, allowed, window, training):
    """`T5Gemma2Attention` at per-sequence `position_ids` under `allowed`
    (boolean or `Rows`) and `window`."""
    return attention.output_dense(attend(attention, *_project(attention, x, position_ids),
                                         allowed, position_ids, window, training))


def merged_attention(attention, x, position_ids, encoder_output, masks, window, training):
    """`T5Gemma2MergedAttention`: the decoder's rotated keys (causal, inside
    `window`), then the encoder's (normalised, not rotated), in one softmax:
    under the merged mask `[B, 1, Ld, Ld + Le]` of `masks["decoder"]` and
    `masks["cross"]`, or in the segmented rows `masks["cross"]`."""
    query, key, value = _project(attention, x, position_ids)
    cross_key = attention.key_dense(encoder_output)
    if attention.use_query_key_norm:
        cross_key = attention.key_norm(cross_key)
    cross_value = attention.value_dense(encoder_output)
    if segmented(masks["cross"]):
        return attention.output_dense(cross_attend(
            masks["cross"], query, cross_key, cross_value, self_key=key, self_value=value,
            self_window=window, **row_options(attention, training)))
    allowed = ops.concatenate([within(masks["decoder"], position_ids, window),
                               masks["cross"]], axis=-1)
    return attention.output_dense(attend(
        attention, query, ops.concatenate([key, cross_key], axis=1),
        ops.concatenate([value, cross_value], axis=1), allowed, None, None, training))


@register
class KerasHubT5Gemma2(KerasHubT5Gemma):
    """A keras-hub T5Gemma 2 backbone (text only) that reads pair packs.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubSeq2SeqBackbone`.

    Example:

    >>> import keras_hub
    >>> from tfpack.builders import pack_pairs
    >>> sides = {f"{side}_{name}": value for side in ("encoder", "decoder")
    ...          for name, value in (("hidden_dim", 8), ("intermediate_dim", 16),
    ...                              ("num_layers", 1), ("num_attention_heads", 2),
    ...                              ("num_key_value_heads", 1), ("head_dim", 4),
    ...                              ("layer_types", ["sliding_attention"]))}
    >>> backbone = keras_hub.models.T5Gemma2Backbone(vocabulary_size=30, sliding_window=2,
    ...                                              **sides)
    >>> packed = KerasHubT5Gemma2(backbone)
    >>> packs = pack_pairs([([5, 6], [2, 8]), ([7], [2])],
    ...                    max_encoder_length=4, max_decoder_length=3)
    >>> out = packed({k: packs[k] for k in packed.input_features})
    >>> tuple(out["decoder_sequence_output"].shape)
    (1, 3, 8)

    Args:
        backbone: a keras-hub `T5Gemma2Backbone` without a `vision_encoder`.
        **kwargs: passed on to `KerasHubSeq2SeqBackbone`.
    """

    backbone_names = ("T5Gemma2Backbone",)
    family = "t5gemma2"

    self_attention = staticmethod(self_attention)

    def __init__(self, backbone, **kwargs):
        if getattr(backbone, "vision_encoder", None) is not None:
            raise TfpackError(
                "T5Gemma 2 with a vision encoder interleaves image embeddings "
                "into the encoder row, and a pair pack carries no images: "
                "pass a text-only backbone (vision_encoder=None). Received: "
                f"backbone.vision_encoder of type {type(backbone.vision_encoder).__name__}")
        super().__init__(backbone, **kwargs)

    def implementations(self, encoder_length, decoder_length):
        """As `KerasHubSeq2SeqBackbone.implementations`, the decoder's
        self-attention as its cross-attention (one merged softmax)."""
        chosen = super().implementations(encoder_length, decoder_length)
        return dict(chosen, decoder=chosen["cross"])

    @staticmethod
    def _sliding(layer):
        """`W` of a "sliding_attention" layer, else None."""
        if layer.attention_type != "sliding_attention":
            return None
        return layer.sliding_window

    def encoder_window(self, layer):
        """keras-hub's bidirectional window: `(W + 1) // 2 - 1` positions
        back, `W // 2` ahead."""
        window = self._sliding(layer)
        return None if window is None else ((window + 1) // 2 - 1, window // 2)

    def decoder_window(self, layer):
        """`W - 1` positions back (keras-hub's `q - (W - 1) <= k`)."""
        window = self._sliding(layer)
        return None if window is None else (window - 1, 0)

    def decoder_attention(self, layer, x, positions, encoder_output, masks, training):
        """The merged self- and cross-attention sublayer."""
        return _sublayer(x, layer.pre_self_attn_layernorm,
                         lambda h: merged_attention(layer.merged_attn, h, positions,
                                                    encoder_output, masks,
                                                    self.decoder_window(layer), training),
                         layer.post_self_attn_layernorm, layer.dropout, training)
