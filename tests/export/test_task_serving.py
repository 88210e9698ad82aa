"""TextEmbedder, TokenClassifier and QuestionAnswerer SavedModels answer unpacked requests
(`serve_sequences`: token ids and lengths) per example, in request order, through
`saved_model_cli run` (the TF1 session loader, as TensorFlow Serving)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from export_helpers import unpacked
from tfpack.export import export_saved_model
from tfpack.models import BertEncoder, QuestionAnswerer, TextEmbedder, TokenClassifier
from unused_imports import with_site

SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")
L, K = 16, 3
ROWS = [[2, 5, 7, 9, 3], [2, 8, 3], [], [2, 4, 4, 6, 11, 12, 13, 3], [2, 3]]  # one empty


def models():
    keras.utils.set_random_seed(0)

    def encoder():
        return BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2,
                           intermediate_dim=16, max_sequence_length=L)

    return {"embedder": TextEmbedder(encoder()),
            "tagger": TokenClassifier(encoder(), 3, dropout=0.0),
            "reader": QuestionAnswerer(encoder())}


@pytest.mark.slow
def test_task_saved_models_serve_unpacked_requests_in_order(tmp_path):
    ids = np.zeros((len(ROWS), 10), np.int32)
    for i, row in enumerate(ROWS):
        ids[i, :len(row)] = row
    lengths = np.array([len(r) for r in ROWS], np.int32)
    np.savez(tmp_path / "request.npz", input_ids=ids, lengths=lengths)
    real = [r for r in ROWS if r]
    want, requests = {}, []
    for name, model in models().items():
        features = unpacked(real, L, K)
        want[name] = {k: np.asarray(v) for k, v in model(features, training=False).items()}
        path = export_saved_model(model, tmp_path / name, max_length=L,
                                  max_sequences_per_pack=K)
        requests.append({"saved_model": path, "signature": "serve_sequences",
                         "loader": "saved_model_cli", "inputs": str(tmp_path / "request.npz"),
                         "outputs": str(tmp_path / f"{name}.npz")})
    (tmp_path / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, SERVE, str(tmp_path / "requests.json")],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "PYTHONPATH": with_site("")})
    assert result.returncode == 0, result.stderr[-3000:]
    for name, expected in want.items():
        served = dict(np.load(tmp_path / f"{name}.npz"))
        np.testing.assert_array_equal(served["sequence_mask"], [1, 1, 0, 1, 1])
        real_index = 0
        for i, row in enumerate(ROWS):
            for output, value in expected.items():
                got = served[output][i]
                if not row:  # An empty request row: zeros, no pack.
                    assert not np.any(got), (name, output)
                    continue
                if value.ndim >= 2 and value.shape[1] == L:  # per token
                    np.testing.assert_allclose(got[:len(row)], value[real_index][:len(row)],
                                               atol=1e-5, err_msg=f"{name} {output}")
                    assert not np.any(got[len(row):])
                else:  # per sequence
                    np.testing.assert_allclose(got, value[real_index, 0], atol=1e-5,
                                               err_msg=f"{name} {output}")
            real_index += bool(row)
