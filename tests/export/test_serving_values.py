"""Every signature refuses values outside the model's tables and the pack, by a named assertion,
in TensorFlow's own clients (a fresh `tf.saved_model.load` and `saved_model_cli run`'s TF1
session loader), before the model runs: a negative id would wrap, an id or position past a
table would read another row (or be clamped under XLA) and change the outputs silently."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from export_helpers import unpacked
from tfpack import models
from tfpack.export import export_saved_model
from unused_imports import with_site

pytestmark = pytest.mark.slow  # one fresh serving process, two exports

L, K, V = 12, 3, 23
SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")
LOADERS = ("tf2", "saved_model_cli")
ROWS = [[2, 5, 7], [9, 4, 4, 1]]

# (feature, index in the first request row, bad value, what the message names)
BAD = [
    ("input_ids", (0, 1), -3, "input_ids"),
    ("input_ids", (0, 1), V, "input_ids"),
    ("token_type_ids", (0, 1), 2, "token_type_ids"),
    ("token_type_ids", (0, 1), -1, "token_type_ids"),
    ("position_ids", (0, 1), -1, "position_ids"),
    ("position_ids", (0, 1), L, "position_ids"),
    ("sequence_ids", (0, 1), K + 1, "sequence_ids"),
    ("sequence_ids", (0, 1), -1, "sequence_ids"),
    ("cls_positions", (0, 0), L, "cls_positions"),
    ("cls_positions", (0, 0), -2, "cls_positions"),
    ("sequence_mask", (0, 0), np.nan, "sequence_mask"),
    ("sequence_mask", (0, 1), np.inf, "sequence_mask"),
    ("masked_lm_positions", (0, 0), L, "masked_lm_positions"),
]
# The causal LM reads no per-sequence features: sequence ids are bounded by L.
BAD_LM = [("input_ids", (1, 0), -1, "input_ids"), ("input_ids", (1, 0), V + 5, "input_ids"),
          ("sequence_ids", (0, 2), L + 1, "sequence_ids"),
          ("position_ids", (0, 2), -4, "position_ids")]


# The saved_model_cli loader serves these cases (one of each feature kind), the
# tf.saved_model.load one every case.
CLI_CASES = {"pretrainer-good", "causal_lm-good", "pretrainer-bad-0", "pretrainer-bad-6",
             "pretrainer-bad-4", "pretrainer-bad-10", "causal_lm-bad-2"}


def _request(root, name, path, key, inputs, refused):
    np.savez(root / f"{key}-in.npz", **inputs)
    return [{"saved_model": path, "signature": "serving_default", "loader": loader,
             "refused": refused, "key": [key, loader], "inputs": str(root / f"{key}-in.npz"),
             "outputs": str(root / f"{key}-{loader}.npz")} for loader in LOADERS
            if loader == "tf2" or key in CLI_CASES]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("values")
    keras.utils.set_random_seed(0)
    encoder = models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                                 intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                                 attention_dropout=0.0)
    built = {"pretrainer": (models.BertPretrainer(encoder), BAD),
             "causal_lm": (models.CausalLM(vocabulary_size=V, num_layers=1, hidden_dim=8,
                                           num_heads=2, intermediate_dim=16), BAD_LM)}
    requests, cases = [], {}
    for name, (model, bad) in built.items():
        path = export_saved_model(model, root / name, max_length=L, max_sequences_per_pack=K,
                                  max_predictions_per_pack=2)
        good = {k: v for k, v in unpacked(ROWS, L, K, max_predictions=2).items()
                if k in model.input_features}
        requests += _request(root, name, path, f"{name}-good", good, False)
        for i, (feature, index, value, named) in enumerate(bad):
            inputs = {k: v.copy() for k, v in good.items()}
            inputs[feature][index] = value
            key = f"{name}-bad-{i}"
            cases[key] = (feature, value, named)
            requests += _request(root, name, path, key, inputs, True)
    (root / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, SERVE, str(root / "requests.json")],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "PYTHONPATH": with_site("")})
    assert result.returncode == 0, result.stderr[-3000:]
    return {tuple(r["key"]): dict(np.load(r["outputs"])) for r in requests}, cases


@pytest.mark.parametrize("name", ["pretrainer", "causal_lm"])
@pytest.mark.parametrize("loader", LOADERS)
def test_a_good_request_is_served(served, name, loader):
    outputs, _ = served
    got = outputs[f"{name}-good", loader]
    assert "error" not in got and all(np.isfinite(v).all() for v in got.values())


@pytest.mark.parametrize("key, loader", [
    (key, loader) for key in [f"pretrainer-bad-{i}" for i in range(len(BAD))]
    + [f"causal_lm-bad-{i}" for i in range(len(BAD_LM))]
    for loader in LOADERS if loader == "tf2" or key in CLI_CASES])
def test_a_bad_value_is_refused_by_a_named_assertion(served, key, loader):
    outputs, cases = served
    feature, value, named = cases[key]
    got = outputs[key, loader]
    assert "error" in got, f"{feature}={value} was served: {sorted(got)}"
    message = str(got["error"])
    assert f"`{named}` must hold" in message, message
    assert f"check_{named}" in message or "assertion failed" in message, message
