"""SavedModels served by TensorFlow's own clients in a fresh process (no tfpack):
`tf.saved_model.load` and `saved_model_cli run` (TF1 session loader, as TensorFlow Serving),
on every signature. Packed features give the Keras model's outputs; unpacked sequences are
packed in the graph and give each sequence the outputs of the Keras model on that sequence
alone, in the caller's order; empty rows give zeros with a mask saying so."""

import functools
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from export_helpers import served_ids_shape, signature_defs, unpacked
from tfpack import models
from tfpack.errors import TfpackError
from tfpack.export import export_saved_model
from unused_imports import with_site

L, K, M, V = 16, 3, 4, 23
SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")
# An empty row, and 0 as a real token inside a row (a causal LM's id 0 is a token).
SEQUENCES = [[2, 5, 7], [9, 4, 4, 4, 1, 3, 8], [6, 0, 6], [], [3, 1, 2, 2, 5], [7],
             [8, 9, 10, 11]]
LOADERS = ("tf2", "saved_model_cli")


def _encoder():
    return models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                              attention_dropout=0.0)


def _unpacked(rows):
    """Each sequence alone in its pack (the unpacked reference)."""
    return unpacked(rows, L, K, max_predictions=M)


def _packed():
    """Two packs: [seq0, seq1, seq2] and [seq4, seq5]."""
    f = {k: np.zeros((2, L), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    f["cls_positions"] = np.zeros((2, K), np.int32)
    f["sequence_mask"] = np.zeros((2, K), np.float32)
    f["masked_lm_positions"] = np.array([[1, 4, 0, 0], [0, 2, 3, 0]], np.int32)
    for p, members in enumerate(([0, 1, 2], [4, 5])):
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


def _padded(rows, pad):
    out = np.full((len(rows), max(map(len, rows)) + 2), pad, np.int32)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def _call(model, features):
    return {k: np.asarray(v) for k, v in model(
        {k: tf.constant(v) for k, v in features.items() if k in model.input_features},
        training=False).items()}


def _requests(root, name, path, inputs_by_signature):
    requests = []
    for signature, inputs in inputs_by_signature.items():
        np.savez(root / f"{name}-{signature}-in.npz", **inputs)
        for loader in LOADERS:
            requests.append({"saved_model": path, "signature": signature, "loader": loader,
                             "key": [name, signature, loader],
                             "inputs": str(root / f"{name}-{signature}-in.npz"),
                             "outputs": str(root / f"{name}-{signature}-{loader}.npz")})
    return requests


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Export three models (never called before: sizes stated), serve every request in ONE
    fresh process, through both loaders."""
    root = tmp_path_factory.mktemp("export")
    keras.utils.set_random_seed(0)
    built = {
        "pretrainer": models.BertPretrainer(_encoder()),
        "classifier": models.BertClassifier(_encoder(), 2, dropout=0.0),
        "causal_lm": models.CausalLM(vocabulary_size=V, num_layers=1, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16, max_sequence_length=L),
    }
    lengths = np.array(list(map(len, SEQUENCES)), np.int32)
    types = _padded([[0] * (len(r) - 1) + [1] if r else [] for r in SEQUENCES], 0)
    requests, expected = [], {}
    for name, model in built.items():
        padding = 0 if name == "classifier" else None
        path = export_saved_model(model, root / name, max_length=L, max_sequences_per_pack=K,
                                  max_predictions_per_pack=M, padding_id=padding)
        expected[name, "serving_default"] = _call(model, _packed())
        expected[name, "sequences"] = _call(model, _unpacked(SEQUENCES))
        with_types = _unpacked(SEQUENCES)
        with_types["token_type_ids"][:, :types.shape[1]] = types
        expected[name, "with_types"] = _call(model, with_types)
        signatures = {
            "serving_default": {k: v for k, v in _packed().items() if k in model.input_features},
            # Padding after each length is ignored, whatever its id.
            "serve_sequences": {"input_ids": _padded(SEQUENCES, 13), "lengths": lengths},
            "serve_sequences_with_token_types": {
                "input_ids": _padded(SEQUENCES, 13), "lengths": lengths,
                "token_type_ids": types},
        }
        if padding is not None:
            signatures["serve_padded_sequences"] = {"input_ids": _padded(SEQUENCES, 0)}
        requests += _requests(root, name, path, signatures)
    (root / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, SERVE, str(root / "requests.json")],
                            capture_output=True, text=True, timeout=240,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "PYTHONPATH": with_site("")})
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = {tuple(r["key"]): dict(np.load(r["outputs"])) for r in requests}
    return outputs, expected, root


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("name", ["pretrainer", "classifier", "causal_lm"])
def test_serving_default_matches_keras(served, name, loader):
    outputs, expected, _ = served
    got, want = outputs[name, "serving_default", loader], expected[name, "serving_default"]
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-5, rtol=1e-5)


def _check_sequence_outputs(got, want, key):
    """Row i == the Keras model on sequence i alone; the empty row is zeros, masked 0."""
    n = len(SEQUENCES)
    assert got["sequence_mask"].tolist() == [float(len(r) > 0) for r in SEQUENCES]
    assert got["pack_index"].shape == (n,) and got["pack_index"][3] == -1
    assert got["pack_index"].max() + 1 < n - 1  # It really packed.
    for i, row in enumerate(SEQUENCES):
        if not row:
            assert not got[key][i].any()
        elif got[key].ndim == 2:  # Per sequence: slot 0 of the sequence alone.
            np.testing.assert_allclose(got[key][i], want[key][i, 0], atol=1e-5)
        else:  # Per token: the sequence's tokens, zeros after them.
            np.testing.assert_allclose(got[key][i, :len(row)], want[key][i, :len(row)],
                                       atol=1e-5)
            assert not got[key][i, len(row):].any()
            assert got["token_mask"][i].tolist() == [float(t < len(row))
                                                     for t in range(got[key].shape[1])]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("name, key", [("pretrainer", "nsp_logits"), ("classifier", "logits"),
                                       ("causal_lm", "logits")])
def test_serve_sequences_gives_each_sequence_its_own_outputs(served, name, key, loader):
    outputs, expected, _ = served
    got = outputs[name, "serve_sequences", loader]
    assert "mlm_logits" not in got  # needs masked positions: not served unpacked
    _check_sequence_outputs(got, expected[name, "sequences"], key)
    with_types = outputs[name, "serve_sequences_with_token_types", loader]
    _check_sequence_outputs(with_types, expected[name, "with_types"], key)


@pytest.mark.parametrize("loader", LOADERS)
def test_serve_padded_sequences_ends_rows_after_their_last_non_padding_id(served, loader):
    outputs, expected, _ = served
    got = outputs["classifier", "serve_padded_sequences", loader]
    _check_sequence_outputs(got, expected["classifier", "sequences"], "logits")


def test_saved_model_cli_console_script(served):
    """The `saved_model_cli run` command itself, on the classifier's serve_sequences."""
    outputs, _, root = served
    np.save(root / "ids.npy", _padded(SEQUENCES[:3], 0))
    np.save(root / "lengths.npy", np.array([3, 7, 3], np.int32))
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run(
        [cli, "run", "--dir", str(root / "classifier"), "--tag_set", "serve",
         "--signature_def", "serve_sequences", "--outdir", str(root / "cli"),
         "--inputs", f"input_ids={root / 'ids.npy'};lengths={root / 'lengths.npy'}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
             "PYTHONPATH": with_site("")})
    assert result.returncode == 0, result.stderr[-3000:]
    np.testing.assert_allclose(np.load(root / "cli" / "logits.npy"),
                               outputs["classifier", "serve_sequences", "tf2"]["logits"][:3],
                               atol=1e-6)


@pytest.fixture(scope="module")
def loaded(served):
    return tf.saved_model.load(str(served[2] / "classifier")).signatures


@pytest.mark.parametrize("ids, lengths, message", [
    ([[1, 2, -3]], [3], r"input_ids must be >= 0"),
    ([[1, 2, V]], [3], rf"input_ids must be < {V}"),
    ([[1, 2, 3]], [4], r"lengths must be at most the width of input_ids"),
    ([[1, 2, 3]], [-1], r"lengths must be >= 0"),
    ([[1] * (L + 1)], [L + 1], rf"at most max_length={L} tokens"),
    ([[1, 2, 3]], [3, 1], r"lengths must have one entry per row"),
])
def test_bad_requests_are_refused_whole(loaded, ids, lengths, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        loaded["serve_sequences"](input_ids=tf.constant(ids, tf.int32),
                                  lengths=tf.constant(lengths, tf.int32))


def test_bad_token_type_is_refused(loaded):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"token_type_ids must be < 2"):
        loaded["serve_sequences_with_token_types"](
            input_ids=tf.constant([[1, 2]]), token_type_ids=tf.constant([[0, 2]]),
            lengths=tf.constant([2]))


def test_all_rows_empty_gives_zeros(loaded):
    out = loaded["serve_sequences"](input_ids=tf.zeros([2, 3], tf.int32),
                                    lengths=tf.zeros([2], tf.int32))
    assert out["logits"].numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert out["sequence_mask"].numpy().tolist() == [0.0, 0.0]


def _tiny_classifier():
    keras.utils.set_random_seed(0)
    return models.BertClassifier(_encoder(), 2, dropout=0.0)


def _classifier_data(length, packs=4):
    f = _unpacked([[1 + (i + j) % 7 for j in range(3)] for i in range(packs)])
    f = {k: v[:, :length] if v.shape[1] == L else v for k, v in f.items()}
    f["labels"] = np.zeros((packs, K), np.int32)
    return {k: v for k, v in f.items() if k in _tiny_classifier().input_features
            or k == "labels"}


def test_export_serves_at_the_trained_length_not_the_first_call(tmp_path):
    model = _tiny_classifier()
    model(_classifier_data(8))  # A smoke call at L=8 ...
    model.compile(optimizer="sgd")
    model.fit(_classifier_data(L), batch_size=2, epochs=1, verbose=0)  # ... trained at L=16.
    path = export_saved_model(model, tmp_path / "m")
    assert served_ids_shape(path) == [-1, L]
    # The trained shapes travel in .keras files.
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert served_ids_shape(export_saved_model(again, tmp_path / "again")) == [-1, L]


def test_untrained_model_needs_stated_sizes(tmp_path):
    model = _tiny_classifier()
    model(_classifier_data(8))  # Called, but never trained: its shapes are not a guess.
    with pytest.raises(TfpackError, match=r"pass `max_length=` \(CLI --max-length\), "
                                          r"`max_sequences_per_pack=` \(CLI --max-sequences-per-pack\)"):
        export_saved_model(model, tmp_path / "m")
    assert not os.path.exists(tmp_path / "m")


@pytest.mark.parametrize("kwargs, message", [
    ({"max_length": 0}, r"`max_length` must be a positive integer or None. Received: max_length=0"),
    ({"max_length": L + 1, "max_sequences_per_pack": K},
     rf"at most the model's max_sequence_length={L}"),
    ({"max_length": 8, "element_spec": {"input_ids": tf.TensorSpec([L], tf.int32)}},
     r"max_length=8 but element_spec has L=16"),
    ({"max_length": L, "max_sequences_per_pack": K, "padding_id": -1},
     r"`padding_id` must be an integer in \[0, 2147483647\] or None. Received: padding_id=-1"),
])
def test_bad_sizes_are_refused(tmp_path, kwargs, message):
    with pytest.raises(TfpackError, match=message):
        export_saved_model(_tiny_classifier(), tmp_path / "m", **kwargs)


@pytest.fixture(scope="module")
def default_export(tmp_path_factory):
    """One export of a called classifier with no directory given, from a working directory
    of its own; the model's calls during the export counted (one export for both tests)."""
    folder = tmp_path_factory.mktemp("default")
    model = _tiny_classifier()
    model(_classifier_data(8))  # Built: only the export's traces call the model now.
    traced, call = [], type(model).call
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(type(model), "call", functools.wraps(call)(
            lambda self, *args, **kwargs: traced.append(1) or call(self, *args, **kwargs)))
        path = export_saved_model(model, max_length=L, max_sequences_per_pack=K, padding_id=0)
    return folder, model.name, path, traced


def test_export_traces_each_signature_once(default_export):
    """The served functions reach the SavedModel as its signatures only: as attributes of
    the exported object, `tf.saved_model.save` would trace each again and write it twice.
    (The signatures read from saved_model.pb: no `tf.saved_model.load` restoring the model
    to count them.)"""
    _, _, path, traced = default_export
    assert len(traced) == len(signature_defs(path)) == 4


def test_default_directory_is_saved_models(default_export):
    folder, name, path, _ = default_export
    assert path == str(folder / "saved_models" / name)
    assert os.path.exists(os.path.join(path, "saved_model.pb"))
    assert os.listdir(folder / "saved_models") == [name]
