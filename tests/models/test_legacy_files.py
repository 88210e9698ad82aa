"""`.keras` files saved before the backbone/task split load, or say how to convert them."""

import pathlib
import shutil

import keras
import numpy as np
import pytest

from tfpack import models
from tfpack.errors import TfpackError
from tfpack.testing import next_token_labels, pack_examples

LEGACY = pathlib.Path(__file__).resolve().parent / "legacy"
BERT = [{"input_ids": [2, 5, 6, 3], "masked_lm_positions": [1], "masked_lm_ids": [7],
         "next_sentence_labels": 1, "labels": 1, "token_type_ids": [0, 0, 1, 1]},
        {"input_ids": [2, 8, 3], "masked_lm_positions": [1], "masked_lm_ids": [9],
         "next_sentence_labels": 0, "labels": 0, "token_type_ids": [0, 0, 0]}]
LM = [{"input_ids": ids, "labels": next_token_labels(ids)} for ids in ([3, 4, 5], [6, 7])]


def legacy_features(name):
    return pack_examples(LM if name.startswith("causal") else BERT, max_length=8,
                         max_sequences_per_pack=2)


def _assert_same_outputs(model, name):
    outputs = model(legacy_features(name))
    expected = np.load(LEGACY / f"{name}_outputs.npz")
    assert sorted(outputs) == sorted(expected.files)
    for key in expected.files:
        # Float32 rounding only: the outputs were saved on another CPU, and
        # oneDNN picks kernels (AVX-512, AMX) by the machine.
        np.testing.assert_allclose(np.asarray(outputs[key]), expected[key],
                                   rtol=1e-5, atol=1e-6)


def test_old_encoder_file_loads_as_it_is():
    model = keras.saving.load_model(LEGACY / "bert_encoder.keras")
    assert isinstance(model, models.BertEncoder)
    _assert_same_outputs(model, "bert_encoder")


@pytest.mark.parametrize("name,cls", [
    ("bert_pretrainer", models.BertPretrainer), ("bert_classifier", models.BertClassifier),
    ("causal_lm", models.CausalLM), ("causal_lm_untied", models.CausalLM)])
def test_old_task_files_fail_clearly_then_convert(tmp_path, name, cls):
    old = tmp_path / f"{name}.keras"
    shutil.copy(LEGACY / f"{name}.keras", old)
    with pytest.raises(TfpackError, match=rf"This {cls.__name__} was saved before tfpack split "
                                          r"models .* `tfpack.models.upgrade_keras_file"):
        keras.saving.load_model(old)
    new = models.upgrade_keras_file(old, tmp_path / "new.keras")
    model = keras.saving.load_model(new)
    assert type(model) is cls
    _assert_same_outputs(model, name)
    if name == "bert_pretrainer":
        assert model.mlm_averaging == "sequence"
        assert model.mlm_head.token_embedding is model.backbone.token_embedding
    if name.startswith("causal"):
        assert isinstance(model.backbone, models.DecoderBackbone)
        assert model.tie_embeddings == (name == "causal_lm")


def test_upgrade_refuses_other_files(tmp_path):
    with pytest.raises(TfpackError, match=r"`path` must be a `.keras` file"):
        models.upgrade_keras_file(LEGACY / "causal_lm_outputs.npz", tmp_path / "x.keras")
    new = models.upgrade_keras_file(LEGACY / "causal_lm.keras", tmp_path / "new.keras")
    with pytest.raises(TfpackError, match=r"holding 'CausalLM' \(already converted\)"):
        models.upgrade_keras_file(new, tmp_path / "again.keras")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.keras"]
