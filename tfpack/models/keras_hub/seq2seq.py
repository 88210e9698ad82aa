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
backbone run on that pair alone.

Each of the three attentions is dense (the masks above; the cross mask is
`[B, Ld, Le]`) or segmented, chosen apart (`implementations`): encoder and
decoder self-attention in rows of one sequence each
(`tfpack.layers.segmented_attention`, with the family's relative bias or
window per row), cross-attention in rows pairing target k with input k
(`tfpack.layers.pair_segmented_attention`). `"auto"` picks segmented for a
kind where its work ratio (dense scores over segmented ones, from `Le`,
`Ld`, `K` and `S`) passes the measured threshold of
`tfpack.layers.attention_implementation` (`PAIR_MIN_WORK_RATIO` on a
CPU); `segment_length` bounds the sequences of both sides, or is
`(inputs, targets)`.
"""

import dataclasses

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.attention_implementation import choose_implementation
from tfpack.layers.attention_implementation import PAIR_MIN_WORK_RATIO
from tfpack.layers.attention_implementation import PAIR_SEGMENT_LENGTH
from tfpack.layers.attention_implementation import default_device
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.attention_mask import pair_attention_mask
from tfpack.layers.pair_segmented_attention import attend_across_rows
from tfpack.layers.pair_segmented_attention import pair_work
from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import attend_segmented
from tfpack.models.keras_hub.internals import private
from tfpack.params import check
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
        attention_implementation: `"auto"`, `"dense"` or `"segmented"`
            (each kind where it pays, or all dense, or all segmented; see
            `implementations`); `"flash"` is refused (no pair kernel).
        segment_length: the longest input and target (one number), or
            `(inputs, targets)`, where below their rows; None: the rows.
        **kwargs: passed on to `KerasHubBackbone` (`max_sequences_per_pack`:
            `K` pairs a pack).

    Call arguments:
        inputs: dict with the six pair-pack input features.
        training: whether dropout is active.

    Returns:
        `{"encoder_sequence_output": [B, Le, H], "decoder_sequence_output":
        [B, Ld, H]}`, as the keras-hub backbone's outputs.
    """

    input_features = ENCODER_FEATURES + DECODER_FEATURES
    packed_outputs = dict(SEQ2SEQ_BACKBONE_OUTPUTS)

    def __init__(self, backbone, attention_implementation="auto", segment_length=None,
                 **kwargs):
        if attention_implementation == "flash":
            raise TfpackError(
                "Encoder-decoder adapters have no flash kernel for the cross "
                "mask between two rows: `attention_implementation` must be "
                "'auto', 'dense' or 'segmented'. "
                f"Received: attention_implementation={attention_implementation!r}")
        check("segment_length", segment_length, PAIR_SEGMENT_LENGTH)
        pair = isinstance(segment_length, (tuple, list))
        super().__init__(backbone, attention_implementation=attention_implementation,
                         segment_length=None if pair else segment_length, **kwargs)
        self.segment_length = tuple(segment_length) if pair else segment_length
        # (inputs, targets): the longest sequence of each side, or None.
        self.segment_lengths = self.segment_length if pair else (segment_length,) * 2
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

    def implementations(self, encoder_length, decoder_length):
        """`{"encoder", "decoder", "cross"}` -> `"dense"` or `"segmented"`
        at row lengths `Le`, `Ld`: `attention_implementation`, or under
        `"auto"` the rule of `choose_implementation` per kind (self-attention
        at its row length; cross-attention at the longer row, by its work
        ratio `Ld * Le / pair_work`), on a CPU at the pairs' measured
        threshold `PAIR_MIN_WORK_RATIO` (2.0).

        >>> import keras_hub
        >>> from tfpack.models.keras_hub import KerasHubT5
        >>> backbone = keras_hub.models.T5Backbone(
        ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
        ...     intermediate_dim=16)
        >>> adapter = KerasHubT5(backbone, max_sequences_per_pack=16,
        ...                      segment_length=128)
        >>> adapter.implementations(2048, 256)  # TensorFlow: dense below L=512
        {'encoder': 'segmented', 'decoder': 'dense', 'cross': 'segmented'}
        """
        k, (se, sd) = self.max_sequences_per_pack, self.segment_lengths
        backend = keras.backend.backend()
        rule = dict(backend=backend, max_sequences_per_pack=k, device=default_device(backend),
                    min_work_ratio=PAIR_MIN_WORK_RATIO, flash=False)
        known = None not in (k, encoder_length, decoder_length)
        cross_ratio = (encoder_length * decoder_length
                       / pair_work(decoder_length, encoder_length, k, sd, se)) if known else None
        return {
            "encoder": choose_implementation(self.attention_implementation,
                                             length=encoder_length, segment_length=se, **rule),
            "decoder": choose_implementation(self.attention_implementation,
                                             length=decoder_length, segment_length=sd, **rule),
            "cross": choose_implementation(
                self.attention_implementation,
                length=max(encoder_length, decoder_length) if known else None,
                segment_length=None, work_ratio=cross_ratio, **rule)}

    def masks(self, encoder_sequence_ids, decoder_sequence_ids):
        """Per kind, the boolean mask of dense attention (`{"encoder": [B, Le,
        Le], "decoder": [B, Ld, Ld] (causal), "cross": [B, Ld, Le]}`) or, where
        `implementations` chose segmented, its `Rows`."""
        chosen = self.implementations(encoder_sequence_ids.shape[1],
                                      decoder_sequence_ids.shape[1])
        k, (se, sd) = self.max_sequences_per_pack, self.segment_lengths
        rows = {
            "encoder": lambda: Rows(dict(sequence_ids=encoder_sequence_ids,
                                         max_sequences_per_pack=k, segment_length=se,
                                         causal=False)),
            "decoder": lambda: Rows(dict(sequence_ids=decoder_sequence_ids,
                                         max_sequences_per_pack=k, segment_length=sd,
                                         causal=True)),
            "cross": lambda: Rows(dict(query_sequence_ids=decoder_sequence_ids,
                                       key_sequence_ids=encoder_sequence_ids,
                                       max_sequences_per_pack=k, query_segment_length=sd,
                                       key_segment_length=se)),
        }
        dense = {
            "encoder": lambda: self.attention_mask(encoder_sequence_ids),
            "decoder": lambda: self.decoder_mask(decoder_sequence_ids),
            "cross": lambda: pair_attention_mask(decoder_sequence_ids,
                                                 encoder_sequence_ids),
        }
        return {kind: (rows if chosen[kind] == "segmented" else dense)[kind]()
                for kind in chosen}

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


