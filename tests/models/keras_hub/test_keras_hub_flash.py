"""`attention_implementation="flash"` in every keras-hub decoder family on JAX.

One subprocess runs every group (`flash_families_jax_run.py`, Pallas
interpret mode on the CPU) and each test reads its group's families: the
adapter with flash equals the same backbone with dense attention, outputs (1e-5) and gradients (1e-4, after the layers
and a sine; one layer in the families whose layers are alike), under jit; DeBERTa and XLNet (per-row relative-position bias)
are refused by name. Sliding windows (Mistral, Gemma), soft caps (Gemma),
sink logits (GPT-OSS) and ALiBi (BLOOM, Falcon) run in the kernel. Qwen2,
Qwen3 and Qwen3 MoE keep their sliding window in every implementation
(keras-hub's Qwen attention drops it on JAX, where it calls the fused
kernel; the exactness check then compares with the adapter's packs of one,
`keras_hub_known_wrong`).
Gemma 4's gradients get 5e-3: its expert routing amplifies rounding, and its
segmented gradients differ from dense by as much.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from jax_env import jax_env

HERE = pathlib.Path(__file__).resolve().parent
GROUPS = {
    "llama_sinks_alibi": ("llama", "gpt_oss", "bloom", "falcon"),
    "windows_soft_caps": ("mistral", "gemma", "gemma3", "gemma4"),
    "learned_positions": ("gpt2", "opt", "gpt_neo_x", "phi3", "phi3_su"),
    "grouped_and_experts": ("qwen2", "llama3", "qwen3", "mixtral", "qwen_moe",
                            "qwen3_moe", "smollm3"),
    "refused": ("deberta_v3", "xlnet"),
}
# Segmented attention against dense under jit, in the same subprocess:
# test_segmented_decoders_equal_dense_on_jax_under_jit.
SEGMENTED = ("mistral:segmented", "gemma:segmented")


@pytest.fixture(scope="module")
def flash_run():
    """One subprocess for every group (imports and compilations shared, about
    6 s of CPU a process; `--dist loadfile` ran the groups' processes on one
    worker anyway): `(the family lines it printed, its stderr)`."""
    pytest.importorskip("jax")
    root = str(HERE.parents[2])
    path = os.pathsep.join([root, str(HERE), str(HERE.parents[1])])
    families = [family for group in sorted(GROUPS) for family in GROUPS[group]]
    families += SEGMENTED
    done = subprocess.run(
        [sys.executable, str(HERE / "flash_families_jax_run.py"), *families],
        env=jax_env(PYTHONPATH=path), cwd=HERE, capture_output=True, text=True,
        timeout=1800)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 or any(line.endswith(" FAILED") for line in lines), \
        done.stderr[-4000:]
    assert (done.returncode == 0) == (lines[-1:] == ["ok"]), done.stdout
    return set(lines), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_flash_families_equal_dense_on_jax(group, flash_run):
    lines, stderr = flash_run
    for family in GROUPS[group]:
        assert f"{family} ok" in lines, (family, stderr[-4000:])


def test_segmented_decoders_equal_dense_on_jax_under_jit(flash_run):
    """Segmented attention in the keras-hub decoder adapters equals dense on
    JAX under jit, outputs and gradients (`check_segmented` in
    flash_families_jax_run.py: Mistral through jax.nn.dot_product_attention
    with `local_window_size`, Gemma's einsum path with its soft cap); it
    shares the flash check's subprocess (the backend is fixed when Keras
    loads; a process of its own cost its imports and backbones again). The
    TensorFlow tests of segmented decoders: test_keras_hub_decoder_attention.py."""
    lines, stderr = flash_run
    for name in SEGMENTED:
        assert f"{name} ok" in lines, (name, stderr[-4000:])
