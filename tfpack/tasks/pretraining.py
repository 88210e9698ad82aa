"""BERT pre-training (masked LM + next-sentence prediction): the declaration.

Per pack: up to ``M`` masked-LM prediction slots, whose positions shift with
their sequence's offset in the pack, and one next-sentence label per sequence.

>>> from tfpack import tasks
>>> tasks.get("pretraining").outputs
{'mlm_logits': 'prediction', 'nsp_logits': 'sequence'}
"""

from tfpack.tasks.base import Feature, Preset, TaskSpec, register

__all__ = ["PRETRAINING"]

PRETRAINING = register(TaskSpec(
    name="pretraining",
    doc="BERT masked LM and next-sentence prediction",
    reads=("token_type_ids",),
    features=(
        Feature("masked_lm_positions", "int32", "prediction", "input", 0,
                "index into the pack of each masked token", shift=True),
        Feature("masked_lm_ids", "int32", "prediction", "label", 0,
                "the true token of each masked position"),
        Feature("masked_lm_weights", "float32", "prediction", "label", 0.0,
                "1.0 for a real prediction, 0.0 for padding", source="ones"),
        Feature("masked_lm_sequence_ids", "int32", "prediction", "label", 0,
                "the sequence (1..K) of each prediction; 0 = padding", source="slot"),
        Feature("next_sentence_labels", "int32", "sequence", "label", 0,
                "next-sentence label of each sequence"),
    ),
    outputs={"mlm_logits": "prediction", "nsp_logits": "sequence"},
    presets=(Preset("bert", detect=(("masked_lm_positions", 1),)),),
))
