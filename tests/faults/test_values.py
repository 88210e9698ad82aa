"""Fault injection, values in range (issue 22, item 3): every writer and every serving path
refuses ids outside the vocabulary, positions outside the pack or the model's table, sequence
ids outside [0, K], non-finite masks and values beyond int32 with one clear error, and a
non-finite activation in one sequence never reaches another sequence of its pack.

Each scenario asserts ``verdict.outcome == "held"`` (`tests.faults.outcomes`); the
property-based ones draw the feature and the bad value."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

import tfpack
from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call, snapshot
from tfpack import models
from tfpack.export import export_saved_model
from tfpack.testing import pack_examples

L, K, V = 8, 2, 20


def _packs():
    """Two valid packs of L=8, K=2: [5 6 7 | 8 9] and [4 4 4 4 4 4]."""
    return {
        "input_ids": np.array([[5, 6, 7, 8, 9, 0, 0, 0], [4, 4, 4, 4, 4, 4, 0, 0]]),
        "sequence_ids": np.array([[1, 1, 1, 2, 2, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0]]),
        "position_ids": np.array([[0, 1, 2, 0, 1, 0, 0, 0], [0, 1, 2, 3, 4, 5, 0, 0]]),
        "cls_positions": np.array([[0, 3], [0, 0]]),
        "sequence_mask": np.array([[1.0, 1.0], [1.0, 0.0]], np.float32),
        "example_ids": np.array([[0, 1], [2, -1]]),
    }


# Per feature: values the contract forbids there (wrapped ids, NaN masks, ids past K...).
BAD_VALUES = {
    "input_ids": [2**31 + 5, -2**40, -1, 2**63 - 1],
    "sequence_ids": [K + 1, -1, 2**31],
    "position_ids": [-1, L, 2**32],
    "cls_positions": [L, -3],
    "sequence_mask": [np.nan, np.inf, -np.inf, 0.5, 2.0, -1.0],
    "example_ids": [-2, 2**31, -2**31 - 1],
}


@campaign(25)
@given(feature=st.sampled_from(sorted(BAD_VALUES)), data=st.data(),
       row=st.integers(0, 1), column=st.integers(0, L - 1))
def test_write_packed_refuses_every_value_the_contract_forbids(tmp_path_factory, feature, data,
                                                               row, column):
    # The user's file beside the output (a folder holding it is refused before any value
    # is read: tests/faults/test_ownership.py).
    directory = tmp_path_factory.mktemp("bad")
    (directory / "NOTES.md").write_text("mine")
    before = snapshot(directory)
    packs = _packs()
    value = data.draw(st.sampled_from(BAD_VALUES[feature]))
    array = packs[feature].astype(np.float64 if feature == "sequence_mask" else np.int64)
    array[row, column % array.shape[1]] = value
    packs[feature] = array
    shard = str(directory / "out" / "part-00000-of-00001.tfrecord")
    verdict = judge_call(lambda: tfpack.formats.write_packed([packs], shard),
                         refuse=True, match=feature, user_files=(directory, before))
    assert verdict.outcome == HELD, verdict
    assert sorted(os.listdir(directory)) == ["NOTES.md"], "a refused write left files behind"


def test_write_packed_refuses_float_ids_and_object_arrays(tmp_path):
    for feature, value in (("input_ids", np.array([[5.5] * L, [4.0] * L])),
                           ("input_ids", np.array([[2**70] * L, [1] * L], dtype=object))):
        packs = {**_packs(), feature: value}
        verdict = judge_call(lambda: tfpack.formats.write_packed([packs], str(tmp_path)),
                             refuse=True, match=feature)
        assert verdict.outcome == HELD, verdict


def test_write_packed_keeps_good_values_exact(tmp_path):
    """The boundary values the contract allows round-trip exactly."""
    packs = _packs()
    packs["input_ids"][0, 0] = 2**31 - 1
    packs["example_ids"][1, 1] = -1

    def write_and_read():
        tfpack.formats.write_packed([packs], str(tmp_path))
        return list(tfpack.formats.read_packed(str(tmp_path)).as_numpy_iterator())

    verdict = judge_call(write_and_read, check=lambda read: all(
        np.array_equal(read[i][n], packs[n][i]) for i in range(2) for n in packs))
    assert verdict.outcome == HELD, verdict


@pytest.fixture(scope="module")
def encoder():
    keras.utils.set_random_seed(0)
    return models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                              attention_dropout=0.0)


ARGS = dict(max_length=2 * L, max_sequences_per_pack=K, batch_size=2)


@pytest.mark.parametrize("examples, match", [
    ([[2, 5, V]], "input_ids=20 in example 0 at token 2"),        # past the vocabulary
    ([[2, 5], [3, -1]], "input_ids=-1 in example 1 at token 1"),  # negative (would wrap)
    ([[2, 5], list(range(1, L + 3))], "position_ids=8 in example 1"),  # past the table
    ([[2, 5.7]], "integer token ids"),                             # float: would truncate
    ([["a", "b"]], "integer token ids"),                           # strings
    ([[2, 2**31 + 5]], "input_ids=2147483653 in example 0"),        # would wrap
])
def test_predict_refuses_ids_outside_the_model_before_xla(encoder, examples, match):
    verdict = judge_call(lambda: tfpack.predict(encoder, examples, **ARGS), refuse=True,
                         match=match)
    assert verdict.outcome == HELD, verdict


def test_predict_refuses_a_float_dataset(encoder):
    dataset = tf.data.Dataset.from_tensor_slices({"input_ids": [[2.0, 5.5]]})
    verdict = judge_call(lambda: tfpack.predict(encoder, dataset, **ARGS), refuse=True,
                         match="integer ids")
    assert verdict.outcome == HELD, verdict


def test_predict_with_a_huge_batch_size_allocates_only_what_the_data_needs(encoder):
    reference = tfpack.predict(encoder, [[2, 5, 7], [3, 4]], **ARGS)
    huge = {**ARGS, "batch_size": 2**40}
    verdict = judge_call(lambda: tfpack.predict(encoder, [[2, 5, 7], [3, 4]], **huge),
                         check=lambda out: all(np.allclose(a, b, atol=1e-6)
                                               for a, b in zip(out, reference)))
    assert verdict.outcome == HELD, verdict


@pytest.fixture(scope="module")
def served(encoder, tmp_path_factory):
    classifier = models.BertClassifier(encoder, 2, dropout=0.0)
    path = export_saved_model(classifier, tmp_path_factory.mktemp("sm") / "m", max_length=L,
                              max_sequences_per_pack=K)
    return tf.saved_model.load(path).signatures["serving_default"], classifier


def _serve(function, features):
    """``("refused", message)`` for a named assertion, else ``("served", outputs)``."""
    try:
        outputs = function(**{k: tf.constant(v) for k, v in features.items()})
    except tf.errors.InvalidArgumentError as error:
        return "refused", error.message
    return "served", {k: v.numpy() for k, v in outputs.items()}


@campaign(20)
@given(case=st.sampled_from([("input_ids", -1), ("input_ids", V), ("input_ids", -2**31),
                             ("position_ids", -1), ("position_ids", L),
                             ("sequence_ids", K + 1), ("sequence_ids", -1),
                             ("cls_positions", L), ("token_type_ids", 2),
                             ("sequence_mask", np.nan), ("sequence_mask", np.inf)]),
       column=st.integers(0, 1))
def test_serving_default_refuses_by_a_named_assertion(served, case, column):
    function, classifier = served
    feature, value = case
    features = {k: v[:, :v.shape[1]].astype(np.float32 if k == "sequence_mask" else np.int32)
                for k, v in _packs().items() if k in classifier.input_features}
    features.setdefault("token_type_ids", np.zeros((2, L), np.int32))
    features[feature][0, column] = value
    verdict = judge_call(lambda: _serve(function, features), check=lambda r: (
        r[0] == "refused" and f"`{feature}` must hold" in r[1]))
    assert verdict.outcome == HELD, verdict


@pytest.mark.parametrize("implementation", ["dense", "segmented"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_bad_activation_stays_in_its_sequence(implementation, bad):
    """An embedding row of NaN/inf for token 7: the other sequences of the pack equal their
    unpacked outputs; the sequence holding token 7 is NaN (shown, not hidden)."""
    keras.utils.set_random_seed(0)
    encoder = models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                                 intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                                 attention_dropout=0.0, attention_implementation=implementation,
                                 max_sequences_per_pack=K)
    examples = [{"input_ids": [3, 7, 5]}, {"input_ids": [2, 6, 9, 4]}]
    packed = pack_examples(examples, L, packs=[[0, 1]], max_sequences_per_pack=K)
    alone = pack_examples(examples, L, packs=[[0], [1]], max_sequences_per_pack=K)
    run = lambda f: np.asarray(encoder({k: tf.constant(v) for k, v in f.items()},  # noqa: E731
                                       training=False)["sequence_output"])
    run(alone)
    table = np.asarray(encoder.token_embedding.embeddings).copy()
    table[7] = bad
    encoder.token_embedding.embeddings.assign(table)
    verdict = judge_call(lambda: (run(packed), run(alone)), check=lambda r: (
        np.allclose(r[0][0, 3:7], r[1][1, :4], atol=1e-5) and np.isnan(r[0][0, :3]).all()))
    assert verdict.outcome == HELD, verdict
