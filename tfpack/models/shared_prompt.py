"""Prompt sharing: a `DecoderBackbone` run on pairs whose prompt is stored once.

`PreferenceModel(share_prompt=True)` runs its policy (and reference) through
`shared_prompt_logits`: the `DecoderBackbone`'s own layers, in the order of
its ``call``, under `tfpack.layers.branch_mask.branch_attention_mask`
instead of the block-diagonal mask. Positions continue from the prompt in
both branches (`tfpack.models.preference.split_pairs`), so each response is
computed as it would be after its own copy of the prompt, with the prompt's
keys and values computed once. Dense attention only: the segmented rows
hold whole sequences, which a shared prompt is not.
"""

from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.branch_mask import branch_attention_mask
from tfpack.models.causal_lm import _output_kernel
from tfpack.models.decoder import DecoderBackbone

__all__ = ["check_shared_prompt_policy", "shared_prompt_logits"]


def check_shared_prompt_policy(lm, name="policy"):
    """Refuse, in one line, a causal LM that cannot run shared prompts."""
    backbone = getattr(lm, "backbone", None)
    implementation = (getattr(backbone, "attention_implementation", None)
                      if isinstance(backbone, DecoderBackbone) else None)
    if implementation not in ("dense", "auto") or not backbone.block_diagonal_mask:
        raise TfpackError(
            f"`share_prompt=True` needs a `{name}` on tfpack's DecoderBackbone with dense "
            "attention (attention_implementation='dense'). Received: a backbone of type "
            f"{type(backbone).__name__}"
            + (f" with attention_implementation={implementation!r}" if implementation else ""))


def shared_prompt_logits(lm, inputs, positions, training=None):
    """``[B, L, V]`` float32 logits of ``lm`` (a `CausalLM` on a `DecoderBackbone`)."""
    backbone = lm.backbone
    length = inputs["input_ids"].shape[1]
    layers = backbone.transformer_layers
    if layers and layers[0].attention.implementation_for(length) != "dense":
        raise TfpackError("`share_prompt=True` runs dense attention only. Received: a "
                          f"backbone choosing {layers[0].attention.implementation_for(length)!r}"
                          f" at L={length}")
    x = backbone.token_embedding(ops.cast(inputs["input_ids"], "int32"))
    if backbone.learned_positions is not None:
        x = x + backbone.learned_positions(positions)
    x = backbone.embeddings_dropout(x, training=training)
    mask = branch_attention_mask(inputs["sequence_ids"], inputs["branch_ids"],
                                 backbone.compute_dtype)
    for layer in layers:
        x = layer(x, mask, positions, inputs["sequence_ids"], training=training)
    x = backbone.final_norm(x)
    if lm.output_projection is not None:
        logits = lm.output_projection(x)
    else:
        logits = ops.matmul(x, ops.cast(_output_kernel(backbone.token_embedding), x.dtype))
    return ops.cast(logits, "float32")
