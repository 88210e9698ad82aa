"""Encoder-decoder (sequence-to-sequence) language modelling: the pair pack.

A pair pack has two rows: the encoder row ``[Le]`` holds the inputs of up to
``K`` pairs back to back, the decoder row ``[Ld]`` their targets, in the same
order, so sequence ``k`` of the decoder row is the target of sequence ``k``
of the encoder row (the same id in ``encoder_sequence_ids`` and
``decoder_sequence_ids``). Each side has its own positions, restarting at 0
for every sequence. The encoder attends inside each sequence, the decoder
causally inside each sequence, and the decoder's cross-attention only to
its own pair's encoder sequence (`tfpack.layers.pair_attention_mask`).

A decoder sequence is the target as the model reads it, starting with the
decoder's start token (``[start] + target`` as keras-hub's
``Seq2SeqLMPreprocessor`` gives it); ``decoder_labels`` are derived by the
packer: the next token of the same decoder sequence, `IGNORE_LABEL` at its
end, so the last token's prediction is never trained (keras-hub drops it).
`tfpack.builders.seq2seq_examples` makes pair packs from text or ids.

Worked example, pairs ``([5, 6, 7] -> [1, 8, 9])`` and ``([4] -> [1, 3])``
with ``Le=5``, ``Ld=6``, ``K=2``::

    encoder_input_ids     [5, 6, 7, 4, 0]
    encoder_sequence_ids  [1, 1, 1, 2, 0]
    encoder_position_ids  [0, 1, 2, 0, 0]
    decoder_input_ids     [1, 8, 9, 1, 3, 0]
    decoder_sequence_ids  [1, 1, 1, 2, 2, 0]
    decoder_position_ids  [0, 1, 2, 0, 1, 0]
    decoder_labels        [8, 9, -100, 3, -100, -100]
    decoder_loss_weights  [1., 1., 0., 1., 0., 0.]
    sequence_mask [1., 1.], example_ids [0, 1]

>>> from tfpack import tasks
>>> spec = tasks.get("seq2seq_lm")
>>> spec.feature("encoder_input_ids").dimension, spec.feature("decoder_labels").dimension
('Le', 'Ld')
"""

from tfpack.tasks.base import IGNORE_LABEL, Feature, TaskSpec, register

__all__ = ["SEQ2SEQ_LM", "SEQ2SEQ_BACKBONE_OUTPUTS", "ENCODER_FEATURES", "DECODER_FEATURES"]

# What an encoder-decoder backbone returns (`tfpack.models.keras_hub.seq2seq`).
SEQ2SEQ_BACKBONE_OUTPUTS = {"encoder_sequence_output": "encoder_token",
                            "decoder_sequence_output": "decoder_token"}
# The input features of each side, ids first.
ENCODER_FEATURES = ("encoder_input_ids", "encoder_sequence_ids", "encoder_position_ids")
DECODER_FEATURES = ("decoder_input_ids", "decoder_sequence_ids", "decoder_position_ids")

SEQ2SEQ_LM = register(TaskSpec(
    name="seq2seq_lm",
    doc="encoder-decoder language modelling on pair packs (T5, BART, T5Gemma)",
    features=(
        Feature("encoder_input_ids", "int32", "encoder_token", "input", 0,
                "the pairs' input tokens, back to back, then padding"),
        Feature("encoder_sequence_ids", "int32", "encoder_token", "input", 0,
                "1..K: the pair of each encoder token; 0 = padding", source="packer"),
        Feature("encoder_position_ids", "int32", "encoder_token", "input", 0,
                "position inside its own input, restarting at 0", source="packer"),
        Feature("decoder_input_ids", "int32", "decoder_token", "input", 0,
                "the pairs' decoder tokens ([start] + target), back to back, then padding"),
        Feature("decoder_sequence_ids", "int32", "decoder_token", "input", 0,
                "1..K: the pair of each decoder token (= its encoder sequence); 0 = padding",
                source="packer"),
        Feature("decoder_position_ids", "int32", "decoder_token", "input", 0,
                "position inside its own target, restarting at 0", source="packer"),
        Feature("decoder_labels", "int32", "decoder_token", "label", IGNORE_LABEL,
                "next decoder token of the same pair; -100 at a target's end",
                source="next_token"),
        Feature("decoder_loss_weights", "float32", "decoder_token", "label", 0.0,
                "weight of each decoder token's target (1.0 where it has one)",
                source="ones"),
    ),
    outputs={"logits": "decoder_token", "log_likelihood": "sequence"},
    detect=None,  # Pair packs come from `tfpack.builders.seq2seq_examples`.
))
