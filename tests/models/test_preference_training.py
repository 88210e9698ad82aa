"""PreferenceModel on tfpack's decoder, trained and run: gradients equal the unpacked
update's across micro-batches (replicas: test_replicas.py); both reference paths give the same numbers;
`tfpack.predict`, `evaluate`, `fit` and `.keras` files. (Split from test_preference.py so
that the two halves run on different test workers.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.models import PreferenceModel

from preference_helpers import (LOSS_OPTIONS, MAX_LENGTH, UNEVEN_PACKS, close, decoder_policy,
                                items, local_mean_update, make_pairs, numpy_losses, pack,
                                pairs_alone, trainer_update, unpacked_update, with_reference)
from update_helpers import max_difference


@pytest.mark.parametrize("loss", ["sigmoid", "orpo"])
def test_pair_count_is_global_across_accumulation(loss):
    weights, record = trainer_update(tf.distribute.get_strategy(), loss, micro=1,
                                     accumulation=4)
    expected = unpacked_update(loss)
    assert max_difference(weights, expected) < 1e-5
    # A mean per micro-batch (the packs hold 3, 1, 2 and 1 pairs) moves elsewhere.
    moved = trainer_update(tf.distribute.get_strategy(), loss, micro=4, accumulation=1)[0]
    assert max_difference(moved, expected) < 1e-5
    assert max_difference(expected, local_mean_update(loss)) > 1e-4


def test_reference_model_and_reference_features_give_the_same_numbers():
    policy, reference = decoder_policy(seed=0), decoder_policy(seed=1)
    pairs = make_pairs()
    examples = tfpack.builders.preference_examples(pairs, max_length=MAX_LENGTH)
    scores = tfpack.inference.reference_log_likelihoods(
        reference, examples, max_length=MAX_LENGTH, max_sequences_per_pack=3,
        batch_size=2, jit_compile=False)
    alone = pairs_alone(reference, pairs)
    assert close(scores["chosen_log_likelihood"], alone[:, 0])
    assert close(scores["rejected_log_likelihood"], alone[:, 1])
    same_step = PreferenceModel(policy, reference, loss="ipo", **LOSS_OPTIONS)
    carried = PreferenceModel(policy, "precomputed", loss="ipo", **LOSS_OPTIONS)
    plain = items(pairs)
    in_packs = with_reference(plain, {"chosen": scores["chosen_log_likelihood"],
                                      "rejected": scores["rejected_log_likelihood"]})
    a = same_step(pack(plain, UNEVEN_PACKS, max_pairs=3))
    b = carried(pack(in_packs, UNEVEN_PACKS, max_pairs=3))
    for name in ("loss", "reward_margin", "chosen_log_likelihood"):
        assert close(a[name], b[name]), name
    # The frozen reference trains nothing.
    assert not reference.trainable_variables
    assert len(same_step.trainable_variables) == len(policy.trainable_variables)


def test_predict_gives_every_pair_in_input_order_and_evaluate_reports_rewards():
    policy, reference = decoder_policy(seed=0), decoder_policy(seed=1)
    pairs = make_pairs(count=9, seed=4)
    model = PreferenceModel(policy, reference, loss="sigmoid", **LOSS_OPTIONS)
    examples = tfpack.builders.preference_examples(pairs, max_length=MAX_LENGTH)
    out = tfpack.predict(model, examples, max_length=MAX_LENGTH, max_sequences_per_pack=3,
                         batch_size=2, jit_compile=False)
    assert sorted(out) == ["chosen_log_likelihood", "loss", "rejected_log_likelihood",
                           "reward_margin"]
    alone = pairs_alone(policy, pairs)
    ref = pairs_alone(reference, pairs)
    want_loss, want_margin = numpy_losses("sigmoid", alone, ref[:, :2], **LOSS_OPTIONS)
    assert close(out["chosen_log_likelihood"], alone[:, 0])
    assert close(out["rejected_log_likelihood"], alone[:, 1])
    assert close(out["loss"], want_loss)
    assert close(out["reward_margin"], want_margin)

    packs = examples.apply(tfpack.data.pack(max_length=MAX_LENGTH, max_sequences_per_pack=3,
                                            algorithm="ffd")).batch(2)
    model.compile(optimizer="sgd", jit_compile=False)
    metrics = model.evaluate(packs, return_dict=True, verbose=0)
    assert sorted(metrics) == ["loss", "reward_accuracy", "reward_margin"]
    assert metrics["reward_accuracy"] == pytest.approx(float(np.mean(want_margin > 0)), abs=1e-6)
    assert metrics["reward_margin"] == pytest.approx(float(np.mean(want_margin)), abs=1e-5)
    assert metrics["loss"] == pytest.approx(float(np.mean(want_loss)), abs=1e-5)


def test_fit_lowers_the_loss_and_config_round_trips(tmp_path):
    model = PreferenceModel(decoder_policy(), loss="simpo", beta=2.0, simpo_gamma=0.5)
    examples = items(make_pairs(count=12, seed=2))
    packs = tf.data.Dataset.from_tensor_slices(
        pack(examples, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]], max_pairs=3)).batch(2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    history = model.fit(packs, epochs=4, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert history["reward_accuracy"][-1] >= history["reward_accuracy"][0]
    path = str(tmp_path / "preference.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert (loaded.loss, loaded.beta, loaded.simpo_gamma) == ("simpo", 2.0, 0.5)
    x = next(iter(packs))
    assert close(loaded(x)["loss"], model(x)["loss"])
