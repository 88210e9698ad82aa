"""Causal language modelling (and supervised fine-tuning): the declaration.

``labels`` are never read from the input: the packer derives each token's
next token inside its own sequence (`IGNORE_LABEL` at a sequence's end), so a
target never crosses into another sequence. ``loss_weights`` (preset
``"sft"``) weight each target, 0.0 on prompts.

>>> from tfpack import tasks
>>> tasks.get("causal_lm").feature("labels").source
'next_token'
"""

from tfpack.tasks.base import IGNORE_LABEL, Feature, Preset, TaskSpec, register

__all__ = ["CAUSAL_LM"]

CAUSAL_LM = register(TaskSpec(
    name="causal_lm",
    doc="next-token prediction; SFT with per-token loss weights",
    features=(
        Feature("labels", "int32", "token", "label", IGNORE_LABEL,
                "next-token target; never a token of another sequence", source="next_token"),
        Feature("loss_weights", "float32", "token", "label", 0.0,
                "weight of each token's target (0.0 = not trained, e.g. prompts)",
                source="optional"),
    ),
    outputs={"logits": "token"},
    presets=(
        # The fallback when nothing else matches: token ids only.
        Preset("causal_lm", omit=("loss_weights",), detect=()),
        Preset("sft", require=("loss_weights",), detect=(("loss_weights", 1),)),
    ),
))
