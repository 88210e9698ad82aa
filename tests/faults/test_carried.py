"""Fault injection, issue 33: options that must agree travel with the data and are checked.

Each scenario failed before its fix: packs built with ``share_prompt=True`` read
through a model (or `reference_log_likelihoods`) without it scored each response
without its prompt (0.008 off, no word); a learned position table of 8 rows
refused pairs of two 6-token sequences (it read the pair item's positions);
Keras `evaluate` averaged the loss per batch of packs, not per pair, and
`Trainer.evaluate` reported ``loss`` 0.0 after `compile`; a SavedModel's
``serving_default`` given packs of another length failed at a Reshape node.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tests.faults.outcomes import HELD, judge_call

PAIRS = [{"prompt": [1, 2, 3], "chosen": [4, 5], "rejected": [6, 7, 8]},
         {"prompt": [9, 10], "chosen": [11], "rejected": [12]},
         {"prompt": [13], "chosen": [14, 15], "rejected": [16]}]
PREDICT = dict(max_length=16, max_sequences_per_pack=2, jit_compile=False)


def _policy(**kwargs):
    keras.utils.set_random_seed(0)
    return tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
        **kwargs))


@pytest.fixture(scope="module")
def policy():
    return _policy()


def _pairs(share_prompt=False, pairs=PAIRS):
    return tfpack.builders.preference_examples(pairs, max_length=16, share_prompt=share_prompt)


@pytest.fixture(scope="module")
def scorer(policy):
    return tfpack.models.PreferenceModel(policy, loss="simpo")


@pytest.fixture(scope="module")
def plain_scores(scorer):
    """Each pair's log-likelihoods, its prompt stored twice (the reference numbers)."""
    return tfpack.predict(scorer, _pairs(), **PREDICT)


def test_shared_prompt_packs_through_a_model_without_it_are_refused(scorer, policy,
                                                                    plain_scores):
    verdict = judge_call(lambda: tfpack.predict(scorer, _pairs(True), **PREDICT), refuse=True,
                         match="Received: share_prompt=False and a shared prompt in example 0")
    assert verdict.outcome == HELD, verdict
    # The same packs through a model that reads shared prompts: each pair's own scores.
    shared = tfpack.predict(tfpack.models.PreferenceModel(policy, loss="simpo",
                                                          share_prompt=True), _pairs(True),
                            **PREDICT)
    for name in ("chosen_log_likelihood", "rejected_log_likelihood"):
        np.testing.assert_allclose(shared[name], plain_scores[name], rtol=1e-5)


def test_reference_log_likelihoods_of_shared_prompt_packs(policy, plain_scores):
    verdict = judge_call(lambda: tfpack.inference.reference_log_likelihoods(
        policy, _pairs(True), **PREDICT), refuse=True, match="share_prompt=True")
    assert verdict.outcome == HELD, verdict
    shared = tfpack.inference.reference_log_likelihoods(policy, _pairs(True), share_prompt=True,
                                                        **PREDICT)
    for name in shared:
        np.testing.assert_allclose(shared[name], plain_scores[name], rtol=1e-5)


def test_a_position_table_bounds_each_sequence_of_a_pair_not_the_pair():
    model = tfpack.models.PreferenceModel(
        _policy(position_embedding="learned", max_sequence_length=8), loss="simpo")
    six = [{"prompt": [1, 2, 3], "chosen": [4, 5, 6], "rejected": [7, 8, 9]}]  # 12 tokens
    out = tfpack.predict(model, _pairs(pairs=six), **PREDICT)
    assert np.isfinite(out["chosen_log_likelihood"]).all()
    nine = [{"prompt": [1, 2, 3], "chosen": [4, 5, 6, 7, 8, 9], "rejected": [7]}]
    verdict = judge_call(lambda: tfpack.predict(model, _pairs(pairs=nine), **PREDICT),
                         refuse=True, match="Received: position_ids=8 in example 0")
    assert verdict.outcome == HELD, verdict


def _uneven_batches():
    """Two batches of packs: 3 pairs, then 1 pair whose loss is far from theirs."""
    from tfpack.builders import preference_pair
    from tfpack.testing import pack_examples

    items = [preference_pair(p["prompt"], p["chosen"], p["rejected"]) for p in PAIRS]
    items.append(preference_pair([2], [19, 19, 19, 19], [3]))
    packs = [pack_examples(g, max_length=16, max_sequences_per_pack=2)
             for g in (items[:2], items[2:3], items[3:])]
    return {k: np.concatenate([np.asarray(p[k]) for p in packs]) for k in packs[0]}


