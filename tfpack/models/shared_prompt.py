"""Prompt sharing: a `DecoderBackbone` run on pairs whose prompt is stored once.

`PreferenceModel(share_prompt=True)` runs its policy (and reference) through
`shared_prompt_logits`: the `DecoderBackbone`'s own layers, in the order of
its ``call``, under `tfpack.layers.branch_mask.branch_attention_mask`
instead of the block-diagonal mask. Positions continue from the prompt in
both branches (`tfpack.models.preference.split_pairs`), so each response is
computed as it would be after its own copy of the prompt, with the prompt's
keys and values computed once. Dense attention only: the segmented rows
hold whole sequences, which a shared prompt is not.

A `PreferenceModel` without ``share_prompt`` refuses such packs when it is
called (`refuse_shared_prompts` eagerly, `assert_no_shared_prompts` in a
TensorFlow graph), as `tfpack.predict` and the `Trainer` do before their
compiled steps: it would score each response without its prompt.
"""

import keras
import numpy as np
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.branch_mask import branch_attention_mask
from tfpack.models.causal_lm import _output_kernel
from tfpack.models.decoder import DecoderBackbone

__all__ = ["assert_no_shared_prompts", "check_shared_prompt_policy", "refuse_shared_prompts",
           "shared_prompt_logits"]


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
    # The layers are handed the branch mask: under "auto" they run it dense.
    chosen = layers[0].attention.attention_implementation if layers else "dense"
    if chosen not in ("dense", "auto"):
        raise TfpackError("`share_prompt=True` runs dense attention only. Received: a "
                          f"backbone with attention_implementation={chosen!r} at L={length}")
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


def _traced(value) -> bool:
    """Whether ``value`` has no value yet (symbolic, in a TensorFlow graph, a JAX tracer)."""
    if isinstance(value, keras.KerasTensor):
        return True
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return not tf.executing_eagerly() or tf.is_symbolic_tensor(value)
    if keras.backend.backend() == "jax":
        import jax

        return isinstance(value, jax.core.Tracer)
    return False


def refuse_shared_prompts(inputs) -> None:
    """Refuse packs whose pairs share their prompt, for a model without ``share_prompt``.

    A shared prompt is real tokens of ``branch_ids`` 0
    (`tfpack.training.layouts`): a model without ``share_prompt`` would score
    each response without its prompt. With values at hand (eager TensorFlow,
    JAX outside ``jit``, NumPy) this raises one `TfpackError` naming the
    example (`tfpack.training.layouts.check_pair_layout`, what
    `tfpack.predict` runs); on symbolic values it does nothing
    (`assert_no_shared_prompts` is the graph's check).
    """
    names = ("sequence_ids", "branch_ids", "example_ids")
    if "branch_ids" not in inputs or _traced(inputs["branch_ids"]):
        return
    from tfpack.training.layouts import check_pair_layout

    check_pair_layout({n: np.asarray(ops.convert_to_numpy(inputs[n])) for n in names
                       if n in inputs}, share_prompt=False)


def assert_no_shared_prompts(model, inputs, outputs):
    """``outputs``, in a TensorFlow graph made to wait on the trainer's named assertion.

    The assertion is ``check_pair_layout`` (`tfpack.training.validation`), as
    in the `Trainer` and Keras `fit` on TensorFlow; XLA drops assertions,
    which is why `tfpack.predict` and the `Trainer` check before their
    compiled steps. Eagerly `refuse_shared_prompts` has refused already; inside
    ``jax.jit`` no check can raise on a value, so ``outputs`` are returned as
    they are.
    """
    if ("branch_ids" not in inputs or keras.backend.backend() != "tensorflow"
            or not _traced(inputs["branch_ids"])):
        return outputs
    import tensorflow as tf

    from tfpack.training.validation import pair_layout_checks

    with tf.control_dependencies(pair_layout_checks(model, inputs)):
        return {name: tf.identity(value) for name, value in outputs.items()}
