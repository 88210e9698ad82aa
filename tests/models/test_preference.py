"""PreferenceModel on tfpack's decoder: every pair's log-likelihoods and loss equal each
sequence run alone, for every loss, packed or not, prompts shared or not; gradients equal
the unpacked ones. Training, prediction and the reference paths: test_preference_training.py."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.models import PreferenceModel
from tfpack.models.preference import LOSSES
from tfpack.testing import assert_packed_equals_unpacked

from preference_helpers import (LOSS_OPTIONS, MAX_LENGTH, UNEVEN_PACKS, close, decoder_policy,
                                items, make_pairs, numpy_losses, pack, pairs_alone, per_pair,
                                reference_scores, sequences_alone, with_reference)


def test_one_pair_by_hand_in_numpy():
    """An independent reference: log-softmax and the DPO formula written out in NumPy."""
    policy = decoder_policy()
    prompt, chosen, rejected = [3, 5, 7], [11, 2], [13]
    model = PreferenceModel(policy, "precomputed", loss="sigmoid", beta=0.5)
    example = with_reference(items([dict(prompt=prompt, chosen=chosen, rejected=rejected)]),
                             {"chosen": [-6.0], "rejected": [-2.5]})
    out = model(pack(example, [[0]]))

    def log_likelihood(response):
        ids = np.array([prompt + response])
        n = ids.shape[1]
        logits = np.asarray(policy({"input_ids": ids, "sequence_ids": np.ones_like(ids),
                                    "position_ids": np.arange(n)[None]})["logits"][0],
                            np.float64)
        log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return sum(log_softmax[len(prompt) - 1 + i, t] for i, t in enumerate(response))

    c, r = log_likelihood(chosen), log_likelihood(rejected)
    h = (c - -6.0) - (r - -2.5)
    loss = np.log1p(np.exp(-0.5 * h))
    assert float(out["chosen_log_likelihood"][0, 0]) == pytest.approx(c, abs=2e-6)
    assert float(out["rejected_log_likelihood"][0, 0]) == pytest.approx(r, abs=2e-6)
    assert float(out["reward_margin"][0, 0]) == pytest.approx(0.5 * h, abs=2e-6)
    assert float(out["loss"][0, 0]) == pytest.approx(loss, abs=2e-6)


@functools.cache
def policy_and_alone(pairs_seed, **kwargs):
    """A seeded policy and every sequence of ``make_pairs(pairs_seed)`` run alone through it.

    Shared by the losses' parametrizations (nothing here trains the policy): running each
    sequence alone is most of a test's cost, and it does not depend on the loss.
    """
    policy = decoder_policy(**kwargs)
    return policy, pairs_alone(policy, make_pairs(seed=pairs_seed))


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("implementation", ["dense", "segmented", "learned_positions"])
def test_every_pair_equals_its_sequences_run_alone(loss, implementation):
    # Rotary scores see position differences only: learned positions show a
    # rejected sequence whose positions do not restart.
    kwargs = {"dense": {"attention_implementation": "dense"},
              "segmented": {"attention_implementation": "segmented",
                            "max_sequences_per_pack": 6},
              "learned_positions": {"position_embedding": "learned"}}[implementation]
    policy, alone = policy_and_alone(0, **kwargs)
    pairs = make_pairs()
    reference = reference_scores()
    model = PreferenceModel(policy, "precomputed", loss=loss, **LOSS_OPTIONS)
    # Reordered packs, an empty slot, one pair alone.
    packs = [[4, 1, 6], [2, 0], [5], [3]]
    out = model(pack(with_reference(items(pairs), reference), packs, max_pairs=3))
    got = per_pair(out, packs, len(pairs))
    want_loss, want_margin = numpy_losses(
        loss, alone, np.array([reference["chosen"], reference["rejected"]]).T, **LOSS_OPTIONS)
    assert close(got["chosen_log_likelihood"], alone[:, 0])
    assert close(got["rejected_log_likelihood"], alone[:, 1])
    assert close(got["loss"], want_loss)
    assert close(got["reward_margin"], want_margin)
    assert np.asarray(out["loss"])[1, 2] == 0.0  # the empty slot


@pytest.mark.parametrize("loss", LOSSES)
def test_packed_loss_and_gradients_equal_unpacked(loss):
    model = PreferenceModel(decoder_policy(), "precomputed", loss=loss, **LOSS_OPTIONS)
    examples = with_reference(items(make_pairs()), reference_scores())
    result = assert_packed_equals_unpacked(model, examples, max_length=MAX_LENGTH,
                                           packs=UNEVEN_PACKS, max_sequences_per_pack=3,
                                           atol=1e-6)
    assert result.max_gradient_difference is not None


def test_gradient_equals_each_sequence_alone():
    """The loss rebuilt from each sequence run alone (no packing code), and its gradient."""
    policy = decoder_policy()
    pairs = make_pairs()
    reference = reference_scores()
    model = PreferenceModel(policy, "precomputed", loss="sigmoid", **LOSS_OPTIONS)
    packed = pack(with_reference(items(pairs), reference), UNEVEN_PACKS, max_pairs=3)
    x = {k: tf.constant(v) for k, v in packed.items()}
    model(x)
    with tf.GradientTape() as tape:
        packed_loss = model.compute_loss(x=x, y_pred=model(x), training=False)
    packed_grads = tape.gradient(packed_loss, model.trainable_variables)

    with tf.GradientTape() as tape:
        # Every sequence alone, each its own right-padded row of one call.
        log_probs = sequences_alone(policy, [p["prompt"] + p[side] for p in pairs
                                             for side in ("chosen", "rejected")])
        terms = []
        for i, pair in enumerate(pairs):
            scores = []
            for row, response in ((2 * i, pair["chosen"]), (2 * i + 1, pair["rejected"])):
                start = len(pair["prompt"]) - 1
                picked = log_probs[row, start:start + len(response)]
                scores.append(tf.reduce_sum(tf.gather(picked, response, batch_dims=1)))
            h = (scores[0] - reference["chosen"][i]) - (scores[1] - reference["rejected"][i])
            terms.append(-tf.math.log_sigmoid(LOSS_OPTIONS["beta"] * h))
        alone_loss = tf.add_n(terms) / len(pairs)
    alone_grads = tape.gradient(alone_loss, policy.trainable_variables)
    assert float(packed_loss) == pytest.approx(float(alone_loss), abs=1e-6)
    assert [v.path for v in model.trainable_variables] == [
        v.path for v in policy.trainable_variables]
    for a, b in zip(packed_grads, alone_grads):
        assert np.abs(np.asarray(a) - np.asarray(b)).max() < 1e-6


@pytest.mark.parametrize("kwargs, message", [
    (dict(loss="kto"), r"`loss` must be one of \('sigmoid', 'ipo', 'simpo', 'orpo'\). "
                       r"Received: loss='kto'"),
    (dict(beta=0), r"`beta` must be a finite number > 0. Received: beta=0"),
    (dict(orpo_lambda=-1.0), r"`orpo_lambda` must be a finite number > 0"),
    (dict(reference=object()), r"`reference` must be one of \('precomputed',\) or a causal LM"
                               r".* or None. Received: reference=<object"),
    (dict(reference="packs"), r"Received: reference='packs'"),
])
def test_bad_arguments_get_one_clear_error(kwargs, message):
    with pytest.raises(TfpackError, match=message):
        PreferenceModel(decoder_policy(), **kwargs)


def test_a_precomputed_reference_absent_from_the_packs_is_refused():
    model = PreferenceModel(decoder_policy(), "precomputed", loss="sigmoid")
    with pytest.raises(TfpackError, match=r"reference='precomputed'\)` reads the reference's "
                                          r"log-likelihoods from the packs.*Received: packs "
                                          r"without \['reference_chosen_log_likelihood'"):
        model(pack(items(make_pairs(count=2)), [[0, 1]]))


@pytest.mark.parametrize("loss", ["sigmoid", "simpo"])
@pytest.mark.parametrize("positions", ["rotary", "learned"])
def test_prompt_sharing_equals_the_unshared_computation(loss, positions):
    policy, alone = policy_and_alone(3, attention_implementation="dense",
                                     position_embedding=positions)
    pairs = make_pairs(seed=3)
    reference = reference_scores()
    packs = [[4, 1, 6], [2, 0], [5], [3]]
    outputs = {}
    for share in (False, True):
        model = PreferenceModel(policy, "precomputed", loss=loss, share_prompt=share,
                                **LOSS_OPTIONS)
        batch = pack(with_reference(items(pairs, share_prompt=share), reference), packs,
                     max_pairs=3)
        outputs[share] = per_pair(model(batch), packs, len(pairs))
    assert close(outputs[True]["chosen_log_likelihood"], alone[:, 0])
    assert close(outputs[True]["rejected_log_likelihood"], alone[:, 1])
    for name in outputs[False]:
        assert close(outputs[True][name], outputs[False][name]), name


def test_prompt_sharing_gradients_equal_unpacked():
    model = PreferenceModel(decoder_policy(attention_implementation="dense"), "precomputed",
                            loss="sigmoid", share_prompt=True, **LOSS_OPTIONS)
    examples = with_reference(items(make_pairs(), share_prompt=True), reference_scores())
    assert_packed_equals_unpacked(model, examples, max_length=MAX_LENGTH, packs=UNEVEN_PACKS,
                                  max_sequences_per_pack=3, atol=1e-6)


def test_prompt_sharing_refuses_backbones_it_cannot_run():
    with pytest.raises(TfpackError, match=r"`share_prompt=True` needs a `policy` on tfpack's "
                                          r"DecoderBackbone with dense attention"):
        PreferenceModel(decoder_policy(attention_implementation="segmented",
                                       max_sequences_per_pack=6), share_prompt=True)