def test_evaluate_averages_the_loss_over_pairs_not_batches_of_packs(policy):
    model = tfpack.models.PreferenceModel(policy, loss="simpo", beta=4.0)
    x = _uneven_batches()
    losses, mask = np.asarray(model(x)["loss"]), x["sequence_mask"]
    per_pair = float((losses * mask).sum() / mask.sum())
    per_batch = np.mean([(losses[r] * mask[r]).sum() / mask[r].sum() for r in ([0, 1], [2])])
    assert abs(per_batch - per_pair) > 1e-3  # the two averages differ: the test can fail
    model.compile(optimizer="sgd")
    dataset = tf.data.Dataset.from_tensor_slices(x)
    got = model.evaluate(dataset.batch(2), verbose=0, return_dict=True)
    assert got["loss"] == pytest.approx(per_pair, rel=1e-5)
    trainer = tfpack.training.Trainer(model, keras.optimizers.SGD(), micro_batch_size=2,
                                      jit_compile=False)
    result = trainer.evaluate(dataset)
    assert result["loss"] == pytest.approx(per_pair, rel=1e-5)
    assert result["preference_loss"] == pytest.approx(per_pair, rel=1e-5)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tfpack.export import export_saved_model

    keras.utils.set_random_seed(0)
    encoder = tfpack.models.BertEncoder(vocabulary_size=23, num_layers=1, hidden_dim=8,
                                        num_heads=2, intermediate_dim=16, max_sequence_length=12)
    model = tfpack.models.BertClassifier(encoder, 2, dropout=0.0)
    path = export_saved_model(model, tmp_path_factory.mktemp("served") / "m", max_length=12,
                              max_sequences_per_pack=3)
    return tf.saved_model.load(path).signatures["serving_default"], model.input_features


def _request(L, K, names):
    f = {"input_ids": np.zeros((1, L), np.int32), "sequence_ids": np.zeros((1, L), np.int32),
         "position_ids": np.zeros((1, L), np.int32), "token_type_ids": np.zeros((1, L), np.int32),
         "cls_positions": np.zeros((1, K), np.int32), "sequence_mask": np.zeros((1, K), np.float32)}
    f["input_ids"][0, :3], f["sequence_ids"][0, :3] = [2, 5, 7], 1
    f["position_ids"][0, :3], f["sequence_mask"][0, 0] = [0, 1, 2], 1.0
    return {k: tf.constant(v) for k, v in f.items() if k in names}


@pytest.mark.parametrize("L, K, named", [
    (8, 3, "`input_ids` must have 12 columns (the max_length L"),
    (16, 3, "`input_ids` must have 12 columns (the max_length L"),
    (12, 2, "`cls_positions` must have 3 columns (the max_sequences_per_pack K"),
])
def test_serving_packs_of_another_length_fail_a_named_assertion(served, L, K, named):
    signature, names = served
    assert signature(**_request(12, 3, names))["logits"].shape == (1, 3, 2)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        signature(**_request(L, K, names))
    assert named in error.value.message and "Reshape" not in error.value.message


@pytest.mark.slow  # one XLA compile of a tiny encoder (~10-20 s on a shared CPU)
def test_a_tag_beyond_num_classes_is_refused_by_name_under_xla_as_eagerly():
    """Under XLA the loss of a tag past the head was NaN (eagerly: TensorFlow refuses it)."""
    keras.utils.set_random_seed(0)
    encoder = tfpack.models.BertEncoder(vocabulary_size=23, num_layers=1, hidden_dim=8,
                                        num_heads=2, intermediate_dim=16, max_sequence_length=8)
    model = tfpack.models.TokenClassifier(encoder, num_classes=3, dropout=0.0)
    ids = np.array([[2, 5, 7, 9, 3, 4, 0, 0]] * 2, np.int32)
    x = {"input_ids": ids, "sequence_ids": (ids > 0).astype(np.int32),
         "position_ids": np.tile(np.arange(8, dtype=np.int32), (2, 1)) * (ids > 0),
         "labels": np.array([[0, 1, 2, -100, 1, 0, -100, -100]] * 2, np.int32)}
    x = {k: v for k, v in x.items() if k in model.required_features}
    x["labels"][1, 4] = 5
    trainer = tfpack.training.Trainer(model, keras.optimizers.SGD(), micro_batch_size=2,
                                      jit_compile=True, check_exact=False)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"`labels` must be class ids in \[0, 3\) \(num_classes of the model\)"
                             r"\. Received: labels=\] \[5\]"):
        trainer.fit(tf.data.Dataset.from_tensor_slices(x), num_steps=1)


