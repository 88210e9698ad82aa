"""`attention_implementation="flash"` in tfpack's own models.

On JAX (a subprocess, Pallas interpret mode on the CPU) the encoder and the
decoder equal dense attention with the same weights, outputs and gradients
to 1e-5; the TensorFlow backend refuses "flash" with one error; "auto" never
picks it without device measurements.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from jax_env import jax_env
from tfpack import models
from tfpack.errors import TfpackError
from tfpack.layers import PackedSelfAttention
from tfpack.layers.attention_implementation import choose_implementation

HERE = pathlib.Path(__file__).resolve().parent


def test_tensorflow_refuses_flash():
    with pytest.raises(TfpackError, match=r"JAX backend only.*"
                       r"Received: attention_implementation='flash', "
                       r"backend='tensorflow'"):
        PackedSelfAttention(num_heads=2, hidden_dim=8,
                            attention_implementation="flash")
    with pytest.raises(TfpackError, match=r"backend='tensorflow'"):
        models.DecoderBackbone(vocabulary_size=30, num_layers=1, hidden_dim=8,
                               num_heads=2, intermediate_dim=16,
                               attention_implementation="flash")


@pytest.mark.parametrize("device", ["cpu", "gpu", "tpu"])
@pytest.mark.parametrize("length", [512, 4096, 32768])
def test_auto_never_picks_flash_without_measurements(device, length):
    for backend in ("jax", "tensorflow"):
        chosen = choose_implementation(
            "auto", backend=backend, length=length, max_sequences_per_pack=64,
            segment_length=512, device=device)
        assert chosen in ("dense", "segmented")


@pytest.mark.slow
def test_flash_models_equal_dense_on_jax():
    pytest.importorskip("jax")
    root = HERE.parents[1]
    done = subprocess.run(
        [sys.executable, str(HERE / "flash_models_jax_run.py")],
        env=jax_env(PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")])),
        cwd=root, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("ok"), done.stdout
