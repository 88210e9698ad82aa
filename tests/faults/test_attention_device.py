"""Fault injection, `"auto"` attention and the device a model runs on (issue 23).

A model built and saved with `"auto"` on one machine and loaded on another
(a CPU notebook's model trained on a GPU, or back) must decide again where it
runs: the config keeps `"auto"`, never the first machine's choice, and each
trace asks `default_device` of the backend it runs on. At L=2,048, K=8, S=512
(work ratio 1.77) a CPU takes segmented attention, a GPU (threshold 4.0) dense,
a TPU dense.

No GPU here: `default_device` is patched, and a reloaded model's forward pass
is checked to run the path the patched device gets (the implementation handed to
`packed_attention` on each trace).
"""

import keras
import numpy as np
import pytest

import tfpack.layers.self_attention as self_attention
from tfpack.layers import PackedSelfAttention

L, K, S = 2048, 8, 512


def _model():
    ids = keras.Input((L,), dtype="int32", name="sequence_ids")
    x = keras.Input((L, 8), name="x")
    attention = PackedSelfAttention(2, 8, attention_implementation="auto",
                                    max_sequences_per_pack=K, segment_length=S)
    return keras.Model([x, ids], attention(x, sequence_ids=ids))


def _inputs():
    ids = np.repeat(np.arange(1, K + 1), L // K)[None].astype("int32")  # K sequences of 256
    return [np.random.default_rng(0).normal(size=(1, L, 8)).astype("float32"), ids]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("auto") / "model.keras"
    model = _model()
    model.save(path)
    return path, model.predict(_inputs(), verbose=0)


@pytest.mark.parametrize("device, runs", [("cpu", "segmented"), ("gpu", "dense"),
                                          ("tpu", "dense")])
def test_a_loaded_auto_model_decides_on_the_device_it_runs_on(saved, monkeypatch, device, runs):
    path, expected = saved
    monkeypatch.setattr(self_attention, "default_device", lambda backend: device)
    ran = []
    packed_attention = self_attention.packed_attention

    def spy(*args, implementation, **kwargs):
        ran.append(implementation)
        return packed_attention(*args, implementation=implementation, **kwargs)

    monkeypatch.setattr(self_attention, "packed_attention", spy)
    model = keras.saving.load_model(path)
    layer = next(l for l in model.layers if isinstance(l, PackedSelfAttention))
    assert layer.get_config()["attention_implementation"] == "auto"
    assert layer.implementation_for(L) == runs
    got = model.predict(_inputs(), verbose=0)
    assert ran and set(ran) == {runs}, ran
    # Either path computes the same attention (float32 sums in another order).
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device, runs", [("cpu", "segmented"), ("gpu", "dense"),
                                          ("tpu", "dense")])
def test_a_keras_hub_adapter_saved_with_auto_decides_where_it_is_loaded(tmp_path, monkeypatch,
                                                                        device, runs):
    pytest.importorskip("keras_hub")
    import sys
    from pathlib import Path

    import tfpack.models.keras_hub.base as base
    from tfpack.models import from_keras_hub

    sys.path.insert(0, str(Path(__file__).parents[1] / "models" / "keras_hub"))
    from keras_hub_helpers import make_backbone

    adapter = from_keras_hub(make_backbone("llama"), max_sequences_per_pack=K, segment_length=S)
    path = tmp_path / "adapter.keras"
    adapter.save(path)
    monkeypatch.setattr(base, "default_device", lambda backend: device)
    for clone in (type(adapter).from_config(adapter.get_config()),
                  keras.saving.load_model(path)):
        assert clone.get_config()["attention_implementation"] == "auto"
        assert clone.implementation(L) == runs
