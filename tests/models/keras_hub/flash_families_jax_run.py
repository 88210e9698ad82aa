"""Run under KERAS_BACKEND=jax by test_keras_hub_flash.py: each keras-hub
family named on the command line, adapted with
`attention_implementation="flash"` (Pallas interpret mode on the CPU), equals
the same backbone under dense attention, outputs and gradients, both in one
jitted program a family (one XLA compilation, compiling is most of the time).

Packs of 32 tokens hold the five example sequences (23 tokens) and padding:
the kernel's blocks of 16 split sequences across blocks. Relative-position
families (DeBERTa, XLNet) are refused by name instead. "<family>:segmented"
checks segmented attention against dense the same way (`check_segmented`,
for test_keras_hub_flash.py::test_segmented_decoders_equal_dense_on_jax_under_jit:
in this process, its imports and backbones shared)."""

import functools
import sys
import traceback

import jax
import keras
import numpy as np
from jax_env import count_flash_calls

from keras_hub_helpers import examples, make_backbone, make_backbone_one_layer
from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub
from tfpack.testing import pack_examples

assert keras.backend.backend() == "jax"

# "flash" must run the kernel, not a path giving the same numbers.
CALLS = count_flash_calls()
LENGTH = 32

# The families whose layers are all configured alike run with one layer: the
# kernel and its backward are the same code in every layer, traced and
# compiled once a layer (Pallas interpret mode: about two thirds of a
# family's program), and one layer still takes every variable's gradient
# through the flash backward. The others keep their layers: Gemma's, Gemma
# 3's and Gemma 4's local and global ones, GPT-OSS's window on every other
# layer, SmolLM3's NoPE layer, Qwen-MoE's dense-MLP layer.
ONE_LAYER = ("llama", "bloom", "falcon", "mistral", "gpt2", "opt",
             "gpt_neo_x", "phi3", "phi3_su", "qwen2", "llama3", "qwen3",
             "mixtral", "qwen3_moe")


def check_segmented(family):
    """For test_keras_hub_flash.py::test_segmented_decoders_equal_dense_on_jax_under_jit
    (the argument "<family>:segmented"): raises unless segmented attention
    (`max_sequences_per_pack=3`, rows of 8) equals dense, outputs (1e-5) and
    gradients (1e-4), under jax.jit, on packs of 16 tokens holding up to 3
    sequences. Run for Mistral (dense through jax.nn.dot_product_attention
    with `local_window_size`; one layer, as its flash check) and Gemma (the
    einsum path with the soft cap; its local and global layer)."""
    backbone = backbone_of(family)
    packed = pack_examples(examples(family), 16, max_sequences_per_pack=3)
    assert packed["sequence_ids"].max() == 3
    real = packed["sequence_ids"] > 0
    dense, segmented = (from_keras_hub(backbone, check_exact=False, **options)
                        for options in (dict(attention_implementation="dense"),
                                        dict(attention_implementation="segmented",
                                             max_sequences_per_pack=3,
                                             segment_length=8)))
    assert segmented.implementation(16) == "segmented"
    [(want, want_grads), (got, got_grads)], calls = outputs_and_gradients(
        (dense, segmented), backbone, packed, real)
    assert calls == [0, 0], (family, calls)
    np.testing.assert_allclose(got, want, atol=1e-5, err_msg=family)
    assert len(got_grads) == len(want_grads) > 0
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=1e-4, err_msg=family)


@functools.cache
def backbone_of(family):
    """The family's tiny backbone; one layer in `ONE_LAYER` families."""
    return make_backbone_one_layer(family) if family in ONE_LAYER else make_backbone(family)


def outputs_and_gradients(adapters, backbone, packed, real):
    """Each adapter's outputs on the real tokens and gradients, all in one
    jitted program (one XLA compilation a family instead of one an
    adapter), and how many kernel calls tracing each adapter made."""
    fixed = [v.value for v in backbone.non_trainable_variables]
    calls = []

    def loss(adapter, weights):
        out, _ = adapter.stateless_call(weights, fixed, packed)
        out = out["sequence_output"]
        return (jax.numpy.sin(out) * real[..., None]).sum(), out

    def step(weights):
        result = []
        for adapter in adapters:
            CALLS.clear()
            result.append(jax.value_and_grad(functools.partial(loss, adapter),
                                             has_aux=True)(weights))
            calls.append(len(CALLS))
        return result

    result = jax.jit(step)([v.value for v in backbone.trainable_variables])
    return [(np.asarray(out)[real], [np.asarray(g) for g in grads])
            for (_, out), grads in result], calls


def check(family):
    """Raises unless `family`'s flash adapter equals its dense one (or, for
    the relative-position families, is refused by name); "<family>:segmented"
    runs `check_segmented`."""
    if family.endswith(":segmented"):
        return check_segmented(family.partition(":")[0])
    backbone = backbone_of(family)
    packed = pack_examples(examples(family), LENGTH, max_sequences_per_pack=5)
    real = packed["sequence_ids"] > 0
    if family in ("deberta_v3", "xlnet"):
        try:  # Refused when called (the run-time exactness probe, which
            # compiles keras-hub's model first, would refuse it the same way).
            from_keras_hub(backbone, attention_implementation="flash",
                           check_exact=False)(packed)
        except TfpackError as error:
            assert "per-row attention bias" in str(error), error
            return
        raise AssertionError(f"{family}: flash was not refused")
    # This run compares flash with dense itself, outputs and gradients: the
    # run-time exactness check (tests/testing/test_exactness.py runs it on
    # JAX) would compile every family twice more (10-40 s each).
    dense, flash = (from_keras_hub(backbone, attention_implementation=name,
                                   check_exact=False)
                    for name in ("dense", "flash"))
    assert flash.implementation(LENGTH) == "flash"
    assert (len(flash.layers()) == 1) == (family in ONE_LAYER), family
    [(want, want_grads), (got, got_grads)], calls = outputs_and_gradients(
        (dense, flash), backbone, packed, real)
    assert calls[0] == 0 < calls[1], (family, calls)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5,
                               err_msg=family)
    assert len(got_grads) == len(want_grads) > 0
    # Gemma 4's expert routing amplifies float32 rounding: its segmented
    # gradients differ from dense by as much (up to 9e-4 on its expert
    # projections, more than flash's in every variable, measured).
    tolerance = 5e-3 if family.startswith("gemma4") else 1e-4
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, atol=tolerance, rtol=tolerance,
                                   err_msg=family)


# Every family is checked, a failure printed with its traceback (stderr) and
# the run going on: "<family> ok" or "<family> FAILED" a line each, then "ok"
# when all passed.
failed = []
for family in sys.argv[1:]:
    try:
        check(family)
    except Exception:  # noqa: BLE001 - reported, and the exit status says it
        traceback.print_exc()
        print(family, "FAILED", flush=True)
        failed.append(family)
    else:
        print(family, "ok", flush=True)
if failed:
    sys.exit(f"failed: {' '.join(failed)}")
print("ok")
