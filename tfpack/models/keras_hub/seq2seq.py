"""What the keras-hub encoder-decoder adapters share: pair packs in, both outputs out.

An encoder-decoder adapter reads a pair pack (`tfpack.tasks.seq2seq`): the
encoder row (``encoder_input_ids``, ``encoder_sequence_ids``,
``encoder_position_ids`` [B, Le]) and the decoder row (the same three with
``decoder_`` [B, Ld]), where decoder sequence k is the target of encoder
sequence k. It runs the keras-hub backbone's own layers with three masks:

- encoder self-attention: block-diagonal (`PackedAttentionMask`);
- decoder self-attention: causal inside each sequence;
- cross-attention: decoder sequence k sees encoder sequence k only
  (`tfpack.layers.pair_attention_mask`);

and positions (learned tables, T5's relative buckets, rotary) from the
per-sequence positions, so every pair's outputs are those of the keras-hub
backbone run on that pair alone. Attention is dense (a `[B, Ld, Le]` cross
mask); `attention_implementation="segmented"` is refused.
"""

from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.attention_mask import pair_attention_mask
from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.tasks.seq2seq import DECODER_FEATURES
from tfpack.tasks.seq2seq import ENCODER_FEATURES
from tfpack.tasks.seq2seq import SEQ2SEQ_BACKBONE_OUTPUTS


class KerasHubSeq2SeqBackbone(KerasHubBackbone):
    """Base of the encoder-decoder adapters (T5, BART, T5Gemma).

    Subclasses implement `encode(encoder, masks, training)` and
    `decode(decoder, encoder_output, masks, training)` on the features of
    one side (`(ids, sequence_ids, position_ids)`, int32) and `logits`
    (the keras-hub ``Seq2SeqLM``'s own head).

    Example:

    >>> import keras_hub, numpy as np
    >>> from tfpack.models import from_keras_hub
    >>> backbone = keras_hub.models.T5Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16)
    >>> packed = from_keras_hub(backbone)
    >>> out = packed({"encoder_input_ids": np.array([[5, 6, 7, 0]]),
    ...               "encoder_sequence_ids": np.array([[1, 1, 2, 0]]),
    ...               "encoder_position_ids": np.array([[0, 1, 0, 0]]),
    ...               "decoder_input_ids": np.array([[2, 8, 2]]),
    ...               "decoder_sequence_ids": np.array([[1, 1, 2]]),
    ...               "decoder_position_ids": np.array([[0, 1, 0]])})
    >>> out["encoder_sequence_output"].shape, out["decoder_sequence_output"].shape
    (TensorShape([1, 4, 8]), TensorShape([1, 3, 8]))

    Args:
        backbone: a keras-hub encoder-decoder backbone of `backbone_names`.
        **kwargs: passed on to `KerasHubBackbone`; `attention_implementation`
            must be `"auto"` or `"dense"`.

    Call arguments:
        inputs: dict with the six pair-pack input features.
        training: whether dropout is active.

    Returns:
        `{"encoder_sequence_output": [B, Le, H], "decoder_sequence_output":
        [B, Ld, H]}`, as the keras-hub backbone's outputs.
    """

    input_features = ENCODER_FEATURES + DECODER_FEATURES
    packed_outputs = dict(SEQ2SEQ_BACKBONE_OUTPUTS)

    def __init__(self, backbone, attention_implementation="auto", **kwargs):
        if attention_implementation not in ("auto", "dense"):
            raise TfpackError(
                "Encoder-decoder adapters attend densely (a cross mask between "
                "the two rows): `attention_implementation` must be 'auto' or "
                f"'dense'. Received: attention_implementation={attention_implementation!r}")
        super().__init__(backbone, attention_implementation=attention_implementation,
                         **kwargs)
        self.decoder_mask = PackedAttentionMask(
            causal=True, mask_type="boolean", dtype=self.dtype_policy,
            name="causal_pair_attention")

    def side(self, inputs, names):
        """`(ids, sequence_ids, position_ids)` of one row, int32, checked."""
        missing = [n for n in names if n not in inputs]
        if missing:
            raise TfpackError(
                f"`{type(self).__name__}` needs the pair-pack features "
                f"{list(self.input_features)}; missing {missing}. "
                f"Received: keys={sorted(inputs)}")
        return tuple(ops.cast(inputs[n], "int32") for n in names)

    def masks(self, encoder_sequence_ids, decoder_sequence_ids):
        """Boolean `{"encoder": [B, Le, Le], "decoder": [B, Ld, Ld] (causal),
        "cross": [B, Ld, Le]}`."""
        return {"encoder": self.attention_mask(encoder_sequence_ids),
                "decoder": self.decoder_mask(decoder_sequence_ids),
                "cross": pair_attention_mask(decoder_sequence_ids, encoder_sequence_ids)}

    def call(self, inputs, training=None):
        encoder = self.side(inputs, ENCODER_FEATURES)
        decoder = self.side(inputs, DECODER_FEATURES)
        masks = self.masks(encoder[1], decoder[1])
        encoder_output = self.encode(encoder, masks, training)
        decoder_output = self.decode(decoder, encoder_output, masks, training)
        return {"encoder_sequence_output": encoder_output,
                "decoder_sequence_output": decoder_output}

    def encode(self, encoder, masks, training):
        raise NotImplementedError

    def decode(self, decoder, encoder_output, masks, training):
        raise NotImplementedError

    def logits(self, decoder_sequence_output):
        """Next-token logits `[B, Ld, vocabulary_size]`, float32: the keras-hub
        ``Seq2SeqLM``'s head (tied to the token embedding)."""
        return ops.cast(self.token_embedding(decoder_sequence_output, reverse=True),
                        "float32")


def relative_positions(query_position_ids, key_position_ids):
    """`[B, Lq, Lk]` int32: key position minus query position, each inside its
    own sequence (meaningful where the pair mask allows)."""
    return (ops.expand_dims(ops.cast(key_position_ids, "int32"), 1)
            - ops.expand_dims(ops.cast(query_position_ids, "int32"), 2))


def additive(bias, allowed):
    """`bias` `[B, H, Lq, Lk]` plus keras-hub's -1e9 where `allowed` `[B, Lq, Lk]`
    is False (as T5's attention folds its padding mask into its bias)."""
    blocked = (1.0 - ops.cast(allowed, bias.dtype)) * ops.cast(-1e9, bias.dtype)
    return bias + ops.expand_dims(blocked, 1)


__all__ = ["KerasHubSeq2SeqBackbone", "additive", "relative_positions"]