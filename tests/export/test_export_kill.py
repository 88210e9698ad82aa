"""`kill -9` a `tfpack export` that replaces a previous export, at random points of the write:
the path always holds a complete SavedModel (the old or the new) that loads and gives the
Keras model's outputs; the next export cleans up what the killed one left."""

import os
import random
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from tests.faults.inprocess import run_cli_here
from tfpack import models
from tfpack.export import paths
from unused_imports import with_site

V = 20


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": with_site(os.pathsep.join(sys.path))}


def _export(keras_file, output, length):
    """``tfpack export`` argv: the exports that are not killed run in this process (a
    process start imports TensorFlow again), the killed ones in their own."""
    return ["export", "--model", str(keras_file), "--output", str(output),
            "--max-length", str(length), "--max-sequences-per-pack", "2"]


def _check(path, model):
    """A complete tfpack SavedModel whose outputs are the Keras model's."""
    assert paths.is_tfpack_saved_model(str(path))
    served = tf.saved_model.load(str(path)).signatures["serve_sequences"]
    ids = np.array([[2, 5, 3, 4], [6, 7, 0, 0]], np.int32)
    got = served(input_ids=tf.constant(ids), lengths=tf.constant([4, 2]))["logits"].numpy()
    for i, n in enumerate((4, 2)):
        alone = {"input_ids": ids[i:i + 1, :n], "sequence_ids": np.ones((1, n), np.int32),
                 "position_ids": np.arange(n, dtype=np.int32)[None],
                 "token_type_ids": np.zeros((1, n), np.int32),
                 "cls_positions": np.zeros((1, 2), np.int32),
                 "sequence_mask": np.array([[1.0, 0.0]], np.float32)}
        np.testing.assert_allclose(got[i], model(alone)["logits"].numpy()[0, 0], atol=1e-5)


def test_killed_export_leaves_the_old_or_the_new_saved_model(tmp_path):
    keras.utils.set_random_seed(0)
    encoder = models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                                 intermediate_dim=16, max_sequence_length=8, dropout=0.0,
                                 attention_dropout=0.0)
    model = models.BertClassifier(encoder, 2, dropout=0.0)
    model({"input_ids": np.ones((1, 4), np.int32), "sequence_ids": np.ones((1, 4), np.int32),
           "position_ids": np.arange(4, dtype=np.int32)[None],
           "token_type_ids": np.zeros((1, 4), np.int32),
           "cls_positions": np.zeros((1, 2), np.int32),
           "sequence_mask": np.array([[1.0, 0.0]], np.float32)})  # Built: weights saved.
    model.save(tmp_path / "m.keras")
    out = tmp_path / "served"
    first = run_cli_here(*_export(tmp_path / "m.keras", out, 8))
    assert first.returncode == 0, first.stderr[-2000:]
    rng = random.Random(0)
    for attempt in range(2):
        process = subprocess.Popen([sys.executable, "-m", "tfpack.cli",
                                    *_export(tmp_path / "m.keras", out, 6 + attempt)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=_env())
        deadline = time.monotonic() + 240
        while process.poll() is None and time.monotonic() < deadline and not [
                n for n in os.listdir(tmp_path) if "tfpack-export-partial" in n]:
            time.sleep(0.02)  # Until the new SavedModel is being written.
        try:  # a process done sooner is not waited for
            process.wait(timeout=rng.uniform(0.0, 0.6))
        except subprocess.TimeoutExpired:
            pass
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        _check(out, model)
    last = run_cli_here(*_export(tmp_path / "m.keras", out, 8))
    assert last.returncode == 0, last.stderr[-2000:]
    _check(out, model)
    assert sorted(os.listdir(tmp_path)) == ["m.keras", "served"]
