"""Segmented attention in the keras-hub decoder adapters (Llama, Mistral,
Qwen2, Gemma, Gemma 3): causal inside each sequence, sliding windows, soft
caps and query scaling kept."""

import numpy as np
import pytest
import tensorflow as tf

from tfpack.models import from_keras_hub
from tfpack.testing import pack_examples

from keras_hub_helpers import MAX_LENGTH, examples, make_backbone

# Segmented == dense == keras-hub on each sequence alone, for every family:
# test_conformance.py; the run-time exactness check on every family, dense
# and segmented: test_keras_hub_exactness.py (so the adapters here are built
# with `check_exact=False`). Here: the dense fallback, config, "auto", XLA;
# JAX: test_keras_hub_flash.py.


@pytest.mark.parametrize("family", ("mistral", "gemma", "gpt_oss", "falcon",
                                    "gemma4", "deberta_v3", "xlnet"))
def test_segmented_decoder_falls_back_to_dense_on_packs_the_rows_cannot_hold(
        family):
    # K=2 rows for packs of 3 sequences: `ops.cond` takes the whole-pack
    # branch, whose mask keeps the causal window, and which keeps the soft
    # cap, the sinks and the per-pair biases (ALiBi, relative positions).
    backbone = make_backbone(family)
    dense = from_keras_hub(backbone, attention_implementation="dense",
                           check_exact=False)
    narrow = from_keras_hub(backbone, attention_implementation="segmented",
                            max_sequences_per_pack=2, check_exact=False)
    packed = pack_examples(examples(family), MAX_LENGTH,
                           max_sequences_per_pack=3)
    assert packed["sequence_ids"].max() == 3
    real = packed["sequence_ids"] > 0
    np.testing.assert_allclose(
        np.asarray(narrow(packed)["sequence_output"])[real],
        np.asarray(dense(packed)["sequence_output"])[real], atol=1e-5)


@pytest.mark.parametrize("family", ("llama", "gemma3"))
def test_decoder_config_keeps_the_implementation(family):
    adapter = from_keras_hub(make_backbone(family), check_exact=False,
                             attention_implementation="segmented",
                             max_sequences_per_pack=4, segment_length=8)
    config = adapter.get_config()
    assert (config["attention_implementation"], config["max_sequences_per_pack"],
            config["segment_length"]) == ("segmented", 4, 8)
    clone = type(adapter).from_config(config)
    assert (clone.attention_implementation, clone.max_sequences_per_pack,
            clone.segment_length) == ("segmented", 4, 8)
    assert clone.implementation(MAX_LENGTH) == "segmented"


def test_decoder_auto_follows_the_layers_rule():
    # The rule of tfpack.layers.attention_implementation: segmented from
    # L >= 512 (TensorFlow) with a work ratio >= 1.1, dense without K or
    # below (at 512, K=16, S=256 the ratio is 0.89).
    adapter = from_keras_hub(make_backbone("mistral"), check_exact=False,
                             max_sequences_per_pack=16, segment_length=256)
    assert adapter.attention_implementation == "auto"
    assert adapter.implementation(2048) == "segmented"
    assert adapter.implementation(512) == "dense"
    assert from_keras_hub(make_backbone("gemma"), check_exact=False
                          ).implementation(2048) == "dense"


def test_segmented_gemma_under_xla_equals_dense():
    # jit_compile=True: static rows, the soft cap and the windows compile;
    # outputs and gradients as dense.
    backbone = make_backbone("gemma")
    packed = {name: tf.constant(value) for name, value in pack_examples(
        examples("gemma"), MAX_LENGTH, max_sequences_per_pack=3).items()}
    real = packed["sequence_ids"].numpy() > 0
    results = []
    for options in (dict(attention_implementation="dense"),
                    dict(attention_implementation="segmented",
                         max_sequences_per_pack=3, segment_length=8)):
        adapter = from_keras_hub(backbone, check_exact=False, **options)
        step = tf.function(_outputs_and_gradients_in_graph(adapter),
                           jit_compile=True)
        results.append(step(packed))
    (dense_out, dense_grads), (out, grads) = results
    np.testing.assert_allclose(out.numpy()[real], dense_out.numpy()[real],
                               atol=1e-5)
    for a, b in zip(grads, dense_grads):
        if b is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4,
                                       rtol=1e-4)


def _outputs_and_gradients_in_graph(adapter):
    def step(packed):
        real = tf.cast(packed["sequence_ids"] > 0, "float32")[..., None]
        with tf.GradientTape() as tape:
            out = adapter(packed)["sequence_output"]
            loss = tf.reduce_sum(tf.sin(out) * real)
        gradients = tape.gradient(loss, adapter.backbone.trainable_variables)
        return out, [tf.convert_to_tensor(g) if g is not None else None
                     for g in gradients]
    return step


# Segmented == dense on JAX under jit (Mistral, Gemma): test_keras_hub_flash.py::
# test_segmented_decoders_equal_dense_on_jax_under_jit, in the flash check's
# subprocess.
