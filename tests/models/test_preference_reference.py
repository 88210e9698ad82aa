"""PreferenceModel's three reference sources (issue 33): ``reference=None`` is a frozen
copy of the policy made by tfpack when the model is constructed (TRL's ``ref_model=None``);
``"precomputed"`` reads the reference's log-likelihoods from the packs; a model is that
model. The copy holds the policy's initial weights through Keras `fit`, the `Trainer`,
`tfpack.predict` and `.keras` files (DPO's loss at step 0 is log 2 per pair), and each
source refuses packs meant for another."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.builders import preference_pair
from tfpack.errors import TfpackError
from tfpack.models import CausalLM, DecoderBackbone, PreferenceModel
from tfpack.testing import pack_examples

PAIRS = [{"prompt": [1, 2, 3], "chosen": [4, 5], "rejected": [6, 7, 8]},
         {"prompt": [9, 10], "chosen": [11], "rejected": [12]},
         {"prompt": [13], "chosen": [14, 15], "rejected": [16]},
         {"prompt": [2, 4], "chosen": [17, 18], "rejected": [19, 3]}]
LOG_2 = math.log(2.0)


def _policy(seed=0):
    keras.utils.set_random_seed(seed)
    return CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
                                    num_heads=2, intermediate_dim=16))


def _items(scores=None):
    items = [preference_pair(p["prompt"], p["chosen"], p["rejected"]) for p in PAIRS]
    if scores is not None:
        items = [dict(item, reference_chosen_log_likelihood=np.float32(-3.0 - i),
                      reference_rejected_log_likelihood=np.float32(-4.0))
                 for i, item in enumerate(items)]
    return items


@pytest.fixture(scope="module")
def packs():
    """Two packs of two pairs each, without reference log-likelihoods."""
    return pack_examples(_items(), max_length=24, packs=[[0, 1], [2, 3]],
                         max_sequences_per_pack=2)


def _values(lm):
    return [np.array(w) for w in lm.get_weights()]


def _moved(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_none_is_a_frozen_copy_of_the_policy_sharing_no_variable(packs):
    policy = _policy()
    assert not policy.built  # the copy builds it, eagerly
    model = PreferenceModel(policy, loss="sigmoid", beta=0.5)
    reference = model.reference
    assert reference is not None and reference is not policy and not reference.trainable
    assert reference.backbone is not policy.backbone
    assert not {id(v) for v in reference.weights} & {id(v) for v in policy.weights}
    assert _moved(_values(reference), _values(policy)) == 0.0
    assert [id(v) for v in model.trainable_weights] == [id(v) for v in policy.trainable_weights]
    out = model(packs)
    mask = packs["sequence_mask"] > 0
    np.testing.assert_allclose(np.asarray(out["loss"])[mask], LOG_2, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out["reward_margin"])[mask], 0.0, atol=1e-6)
    assert model.get_config()["reference"] is None
    assert PreferenceModel.from_config(model.get_config()).copies_policy
    # The reference-free losses make no copy.
    for loss in ("simpo", "orpo"):
        free = PreferenceModel(policy, loss=loss)
        free(packs)
        assert free.reference is None
        assert {id(v) for v in free.weights} == {id(v) for v in policy.weights}


def test_keras_fit_trains_the_policy_against_its_initial_weights(packs, tmp_path):
    model = PreferenceModel(_policy(), loss="sigmoid", beta=0.5)
    initial = _values(model.policy)
    dataset = tf.data.Dataset.from_tensor_slices(packs).batch(2)
    model.compile(optimizer=keras.optimizers.SGD(1.0), jit_compile=False)
    before = model.evaluate(dataset, return_dict=True, verbose=0)  # built by Keras: symbolically
    assert before["loss"] == pytest.approx(LOG_2, abs=1e-6)
    assert before["reward_margin"] == pytest.approx(0.0, abs=1e-6)
    history = model.fit(dataset, epochs=2, verbose=0).history
    assert history["loss"][0] == pytest.approx(LOG_2, abs=1e-6)  # step 0: policy = reference
    assert history["loss"][-1] < LOG_2 - 1e-3
    assert _moved(_values(model.policy), initial) > 1e-3
    assert _moved(_values(model.reference), initial) == 0.0

    path = str(tmp_path / "dpo.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.get_config()["reference"] is None and not loaded.reference.trainable
    assert _moved(_values(loaded.reference), initial) == 0.0
    assert _moved(_values(loaded.policy), _values(model.policy)) == 0.0
    np.testing.assert_allclose(loaded(packs)["loss"], model(packs)["loss"], atol=1e-6)
    # The policy's weights, not the reference's, moved: the loss is no longer log 2.
    assert float(np.abs(np.asarray(model(packs)["loss"]) - LOG_2).max()) > 1e-3


def test_predict_starts_from_log_2():
    model = PreferenceModel(_policy(1), loss="sigmoid", beta=0.5)
    examples = tfpack.builders.preference_examples(PAIRS, max_length=24)
    out = tfpack.predict(model, examples, max_length=24, max_sequences_per_pack=2,
                         jit_compile=False)
    np.testing.assert_allclose(out["loss"], LOG_2, atol=1e-6)
    np.testing.assert_allclose(out["reward_margin"], 0.0, atol=1e-6)


def test_the_trainer_starts_from_log_2_and_keeps_the_initial_reference(packs):
    model = PreferenceModel(_policy(1), loss="sigmoid", beta=0.5)
    initial = _values(model.policy)
    trainer = tfpack.training.Trainer(model, keras.optimizers.SGD(1.0), micro_batch_size=2,
                                      jit_compile=False, check_exact=False, log_every=1,
                                      progress=False)
    result = trainer.fit(tf.data.Dataset.from_tensor_slices(packs).repeat(), num_steps=2)
    assert result.history[0]["loss"] == pytest.approx(LOG_2, abs=1e-6)  # step 0's loss
    assert result.history[1]["loss"] < LOG_2
    assert _moved(_values(model.policy), initial) > 1e-4
    assert _moved(_values(model.reference), initial) == 0.0


def test_precomputed_reads_the_packs_and_round_trips_its_config():
    with_scores = pack_examples(_items(scores=True), max_length=24, packs=[[0, 1], [2, 3]],
                                max_sequences_per_pack=2)
    model = PreferenceModel(_policy(), "precomputed", loss="ipo", beta=0.5)
    assert model.reference is None and model.get_config()["reference"] == "precomputed"
    again = PreferenceModel.from_config(model.get_config())
    assert again.precomputed and again.reference is None
    # A config (a `.keras` file) written when reference=None meant "precomputed".
    older = PreferenceModel.from_config(dict(model.get_config(), reference=None))
    assert older.precomputed and older.reference is None
    out = model(with_scores)
    c, r = np.asarray(out["chosen_log_likelihood"]), np.asarray(out["rejected_log_likelihood"])
    h = (c - with_scores["reference_chosen_log_likelihood"]) - (
        r - with_scores["reference_rejected_log_likelihood"])
    np.testing.assert_allclose(out["loss"], (h - 1.0) ** 2 * with_scores["sequence_mask"],
                               rtol=1e-5)


def test_packs_for_another_reference_source_are_refused(packs):
    with_scores = pack_examples(_items(scores=True), max_length=24, packs=[[0, 1], [2, 3]],
                                max_sequences_per_pack=2)
    policy = _policy()
    for reference, made in ((None, r"a frozen copy of the policy \(reference=None\)"),
                            (_policy(2), "its `reference` model")):
        model = PreferenceModel(policy, reference, loss="sigmoid")
        with pytest.raises(TfpackError, match=f"computes them with {made}, so packs must not "
                                              r"carry them: pass reference='precomputed'"):
            model(with_scores)
    precomputed = PreferenceModel(policy, "precomputed", loss="sigmoid")
    precomputed.compile(optimizer="sgd", jit_compile=False)
    with pytest.raises(TfpackError, match=r"reference='precomputed'\)` reads the reference's "
                                          r"log-likelihoods from the packs"):
        precomputed.fit(tf.data.Dataset.from_tensor_slices(packs).batch(2), verbose=0)
