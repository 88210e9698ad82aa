"""The one feature contract (tfpack.features) and everything derived from it."""

import ast
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack import features as contract
from tfpack import models
from tfpack.errors import TfpackError
from tfpack.testing import next_token_labels, pack_examples

ROOT = pathlib.Path(tfpack.__file__).resolve().parent
# What a feature name looks like: `*_ids`, `*_positions`, `*_labels`,
# `*_weights`, `*_mask`, or `labels`.
FEATURE_LIKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*_(ids|positions|labels|weights|mask)$"
                          r"|^labels$")
# Strings shaped like feature names that are not packed features.
NOT_FEATURES = {
    "attention_mask": "a layer and argument name",
    "block_diagonal_mask": "a constructor flag",
    "reset_positions": "a constructor flag",
    "tie_weights": "keras-hub ReversibleEmbedding attribute",
    "next_token_labels": "a function name",
    "pair_attention_mask": "a function name",
    "band_mask": "a function name (tfpack.layers.dense_attention)",
    "row_mask": "a function name (tfpack.layers.dense_attention)",
    "flat_ids": "a function name (tfpack.builders.offsets)",
    "sequence_positions": "a method name (PreferenceModel.sequence_positions)",
    "token_ids": "a declared parameter kind (tfpack.params) and a probe's local name",
    "padding_mask": "keras-hub's input name (tfpack.testing.exactness runs keras-hub)",
    "segment_ids": "keras-hub's input name (tfpack.testing.exactness runs keras-hub)",
    "relative_positions": "a function name",
    "token_mask": "an output of the serve_sequences signatures",
    "start_ids": "a tokenizer argument (special tokens before a text)",
    "end_ids": "a tokenizer argument (special tokens after a text)",
    "separator_ids": "a tokenizer argument (special tokens between segments)",
    "encoder_ids": "a parameter of tfpack.builders.seq2seq (a pair's input token ids)",
    "decoder_ids": "a parameter of tfpack.builders.seq2seq (a pair's target token ids)",
    "query_sequence_ids": "a parameter of tfpack.layers.pair_attention_mask",
    "key_sequence_ids": "a parameter of tfpack.layers.pair_attention_mask",
}
KERAS_HUB_SEQ2SEQ = {"encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
                     "decoder_padding_mask"}
# Files that translate a foreign format to the contract, and its names.
FOREIGN = {
    "formats/records.py": {"input_mask", "segment_ids"},  # Google BERT TFRecords
    "engines/local.py": {"input_mask", "segment_ids"},
    "formats/validation.py": {"input_mask", "segment_ids"},  # checks Google BERT TFRecords
    "testing/pair_exactness.py": KERAS_HUB_SEQ2SEQ,  # runs keras-hub's encoder-decoders
}


def unknown_feature_names(source: str, path: str = "") -> set:
    """Feature-like string literals of ``source`` that the contract lacks."""
    allowed = contract.names() | set(NOT_FEATURES) | FOREIGN.get(path, set())
    if path.startswith("models/keras_hub/"):
        allowed |= {"token_ids", "padding_mask", "segment_ids"}  # keras-hub inputs
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and FEATURE_LIKE.match(node.value) and node.value not in allowed}


def test_no_module_names_a_feature_the_contract_lacks():
    offenders = {}
    for file in sorted(ROOT.rglob("*.py")):
        path = file.relative_to(ROOT).as_posix()
        unknown = unknown_feature_names(file.read_text(), path)
        if unknown:
            offenders[path] = sorted(unknown)
    assert not offenders, f"Feature names missing from tfpack.features: {offenders}"


def test_the_scan_catches_a_new_feature_name():
    source = 'weights = x["token_weights"]\nmask = x.get("segment_mask")\n'
    assert unknown_feature_names(source) == {"token_weights", "segment_mask"}
    assert unknown_feature_names('x["input_ids"], x["loss_weights"]') == set()


def test_contract_entries():
    for entry in contract.FEATURES:
        assert entry.dtype in ("int32", "float32")
        assert entry.dimension in contract.DIMENSIONS
        assert entry.role in ("input", "label", "index")
        assert entry.tasks is None or set(entry.tasks) <= set(contract.TASKS)
    assert contract.feature("labels", "causal_lm").padding == contract.IGNORE_LABEL == -100
    assert contract.feature("labels", "classification").dimension == "K"
    assert contract.dimension_of("labels") is None
    assert contract.label_features("causal_lm") == ("labels", "loss_weights")
    assert contract.label_features("pretraining") == (
        "masked_lm_ids", "masked_lm_weights", "masked_lm_sequence_ids", "next_sentence_labels")
    with pytest.raises(TfpackError, match=r"pass `task`. Received: task=None"):
        contract.feature("labels")
    with pytest.raises(TfpackError, match=r"Received: name='segment_ids'"):
        contract.feature("segment_ids")
    with pytest.raises(TfpackError, match=r"Received: task='ner'"):
        contract.label_features("ner")


