"""Export never deletes what it did not write; replacing a tfpack SavedModel is atomic;
leftovers of an interrupted export are cleaned up by the next one."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from export_helpers import served_ids_shape
from tfpack import models
from tfpack.errors import TfpackError
from tfpack.export import export_saved_model, paths
from tfpack.formats import outputs

L = 8


@pytest.fixture(scope="module")
def model():
    return models.CausalLM(vocabulary_size=11, num_layers=1, hidden_dim=8, num_heads=2,
                           intermediate_dim=16, max_sequence_length=L)


@pytest.fixture(scope="module")
def exported(model, tmp_path_factory):
    """One export for the tests that start from an existing one: each replaces a copy."""
    return export_saved_model(model, tmp_path_factory.mktemp("first") / "m", max_length=L)


def _existing(exported, tmp_path):
    """A copy of the module's export at ``tmp_path/m``, its files' sizes and times kept
    (`shutil.copytree` copies with `copy2`), so every file is still one tfpack wrote."""
    return str(shutil.copytree(exported, tmp_path / "m", symlinks=True))


def _marker(path):
    with open(os.path.join(path, paths.MARKER)) as f:
        return json.load(f)


@pytest.mark.parametrize("content", ["a user's file", "a training run"])
def test_foreign_directory_is_refused_untouched(tmp_path, model, content):
    target = tmp_path / "out"
    (target / "checkpoints").mkdir(parents=True)
    (target / "notes.txt").write_text(content)
    with pytest.raises(TfpackError, match=r"must be a new or empty directory or a tfpack "
                                          r"SavedModel \(nothing is deleted\). Received: "
                                          r"path=.*out \(a directory holding checkpoints, "
                                          r"notes.txt\)"):
        export_saved_model(model, target, max_length=L)
    assert sorted(os.listdir(target)) == ["checkpoints", "notes.txt"]
    assert (target / "notes.txt").read_text() == content
    assert os.listdir(tmp_path) == ["out"]


def test_a_file_is_refused(tmp_path, model):
    (tmp_path / "f").write_text("x")
    with pytest.raises(TfpackError, match=r"`path` must be a new or replaceable directory path.*"
                                          r"Received: path=.*/f' \(an existing entry of another"):
        export_saved_model(model, tmp_path / "f", max_length=L)
    assert (tmp_path / "f").read_text() == "x"


def test_replaces_a_tfpack_saved_model_and_leaves_nothing_else(tmp_path, model, exported):
    path = _existing(exported, tmp_path)
    with pytest.raises(TfpackError, match=r"must not hold a SavedModel when overwrite=False"):
        export_saved_model(model, path, max_length=L - 1, overwrite=False)
    assert _marker(path)["lengths"] == {"L": L}
    export_saved_model(model, path, max_length=L - 1)
    assert _marker(path)["lengths"] == {"L": L - 1}
    assert os.listdir(tmp_path) == ["m"]
    # The new export's signature, from saved_model.pb (no restore of the model to read it).
    assert served_ids_shape(path) == [-1, L - 1]


def test_replacing_without_atomic_exchange_still_ends_complete(tmp_path, model, exported,
                                                                monkeypatch):
    path = _existing(exported, tmp_path)
    monkeypatch.setattr(outputs, "_exchange", lambda a, b: False)  # the one swap, shared with pack
    export_saved_model(model, path, max_length=L - 2)
    assert _marker(path)["lengths"] == {"L": L - 2} and os.listdir(tmp_path) == ["m"]


def test_leftovers_of_an_interrupted_export_are_cleaned_up(tmp_path, model, exported):
    path = _existing(exported, tmp_path)
    # A crash while writing left a partial directory; one between the two fallback
    # renames left the previous export aside and none at the path.
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    token = "0123456789abcdef"
    partial = tmp_path / f".tfpack-export-partial-m-{dead}-{token}"
    partial.mkdir()
    (partial / "saved_model.pb").write_text("")
    (partial / ".tfpack-owner.json").write_text(json.dumps({"pid": int(dead), "token": token}))
    os.rename(path, tmp_path / f".tfpack-export-old-m-{dead}-{'a' * 16}")
    assert paths.prepare(path, overwrite=True) == path
    assert os.listdir(tmp_path) == ["m"] and paths.is_tfpack_saved_model(path)


def test_failure_while_saving_keeps_the_previous_export(tmp_path, model, exported, monkeypatch):
    path = _existing(exported, tmp_path)
    before = sorted(os.listdir(path))

    def broken_save(*args, **kwargs):
        os.makedirs(args[1], exist_ok=True)
        open(os.path.join(args[1], "partial"), "w").close()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tf.saved_model, "save", broken_save)
    with pytest.raises(TfpackError, match=r"No space left on device"):
        export_saved_model(model, path, max_length=L)
    assert sorted(os.listdir(tmp_path)) == ["m"] and sorted(os.listdir(path)) == before


def test_unwritable_path_is_a_clear_error_and_leaves_nothing(tmp_path, model):
    with pytest.raises(TfpackError, match=r"`path` must be a new .* in a writable folder or None. "
                                          r"Received: path=.*/model' \(/proc is not a writable"):
        export_saved_model(model, "/proc/tfpack-export-test/model", max_length=L)
    (tmp_path / "file").write_text("x")
    with pytest.raises(TfpackError, match=r"writable folder or None. Received: path=.*/file/model'"):
        export_saved_model(model, tmp_path / "file" / "model", max_length=L)
    assert os.listdir(tmp_path) == ["file"]


def test_an_empty_directory_is_used(tmp_path, model):
    (tmp_path / "m").mkdir()
    export_saved_model(model, tmp_path / "m", max_length=L)
    assert paths.is_tfpack_saved_model(str(tmp_path / "m"))
    shutil.rmtree(tmp_path / "m")


def test_replacing_an_export_keeps_the_users_files_and_serves_the_warmup_file(tmp_path, model,
                                                                             exported):
    path = _existing(exported, tmp_path)
    warmup = os.path.join(path, "assets.extra", "tf_serving_warmup_requests")
    with tf.io.TFRecordWriter(warmup) as writer:  # what TensorFlow Serving replays at load
        writer.write(b"request-1")
    with open(os.path.join(path, "NOTES.md"), "w") as f:
        f.write("my notes")
    os.makedirs(os.path.join(path, "variables", "mine"))
    before = {"NOTES.md": b"my notes", os.path.join("assets.extra", "tf_serving_warmup_requests"):
              open(warmup, "rb").read()}
    export_saved_model(model, path, max_length=L - 1)
    assert _marker(path)["lengths"] == {"L": L - 1}
    for rel, data in before.items():
        assert open(os.path.join(path, rel), "rb").read() == data
    assert os.path.isdir(os.path.join(path, "variables", "mine"))
    loaded = tf.saved_model.load(path)  # the new model loads with the user's files beside it
    assert "serving_default" in loaded.signatures
    assert [r.numpy() for r in tf.data.TFRecordDataset(warmup)] == [b"request-1"]
    assert sorted(os.listdir(tmp_path)) == ["m"]
    # A user's file where the new export writes its own: refused, nothing changed.
    os.remove(os.path.join(path, "fingerprint.pb"))
    with open(os.path.join(path, "fingerprint.pb"), "w") as f:
        f.write("mine")
    with pytest.raises(TfpackError, match=r"must not replace a file it did not write.*"
                                          r"'fingerprint.pb'"):
        export_saved_model(model, path, max_length=L)
    assert open(os.path.join(path, "fingerprint.pb")).read() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["m"]


def test_an_export_through_a_symlink_keeps_the_link(tmp_path, model):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    export_saved_model(model, tmp_path / "link", max_length=L)
    export_saved_model(model, tmp_path / "link", max_length=L - 1)
    assert os.path.islink(tmp_path / "link") and _marker(tmp_path / "real")["lengths"] == {
        "L": L - 1}
    assert sorted(os.listdir(tmp_path)) == ["link", "real"]
