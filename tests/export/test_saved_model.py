"""SavedModels served from a fresh process with `tf.saved_model.load` only (no tfpack):
packed features give the Keras model's outputs; unpacked sequences are packed in the graph
and give each sequence's own outputs, in the caller's order."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack import models
from tfpack.errors import TfpackError
from tfpack.export import export_saved_model

L, K, M, V = 16, 3, 4, 23
SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")
SEQUENCES = [[2, 5, 7], [9, 4, 4, 4, 1, 3, 8], [6, 6], [3, 1, 2, 2, 5], [7], [8, 9, 10, 11]]


def _encoder():
    return models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                              attention_dropout=0.0)


def _unpacked(rows, width=L):
    """Each sequence alone in its pack (the unpacked reference)."""
    n = len(rows)
    f = {k: np.zeros((n, width), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    for i, row in enumerate(rows):
        f["input_ids"][i, :len(row)] = row
        f["sequence_ids"][i, :len(row)] = 1
        f["position_ids"][i, :len(row)] = np.arange(len(row))
    f["cls_positions"] = np.zeros((n, K), np.int32)
    f["sequence_mask"] = np.zeros((n, K), np.float32)
    f["sequence_mask"][:, 0] = 1.0
    f["masked_lm_positions"] = np.zeros((n, M), np.int32)
    return f


def _packed():
    """Two packs: [seq0, seq1, seq2] and [seq3, seq4]."""
    f = {k: np.zeros((2, L), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    f["cls_positions"] = np.zeros((2, K), np.int32)
    f["sequence_mask"] = np.zeros((2, K), np.float32)
    f["masked_lm_positions"] = np.array([[1, 4, 0, 0], [0, 2, 3, 0]], np.int32)
    for p, members in enumerate(([0, 1, 2], [3, 4])):
        start = 0
        for k, i in enumerate(members):
            row = SEQUENCES[i]
            f["input_ids"][p, start:start + len(row)] = row
            f["sequence_ids"][p, start:start + len(row)] = k + 1
            f["position_ids"][p, start:start + len(row)] = np.arange(len(row))
            f["cls_positions"][p, k] = start
            f["sequence_mask"][p, k] = 1.0
            start += len(row)
    return f


def _padded(rows):
    out = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def _call(model, features):
    return {k: np.asarray(v) for k, v in model(
        {k: tf.constant(v) for k, v in features.items()}, training=False).items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Export two models, then serve every request in ONE fresh process.

    (`tests/cli/test_export.py` serves a BertClassifier's `serving_default`.)"""
    root = tmp_path_factory.mktemp("export")
    keras.utils.set_random_seed(0)
    built = {
        "pretrainer": models.BertPretrainer(_encoder()),
        "causal_lm": models.CausalLM(vocabulary_size=V, num_layers=1, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16, max_sequence_length=L),
    }
    packed, padded = _packed(), {"input_ids": _padded(SEQUENCES)}
    requests, expected = [], {}
    for name, model in built.items():
        features = {k: v for k, v in packed.items() if k in model.input_features}
        expected[name, "serving_default"] = _call(model, features)
        path = export_saved_model(model, root / name)
        for signature, inputs in (("serving_default", features), ("serve_sequences", padded)):
            np.savez(root / f"{name}-{signature}-in.npz", **inputs)
            requests.append({"saved_model": path, "signature": signature,
                             "inputs": str(root / f"{name}-{signature}-in.npz"),
                             "outputs": str(root / f"{name}-{signature}-out.npz")})
        single = {k: v for k, v in _unpacked(SEQUENCES).items() if k in model.input_features}
        expected[name, "serve_sequences"] = _call(model, single)
    (root / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, SERVE, str(root / "requests.json")],
                            capture_output=True, text=True, timeout=150,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = {(r["saved_model"].split(os.sep)[-1], r["signature"]): dict(np.load(r["outputs"]))
               for r in requests}
    return outputs, expected


@pytest.mark.parametrize("name", ["pretrainer", "causal_lm"])
def test_serving_default_matches_keras(served, name):
    outputs, expected = served
    got, want = outputs[name, "serving_default"], expected[name, "serving_default"]
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=1e-5)


def test_serve_sequences_pretrainer_gives_each_sequence_its_own_nsp_logits(served):
    outputs, expected = served
    got = outputs["pretrainer", "serve_sequences"]
    assert "mlm_logits" not in got  # needs masked positions: not served unpacked
    assert got["nsp_logits"].shape == (len(SEQUENCES), 2)
    # It really packed: 6 sequences (27 tokens) in fewer packs than sequences.
    assert got["pack_index"].max() + 1 < len(SEQUENCES)
    np.testing.assert_allclose(got["nsp_logits"],
                               expected["pretrainer", "serve_sequences"]["nsp_logits"][:, 0],
                               atol=1e-5)


def test_serve_sequences_causal_lm_per_token(served):
    outputs, expected = served
    got = outputs["causal_lm", "serve_sequences"]["logits"]
    want = expected["causal_lm", "serve_sequences"]["logits"]
    width = max(map(len, SEQUENCES))
    assert got.shape == (len(SEQUENCES), width, V)
    for i, row in enumerate(SEQUENCES):
        np.testing.assert_allclose(got[i, :len(row)], want[i, :len(row)], atol=1e-5)
        assert not got[i, len(row):].any()


def _tiny_classifier():
    keras.utils.set_random_seed(0)
    model = models.BertClassifier(_encoder(), 2, dropout=0.0)
    model({k: tf.constant(v) for k, v in _packed().items() if k in model.input_features})
    return model


def test_default_directory_is_saved_models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _tiny_classifier()
    path = export_saved_model(model)
    assert path == str(tmp_path / "saved_models" / model.name)
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    assert [p for p in os.listdir(tmp_path / "saved_models")] == [model.name]


def test_unwritable_path_is_a_clear_error_and_leaves_nothing(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    # Root writes anywhere on a normal file system, but not into /proc.
    target = locked / "model" if os.access(locked, os.W_OK) is False else None
    try:
        target = target or "/proc/tfpack-export-test/model"
        with pytest.raises(TfpackError, match=r"export path must be in a writable directory. "
                                              r"Received: path=.*/model"):
            export_saved_model(_tiny_classifier(), target)
        assert os.listdir(locked) == [] and not os.path.exists(target)
    finally:
        locked.chmod(0o700)


def test_failed_export_leaves_no_half_written_directory(tmp_path):
    # A file where the directory's parent should be: mkdir fails, nothing is created.
    (tmp_path / "file").write_text("x")
    with pytest.raises(TfpackError, match=r"writable directory. Received: path="):
        export_saved_model(_tiny_classifier(), tmp_path / "file" / "model")
    assert os.listdir(tmp_path) == ["file"]


def test_failure_while_saving_keeps_the_previous_export(tmp_path, monkeypatch):
    model = _tiny_classifier()
    path = export_saved_model(model, tmp_path / "m")
    before = sorted(os.listdir(path))

    def broken_save(*args, **kwargs):
        os.makedirs(args[1])
        open(os.path.join(args[1], "partial"), "w").close()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", broken_save)
    with pytest.raises(TfpackError, match=r"No space left on device"):
        export_saved_model(model, path)
    assert sorted(os.listdir(tmp_path)) == ["m"] and sorted(os.listdir(path)) == before


def test_unbuilt_model_needs_element_spec(tmp_path):
    model = models.BertClassifier(_encoder(), 2)
    with pytest.raises(TfpackError, match=r"`element_spec` must be given"):
        export_saved_model(model, tmp_path / "m")
