"""`tfpack export --model FILE.keras`: default directory, JSON output, stated sizes, errors."""

import json
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack import models
from tfpack.cli import main


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    keras.utils.set_random_seed(0)
    encoder = models.BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2,
                                 intermediate_dim=16, max_sequence_length=8, dropout=0.0,
                                 attention_dropout=0.0)
    model = models.BertClassifier(encoder, 2, dropout=0.0)
    features = {"input_ids": np.array([[2, 5, 3, 4, 6, 0, 0, 0]], np.int32),
                "sequence_ids": np.array([[1, 1, 1, 2, 2, 0, 0, 0]], np.int32),
                "position_ids": np.array([[0, 1, 2, 0, 1, 0, 0, 0]], np.int32),
                "token_type_ids": np.zeros((1, 8), np.int32),
                "cls_positions": np.array([[0, 3]], np.int32),
                "sequence_mask": np.array([[1.0, 1.0]], np.float32)}
    logits = model(features)["logits"].numpy()
    path = tmp_path_factory.mktemp("model") / "classifier.keras"
    model.save(path)
    return str(path), features, logits


def test_exports_a_keras_file_to_saved_models(keras_file, tmp_path, monkeypatch, capsys):
    path, features, logits = keras_file
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--model", path, "--json", "--max-length", "8",
                 "--max-sequences-per-pack", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["saved_model"] == str(tmp_path / "saved_models" / "classifier")
    served = tf.saved_model.load(result["saved_model"]).signatures["serving_default"]
    out = served(**{k: tf.constant(v) for k, v in features.items()})
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=1e-5)


def _status(argv) -> int:
    """The exit status of ``tfpack ARGV``: a usage error of argparse (a declared type's
    refusal, `tfpack.params`) is SystemExit(2), a `TfpackError` main's return of 2."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


@pytest.mark.parametrize("argv, message", [
    (["export", "--model", "/nonexistent.keras"],
     r"`--model` must be a path to an existing regular file"),
    (["export", "--run", "/nonexistent-run"], r"`--run` must be a path to an existing directory"),
    (["export", "--run", "/"], r"`--run` must be a `tfpack train` output"),
])
def test_bad_input_exits_2(argv, message, capsys):
    assert _status(argv) == 2
    assert message.replace("\\", "") in capsys.readouterr().err or pytest.fail(message)


def test_unwritable_output_exits_2(keras_file, capsys):
    assert _status(["export", "--model", keras_file[0], "--output",
                    "/proc/tfpack-cli-test/model"]) == 2
    assert "/proc is not a writable folder" in capsys.readouterr().err


def test_untrained_model_without_sizes_exits_2_naming_the_flags(keras_file, tmp_path, capsys):
    # The .keras model was only called once (at L=8): that is no evidence of its shapes.
    assert main(["export", "--model", keras_file[0], "--output", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"tfpack export: error: The served pack shapes must be known: pass "
                        r"`max_length=` \(CLI --max-length\), `max_sequences_per_pack=` "
                        r"\(CLI --max-sequences-per-pack\) .*\n", err), err
    assert not os.path.exists(tmp_path / "m")


def test_output_holding_other_files_exits_2_untouched(keras_file, tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "log.jsonl").write_text("{}")
    assert main(["export", "--model", keras_file[0], "--output", str(tmp_path / "run"),
                 "--max-length", "8", "--max-sequences-per-pack", "2"]) == 2
    assert "(nothing is deleted)" in capsys.readouterr().err
    assert os.listdir(tmp_path / "run") == ["log.jsonl"]


def test_run_without_checkpoint_exits_2(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({
        "vocab_size": 20, "layers": 1, "hidden": 8, "heads": 2, "intermediate": 16,
        "dropout": 0.0, "mixed_precision": "float32",
        "element_spec": {"input_ids": [[8], "int32"], "sequence_ids": [[8], "int32"],
                         "position_ids": [[8], "int32"], "token_type_ids": [[8], "int32"],
                         "masked_lm_positions": [[2], "int32"], "cls_positions": [[2], "int32"],
                         "sequence_mask": [[2], "float32"]}}))
    assert main(["export", "--run", str(run)]) == 2
    assert "`--run` must hold a checkpoint" in capsys.readouterr().err
    assert not os.path.exists("saved_models/run")
