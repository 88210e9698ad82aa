"""The open task contract: a task declared in one place packs everywhere.

A toy task declared here (never in tfpack) gets its features into the
contract table, the tf.data specs, `tfpack.data.pack`, the validation, the
export's input kinds and the reference packer, with nothing else edited.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack import features as contract
from tfpack import tasks
from tfpack.data.assemble import assemble
from tfpack.data.features import FeatureRoles, packed_feature_spec
from tfpack.errors import TfpackError
from tfpack.tasks import base
from tfpack.testing import pack_examples

# Extractive-QA-like: a span per sequence whose start/end shift with the
# sequence's offset in the pack, plus a per-token tag.
SPANS = tasks.TaskSpec(
    name="toy_spans",
    reads=("token_type_ids",),
    features=(
        tasks.Feature("start_positions", "int32", "sequence", "label", 0,
                      "start of the answer, inside the example", shift=True),
        tasks.Feature("end_positions", "int32", "sequence", "label", 0,
                      "end of the answer, inside the example", shift=True),
        tasks.Feature("tag_ids", "int32", "token", "label", tasks.IGNORE_LABEL,
                      "class of each token", source="optional"),
    ),
    outputs={"start_logits": "token", "end_logits": "token"},
    detect=(("start_positions", 0),),
)

EXAMPLES = [
    {"input_ids": [5, 6, 7], "start_positions": 1, "end_positions": 2, "tag_ids": [0, 1, 2]},
    {"input_ids": [8, 9], "start_positions": 0, "end_positions": 1, "tag_ids": [3, 4]},
    {"input_ids": [3], "start_positions": 0, "end_positions": 0, "tag_ids": [5]},
]


@pytest.fixture
def registered(monkeypatch):
    """SPANS registered for one test only (the registry is module state)."""
    # The built-in question_answering declares the same features: leave it out.
    monkeypatch.setattr(base, "_REGISTRY", {k: v for k, v in base._REGISTRY.items()
                                            if k != "question_answering"})
    tasks.register(SPANS)
    return SPANS


def test_built_in_declarations():
    assert tasks.names()[:3] == ("pretraining", "classification", "causal_lm")
    assert set(tasks.preset_names()) >= {"pretraining", "bert", "classification",
                                         "causal_lm", "sft"}
    assert contract.outputs("pretraining") == {"mlm_logits": "prediction",
                                               "nsp_logits": "sequence"}
    assert tfpack.models.BertClassifier.packed_outputs.fget is not None
    roles = FeatureRoles.bert()
    assert (roles.tokens, roles.sequence, roles.predictions, roles.derived, roles.shifted) == (
        ("input_ids", "token_type_ids"), ("next_sentence_labels",),
        ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"),
        ("masked_lm_sequence_ids",), ("masked_lm_positions",))
    assert FeatureRoles.causal_lm().tokens == ("input_ids",)
    assert FeatureRoles.sft().tokens == ("input_ids", "loss_weights")
    assert "loss_weights" not in FeatureRoles.sft().optional


def test_a_declared_task_enters_the_contract(registered):
    assert "toy_spans" in contract.TASKS
    assert contract.feature("start_positions").dimension == "K"
    assert contract.label_features("toy_spans") == ("start_positions", "end_positions",
                                                    "tag_ids")
    assert contract.outputs("toy_spans") == {"start_logits": "token", "end_logits": "token"}
    spec = packed_feature_spec(FeatureRoles.get("toy_spans"), 8, 3, None)
    assert {n: s.shape.as_list() for n, s in spec.items()} == {
        "input_ids": [8], "token_type_ids": [8], "tag_ids": [8], "sequence_ids": [8],
        "position_ids": [8], "cls_positions": [3], "sequence_mask": [3], "example_ids": [3],
        "start_positions": [3], "end_positions": [3]}
    ds_spec = {"input_ids": tf.TensorSpec([None], tf.int32),
               "start_positions": tf.TensorSpec([], tf.int32)}
    assert FeatureRoles.infer(ds_spec).name == "toy_spans"


def test_assemble_and_the_reference_packer_agree_on_a_declared_task(registered):
    # Packs [2, 0] and [1] (L=6, K=2): positions shift by the sequence's offset.
    order, splits = [2, 0, 1], [0, 2, 3]
    ragged = {n: tf.ragged.constant([e[n] for e in EXAMPLES], dtype=tf.int32)
              for n in ("input_ids", "tag_ids")}
    scalars = {n: tf.constant([e[n] for e in EXAMPLES], tf.int32)
               for n in ("start_positions", "end_positions")}
    roles = FeatureRoles.get("toy_spans").present({**ragged, **scalars})
    packed = {n: t.numpy() for n, t in assemble({**ragged, **scalars}, order, splits,
                                                roles, 6, 2).items()}
    assert packed["start_positions"].tolist() == [[0, 2], [0, 0]]
    assert packed["end_positions"].tolist() == [[0, 3], [1, 0]]
    assert packed["example_ids"].tolist() == [[2, 0], [1, -1]]
    assert packed["tag_ids"].tolist() == [[5, 0, 1, 2, -100, -100], [3, 4, -100, -100, -100,
                                                                      -100]]
    reference = pack_examples(EXAMPLES, 6, packs=[[2, 0], [1]], max_sequences_per_pack=2)
    assert sorted(reference) == sorted(packed)
    for name in packed:
        np.testing.assert_array_equal(reference[name], packed[name], err_msg=name)


@pytest.mark.parametrize("window", [None, 3])
def test_tf_data_pack_packs_a_declared_task(registered, window):
    ds = tf.data.Dataset.from_generator(
        lambda: iter(EXAMPLES), output_signature={
            "input_ids": tf.TensorSpec([None], tf.int32),
            "start_positions": tf.TensorSpec([], tf.int32),
            "end_positions": tf.TensorSpec([], tf.int32),
            "tag_ids": tf.TensorSpec([None], tf.int32)})
    packs = list(ds.apply(tfpack.data.pack(max_length=6, max_sequences_per_pack=2,
                                           algorithm="ffd", window=window, shuffle=False)))
    spans = {}
    for pack in packs:
        ids = pack["input_ids"].numpy()
        for slot, present in enumerate(pack["sequence_mask"].numpy()):
            if present:
                tokens = ids[pack["sequence_ids"].numpy() == slot + 1].tolist()
                start = int(pack["start_positions"][slot]) - int(pack["cls_positions"][slot])
                spans[tuple(tokens)] = start
    assert spans == {(5, 6, 7): 1, (8, 9): 0, (3,): 0}


def test_export_input_kinds_follow_the_declarations(registered, monkeypatch):
    from tfpack.export.shapes import feature_kinds

    assert "start_positions" not in feature_kinds()  # a label, not served
    head_input = tasks.TaskSpec(
        name="toy_head", features=(tasks.Feature("span_positions", "int32", "sequence",
                                                 "input", 0, "a head input", shift=True),),
        outputs={"scores": "sequence"})
    tasks.register(head_input)
    assert feature_kinds()["span_positions"] == ("K", tf.int32)


def test_bad_declarations_name_the_culprit(registered):
    with pytest.raises(TfpackError, match=r"packing='tokens'"):
        tasks.Feature("x_ids", "int32", "tokens", "label")
    with pytest.raises(TfpackError, match=r"shift=True"):
        tasks.Feature("x_ids", "int32", "token", "label", shift=True)
    with pytest.raises(TfpackError, match=r"already registered"):
        tasks.register(tasks.TaskSpec(name="toy_spans"))
    with pytest.raises(TfpackError, match=r"Preset names must be unique.*\['sft'\]"):
        tasks.register(tasks.TaskSpec(name="other", presets=(tasks.Preset("sft"),)))
    with pytest.raises(TfpackError, match=r"core features"):
        tasks.TaskSpec(name="bad", features=(
            tasks.Feature("input_ids", "int32", "token", "input"),))
    with pytest.raises(TfpackError, match=r"outputs=\{'logits': 'pack'\}"):
        tasks.TaskSpec(name="bad", outputs={"logits": "pack"})
    with pytest.raises(TfpackError, match=r"Received: task='nope'"):
        contract.outputs("nope")
