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
@pytest.mark.parametrize("length", [512, 2048, 4096, 32768])
def test_auto_picks_flash_only_where_measured_faster(device, length):
    # Measured: JAX on an H200, faster than dense and segmented from L=4,096
    # (BENCHMARKS.md); the CPU runs it in interpret mode, TPUs are unmeasured,
    # TensorFlow has no kernel.
    for backend in ("jax", "tensorflow"):
        chosen = choose_implementation(
            "auto", backend=backend, length=length, max_sequences_per_pack=64,
            segment_length=512, device=device)
        measured = backend == "jax" and device == "gpu" and length >= 4096
        assert (chosen == "flash") == measured, (backend, device, length)


def test_auto_flash_only_for_layers_that_can_run_it(monkeypatch):
    """A layer with attention dropout, a family with a per-row bias or
    without a checked flash path, and a pair's attentions keep the
    work-ratio rule on a GPU: "auto" never picks what the layer refuses."""
    import keras
    import keras_hub

    from tfpack.layers import self_attention
    from tfpack.models.keras_hub import base
    from tfpack.models.keras_hub.base import KerasHubCausalBackbone

    llama = keras_hub.models.LlamaBackbone(
        vocabulary_size=30, num_layers=1, num_query_heads=2,
        num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)
    adapter = models.from_keras_hub(llama, max_sequences_per_pack=32,
                                    segment_length=512)
    # The rule as JAX on a GPU would run it (pure: backend and device in).
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    for module in (self_attention, base):
        monkeypatch.setattr(module, "default_device", lambda backend: "gpu")
    for dropout, want in ((0.0, "flash"), (0.1, "dense")):
        layer = PackedSelfAttention.__new__(PackedSelfAttention)
        layer.__dict__.update(attention_implementation="auto", dropout=dropout,
                              max_sequences_per_pack=32, segment_length=512)
        assert layer.implementation_for(4096) == want

    families = {cls.__name__: cls for cls in _subclasses(base.KerasHubBackbone)}
    checked = {name for name, cls in families.items()
               if issubclass(cls, KerasHubCausalBackbone)} - {
                   "KerasHubQwen3_5", "KerasHubRWKV7"}
    for name, cls in families.items():
        assert cls.flash_kernel == (name in checked), name
    assert adapter.implementation(4096) == "flash"
    llama.dropout = 0.1
    assert adapter.implementation(4096) == "dense"


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


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