def test_contract_imports_no_tensorflow():
    code = ("import sys; import tfpack.features; "
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def _check_against_contract(spec: dict, labels_task=None, batched=False):
    for name, value in spec.items():
        entry = contract.feature(name, labels_task if name == "labels" else None)
        dtype = value.dtype.name if hasattr(value.dtype, "name") else str(value.dtype)
        assert dtype == entry.dtype, name
        assert len(value.shape) == 1 + batched, name


@pytest.mark.parametrize("preset,labels_task", [
    ("bert", None), ("classification", "classification"), ("causal_lm", "causal_lm")])
def test_tf_data_specs_follow_the_contract(preset, labels_task):
    roles = tfpack.data.FeatureRoles.get(preset)
    spec = tfpack.data.packed_feature_spec(roles, 8, 3, 4)
    _check_against_contract(spec, labels_task)
    sizes = {"L": 8, "K": 3, "M": 4}
    for name, value in spec.items():
        entry = contract.feature(name, labels_task if name == "labels" else None)
        assert value.shape == [sizes[entry.dimension]]


def test_feature_roles_refuse_names_outside_the_contract():
    with pytest.raises(TfpackError, match=r"unknown features \['segment_ids'\] in the 'pairs'"):
        tfpack.data.FeatureRoles(name="pairs", tokens=("input_ids", "segment_ids"))


def test_testing_packer_follows_the_contract():
    bert = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 1], "masked_lm_positions": [1],
             "masked_lm_ids": [7], "next_sentence_labels": 1}]
    _check_against_contract(pack_examples(bert, max_length=5), batched=True)
    lm = [{"input_ids": [3, 4, 5], "labels": next_token_labels([3, 4, 5]),
           "loss_weights": [0.0, 1.0, 1.0]}]
    packed = pack_examples(lm, max_length=5)
    _check_against_contract(packed, "causal_lm", batched=True)
    assert packed["labels"].tolist() == [[4, 5, -100, -100, -100]]
    with pytest.raises(TfpackError, match=r"unknown features \['segment_ids'\]"):
        pack_examples([{"input_ids": [1], "segment_ids": [0]}], max_length=2)


def _tiny_encoder():
    return models.BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16)


@pytest.mark.parametrize("make", [
    lambda: models.BertPretrainer(_tiny_encoder()),
    lambda: models.BertClassifier(_tiny_encoder(), 2),
    lambda: models.CausalLM(models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16)),
])
def test_task_features_come_from_the_contract(make):
    model = make()
    contract.check_names(model.input_features + model.label_features, "test")
    assert all(contract.feature(n, model.task).role == "input" for n in model.input_features)
    assert model.label_features == contract.label_features(model.task)
    assert set(model.required_features) <= set(model.input_features + model.label_features)


def test_export_signature_takes_contract_inputs_only():
    from tfpack.export.shapes import feature_specs, serving_lengths

    model = models.BertPretrainer(_tiny_encoder())
    spec = tfpack.data.packed_feature_spec(tfpack.data.FeatureRoles.bert(), 8, 2, 3)
    specs = feature_specs(model, serving_lengths(model, spec), spec)
    assert set(specs) == set(model.input_features)
    for name, value in specs.items():
        assert value.dtype.name == contract.dtype_of(name)


def test_validation_reads_dimensions_from_the_contract():
    from tfpack.training.validation import validate_element_spec

    model = models.CausalLM(models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16))
    spec = tfpack.data.packed_feature_spec(tfpack.data.FeatureRoles.causal_lm(), 8, 2, None)
    assert validate_element_spec(model, spec) == {"L": 8, "K": 2}
    # Causal-LM labels are [L]: a mismatch is found through the task.
    spec["labels"] = tf.TensorSpec([7], tf.int32)
    with pytest.raises(TfpackError, match=r"labels has L=7 but input_ids has L=8"):
        validate_element_spec(model, spec)
    del spec["labels"]
    with pytest.raises(TfpackError, match=r"missing labels \(CausalLM reads it\)"):
        validate_element_spec(model, spec)
    np.testing.assert_equal(len(spec), 6)  # The 5 inputs and example_ids.


def test_design_doc_table_matches_the_contract():
    design = (ROOT.parent / "docs" / "DESIGN.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \[(\w+)\] \| (\w+)(?: \((\w+)\))? \| ([-\d.]+) \|",
                      design, re.M)
    documented = {(name, task or None): (dtype, dim, role, float(pad))
                  for name, dtype, dim, role, task, pad in rows}
    expected = {}
    for entry in contract.FEATURES:
        task = entry.tasks[0] if entry.tasks else None
        expected[(entry.name, task)] = (entry.dtype, entry.dimension, entry.role,
                                        float(entry.padding))
    assert documented == expected


def test_ignore_label_is_written_once():
    """-100 appears as a number only in tfpack/tasks/base.py (IGNORE_LABEL)."""
    offenders = []
    for file in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text())):
            if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                    and isinstance(node.operand, ast.Constant) and node.operand.value == 100):
                offenders.append(f"{file.relative_to(ROOT)}:{node.lineno}")
    assert [o for o in offenders if not o.startswith("tasks/base.py:")] == []
    assert len(offenders) == 1