@dataclasses.dataclass(frozen=True)
class Rows:
    """One attention kind run segmented: the options of `attend_in_rows`
    (self-attention) or `attend_across_rows` (cross-attention) that
    `KerasHubSeq2SeqBackbone.masks` gives in place of a dense mask.

    >>> Rows({"causal": True}).options["causal"]
    True
    """

    options: dict


def self_attend(rows, query, key, value, *, window=None, **extras):
    """One side's segmented self-attention in `rows` (`Rows`), inside the
    layer's `(before, after)` `window` band if any; `extras` as
    `base.attend_segmented` takes them (`scale`, `dropout_layer`,
    `training`, `logit_soft_cap`, `bias`, `row_features`)."""
    return attend_segmented(query, key, value, dict(rows.options, window=window), **extras)


def cross_attend(rows, query, key, value, *, scale=1.0, dropout_layer=None, training=None,
                 **extras):
    """Segmented cross-attention (`attend_across_rows`) in `rows`, queries
    multiplied by the layer's `scale`, with its attention-probability
    `dropout_layer` if any; `extras`: `logit_soft_cap`, and `self_key`,
    `self_value`, `self_window` for merged attention."""
    query = query * ops.cast(scale, query.dtype)
    return attend_across_rows(
        query, key, value, dropout=getattr(dropout_layer, "rate", 0.0) or 0.0,
        training=training, seed_generator=getattr(dropout_layer, "seed_generator", None),
        **rows.options, **extras)


def keras_attention(mha, x, mask, training, context=None):
    """A Keras `MultiHeadAttention` (keras-hub's cached one too): the
    self-attention of `x`, or its cross-attention to `context`, under the
    boolean `mask` (the layer itself) or in segmented `Rows` (its
    projections, query scale and probability dropout)."""
    source = x if context is None else context
    if not segmented(mask):
        return mha(query=x, value=source, attention_mask=mask, training=training)
    query = private(mha, "_query_dense")(x)
    key, value = (private(mha, name)(source) for name in ("_key_dense", "_value_dense"))
    options = dict(scale=private(mha, "_inverse_sqrt_key_dim"),
                   dropout_layer=private(mha, "_dropout_layer"), training=training)
    attend = self_attend if context is None else cross_attend
    return private(mha, "_output_dense")(attend(mask, query, key, value, **options))


def segmented(mask):
    """Whether `mask` (a value of `KerasHubSeq2SeqBackbone.masks`) is `Rows`."""
    return isinstance(mask, Rows)


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


__all__ = ["KerasHubSeq2SeqBackbone", "Rows", "additive", "cross_attend", "keras_attention",
           "relative_positions", "segmented", "self_attend"]