def test_the_trainer_refuses_shared_prompt_packs_for_a_model_without_it(policy):
    from tfpack.testing import pack_examples

    packs = pack_examples([tfpack.builders.preference_pair(**p, share_prompt=True)
                           for p in PAIRS[:2]], max_length=16, max_sequences_per_pack=2)
    trainer = tfpack.training.Trainer(tfpack.models.PreferenceModel(policy, loss="simpo"),
                                      keras.optimizers.SGD(), micro_batch_size=1,
                                      jit_compile=False, check_exact=False)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"PreferenceModel\(share_prompt=True\) to read pairs that share"):
        trainer.fit(tf.data.Dataset.from_tensor_slices(packs), num_steps=1)
    # Keras `evaluate` (and `fit`) of the same model, on TensorFlow without XLA: one
    # `TfpackError`, as on JAX (`tests/faults/test_compiled_checks.py`: with XLA too).
    trainer.model.compile(optimizer="sgd", jit_compile=False)
    with pytest.raises(tfpack.errors.TfpackError, match=r"share_prompt=True\) to read"):
        trainer.model.evaluate(tf.data.Dataset.from_tensor_slices(packs).batch(1), verbose=0)


def test_a_direct_call_refuses_shared_prompt_packs_for_a_model_without_it(scorer):
    """`model(packs)` scored each response without its prompt, without a word."""
    from tfpack.testing import pack_examples

    packs = pack_examples([tfpack.builders.preference_pair(**p, share_prompt=True)
                           for p in PAIRS[:2]], max_length=16, max_sequences_per_pack=2)
    verdict = judge_call(lambda: scorer(packs), refuse=True,
                         match="Received: share_prompt=False and a shared prompt in example 0")
    assert verdict.outcome == HELD, verdict
    without_ids = {k: v for k, v in packs.items() if k != "example_ids"}
    with pytest.raises(tfpack.errors.TfpackError, match="shared prompt in pair 1 of pack 0"):
        scorer(without_ids)
    # In a TensorFlow graph: the trainer's named assertion (XLA would drop it).
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"PreferenceModel\(share_prompt=True\) to read pairs that share"):
        tf.function(lambda x: scorer(x))(packs)


@pytest.mark.slow  # one JAX process: 20-35 s on the shared 2 cores
def test_keras_on_jax_refuses_what_the_tensorflow_assertions_refuse():
    """Keras `fit`, `evaluate` and `predict` on JAX (jitted steps, no TensorFlow assertion)
    trained on labels past the head, on shared prompts for a model without them and on
    positions past the learned position table, without a word; now each batch is checked on
    the host before the step (one JAX process, `carried_jax_run.py`)."""
    import json
    import os
    import subprocess
    import sys

    from tests.jax_env import jax_env

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    done = subprocess.run([sys.executable, os.path.join(here, "carried_jax_run.py")],
                          capture_output=True, text=True, timeout=300,
                          env=jax_env(PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    labels = "refused: `labels` must be class ids in [0, 3) (num_classes of the model). " \
             "Received: labels=5"
    shared = ("refused: `model` must be a PreferenceModel(share_prompt=True) to read pairs "
              "that share their prompt")
    assert got.pop("labels_fit") == got.pop("labels_fit_second_batch") == labels
    assert got.pop("labels_evaluate") == labels
    assert got.pop("weights_kept") is True
    assert got.pop("sequence_labels_evaluate") == (
        "refused: `labels` must be class ids in [0, 2) (num_classes of the model). "
        "Received: labels=2")
    for call in ("fit", "evaluate", "predict"):
        assert got.pop(f"shared_prompt_{call}").startswith(shared)
    positions = ("refused: `position_ids` must be inside [0, 8) (the rows of the model's "
                 "position table). Received: position_ids=")
    for call in ("fit", "evaluate", "predict"):
        assert got.pop(f"positions_{call}") == positions + "9"
    assert got.pop("pair_positions_fit") == positions + "8"  # its own position, not the pack's
    assert got == {"empty_slot_label_evaluate": "accepted", "shared_prompt_model_fit": "accepted"}
