"""The Trainer on one device: global denominators, accumulation, resume, logs, errors."""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.training import Lamb, NonFiniteLossError, Trainer
from tinymodels import TinyPretrainer, dataset, packed_examples


def _trainer(micro=2, acc=1, optimizer=None, jit_compile=False, **kwargs):
    # XLA only where a test is about the compiled step: compiling costs seconds.
    keras.utils.set_random_seed(0)
    model = TinyPretrainer()
    optimizer = optimizer or Lamb(learning_rate=0.02)
    return Trainer(model, optimizer, micro_batch_size=micro, accumulation_steps=acc,
                   progress=False, log_every=kwargs.pop("log_every", 2),
                   jit_compile=jit_compile, **kwargs)


def _weights(trainer):
    return [w.numpy() for w in trainer.model.weights]


def test_one_update_follows_the_global_mean_loss():
    """2 micro-batches x 2 packs: the update uses sum over ALL targets / ALL counts."""
    trainer = _trainer(micro=2, acc=2, optimizer=keras.optimizers.SGD(1.0), jit_compile=True)
    trainer.fit(dataset(8), 1)
    reference = _trainer(micro=4, optimizer=keras.optimizers.SGD(1.0)).model
    x = {k: tf.constant(v[:4]) for k, v in packed_examples(8).items()}
    reference(x)
    with tf.GradientTape() as tape:
        stats = reference.loss_statistics(x, reference(x, training=True))
        loss = (stats["mlm_loss_sum"] / stats["mlm_count"]
                + stats["nsp_loss_sum"] / stats["nsp_count"])
    grads = tape.gradient(loss, reference.trainable_variables)
    for v, g, ours in zip(reference.trainable_variables, grads, trainer.model.trainable_variables):
        expected = v.numpy() - (0 if g is None else tf.convert_to_tensor(g).numpy())
        np.testing.assert_allclose(ours.numpy(), expected, atol=2e-6)
    # The micro-batches hold different numbers of masked tokens, so averaging
    # per-micro-batch means would have given another update.
    counts = packed_examples(8)["masked_lm_weights"][:4].reshape(2, 2, -1).sum(axis=(1, 2))
    assert counts[0] != counts[1]


def test_accumulation_equals_a_bigger_batch():
    # Without XLA: the accumulation is the graph loop around the step, the same either way
    # (`test_one_update_follows_the_global_mean_loss` runs it with the compiled step).
    a = _trainer(micro=2, acc=2)
    a.fit(dataset(32), 3)
    b = _trainer(micro=4, acc=1)
    b.fit(dataset(32), 3)
    for x, y in zip(_weights(a), _weights(b)):
        np.testing.assert_allclose(x, y, atol=1e-5)


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """6 updates, logged every 2 (to a file), without checkpoints: the run the resumed one
    must reach, and the log lines' test."""
    log = tmp_path_factory.mktemp("straight") / "log.jsonl"
    trainer = _trainer(log_path=str(log))
    return trainer, trainer.fit(dataset(40).repeat(), 6), log


def test_logs_json_lines(straight):
    _, result, log = straight
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [2, 4, 6] == [r["step"] for r in result.history]
    for key in ("loss", "mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy",
                "real_tokens_per_second", "packs_per_second"):
        assert np.isfinite(lines[-1][key]), key
    assert lines[-1]["loss"] == pytest.approx(lines[-1]["mlm_loss"] + lines[-1]["nsp_loss"])


@pytest.fixture(scope="module")
def three_updates(tmp_path_factory):
    """A run checkpointed every 2 updates, stopped at 3 (ckpt-2, ckpt-3): resumed by one
    test, refused to another configuration by another (each from a copy)."""
    folder = tmp_path_factory.mktemp("three_updates") / "run"
    result = _trainer(checkpoint_dir=str(folder), checkpoint_every=2).fit(
        dataset(40).repeat(), 3)
    return folder, result


def test_resume_continues_the_same_stream(tmp_path, straight, three_updates):
    # Packs are distinct, so a lost or repeated pack changes the weights.
    folder, result = tmp_path / "run", three_updates[1]
    shutil.copytree(three_updates[0], folder)
    assert result.checkpoint.endswith("ckpt-3")
    second = _trainer(checkpoint_dir=str(folder), checkpoint_every=2)
    result = second.fit(dataset(40).repeat(), 6)
    assert result.resumed_from == 3 and result.step == 6
    for x, y in zip(_weights(second), _weights(straight[0])):
        np.testing.assert_allclose(x, y, atol=1e-6)
    # Only complete checkpoints, nothing temporary, oldest pruned.
    assert sorted(os.listdir(folder)) == ["ckpt-3", "ckpt-4", "ckpt-6"]


def test_checkpoint_from_another_config_is_refused(tmp_path, three_updates):
    shutil.copytree(three_updates[0], tmp_path / "run")
    keras.utils.set_random_seed(0)
    other = Trainer(TinyPretrainer(hidden=6), Lamb(), micro_batch_size=2,
                    checkpoint_dir=str(tmp_path / "run"), progress=False, jit_compile=False)
    with pytest.raises(TfpackError, match=r"same configuration .* differ: .*dense/kernel"):
        other.fit(dataset(16), 2)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    features = packed_examples(16)
    trainer = _trainer(checkpoint_dir=str(tmp_path), checkpoint_every=2, log_every=2)
    trainer.fit(tf.data.Dataset.from_tensor_slices(features), 2)
    # Poison every pack after the first 8 with a NaN prediction weight.
    features["masked_lm_weights"][8:, 0] = np.nan
    features["masked_lm_weights"][8:, 1:] = 0
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss at step=5") as info:
        _trainer(checkpoint_dir=str(tmp_path), checkpoint_every=2).fit(
            tf.data.Dataset.from_tensor_slices(features), 8)
    assert info.value.step == 5 and info.value.checkpoint.endswith("ckpt-4")
    assert sorted(os.listdir(tmp_path)) == ["ckpt-2", "ckpt-4"]


def test_mixed_precision_uses_loss_scaling():
    keras.utils.set_random_seed(0)
    model = TinyPretrainer(dtype="mixed_float16")
    trainer = Trainer(model, Lamb(learning_rate=0.02), micro_batch_size=4, progress=False,
                      log_every=2, jit_compile=False)
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    result = trainer.fit(dataset(32), 4)
    assert np.isfinite(result.history[-1]["loss"])


def test_dataset_that_does_not_fit_the_model():
    trainer = _trainer()
    trainer.model({k: tf.constant(v) for k, v in packed_examples(2).items()})  # L=16, M=4
    bad = dataset(8, L=12, M=5)
    with pytest.raises(TfpackError, match=r"input_ids has L=12 but the model was built with "
                                          r"max_length=16.*masked_lm_.* has M=5"):
        trainer.fit(bad, 1)
    # An unbuilt model: L may not exceed its position table.
    from tfpack import models

    small = models.BertPretrainer(models.BertEncoder(
        vocabulary_size=11, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
        max_sequence_length=8))
    with pytest.raises(TfpackError, match=r"L=16 but the model's position table has "
                                          r"max_sequence_length=8"):
        Trainer(small, Lamb(), micro_batch_size=2, progress=False).fit(dataset(8), 1)
    batched = dataset(8).batch(2)
    with pytest.raises(TfpackError, match=r"rank 2"):
        _trainer().fit(batched, 1)


def test_bad_arguments():
    with pytest.raises(TfpackError, match=r"`micro_batch_size` must be a positive integer. "
                                          r"Received: micro_batch_size=0"):
        Trainer(TinyPretrainer(), Lamb(), micro_batch_size=0)
    with pytest.raises(TfpackError, match=r"model contract"):
        Trainer(keras.Sequential([keras.layers.Dense(1)]), Lamb(), micro_batch_size=1)


class MiscountingModel(TinyPretrainer):
    def loss_statistics(self, x, y_pred):
        stats = super().loss_statistics(x, y_pred)
        stats["nsp_count"] = stats["nsp_count"] + 1.0  # Not what the features say.
        return stats


def test_denominators_must_match_the_models_counts():
    trainer = Trainer(MiscountingModel(), Lamb(), micro_batch_size=2, progress=False,
                      log_every=1, jit_compile=False)
    with pytest.raises(TfpackError, match=r"loss term 'nsp' .* `target_counts\(x\)`"):
        trainer.fit(dataset(8), 1)


def test_loss_balancing_uses_expected_counts():
    """With `expected_counts`, the denominator is expected count x packs in the update."""
    keras.utils.set_random_seed(0)
    model = TinyPretrainer()
    model.expected_counts = {"mlm": 2.0}
    trainer = Trainer(model, keras.optimizers.SGD(1.0), micro_batch_size=2,
                      accumulation_steps=2, progress=False, jit_compile=False)
    x = {k: tf.constant(v[:4]) for k, v in packed_examples(8).items()}
    model(x)
    start = [w.numpy() for w in model.trainable_weights]
    trainer.fit(dataset(8), 1)
    probe = TinyPretrainer()
    probe(x)
    probe.set_weights([w for w in start])
    with tf.GradientTape() as tape:
        stats = probe.loss_statistics(x, probe(x, training=True))
        loss = stats["mlm_loss_sum"] / (2.0 * 4) + stats["nsp_loss_sum"] / stats["nsp_count"]
    grads = tape.gradient(loss, probe.trainable_variables)
    g = tf.convert_to_tensor(grads[-1]).numpy()
    np.testing.assert_allclose(model.trainable_weights[-1].numpy(), start[-1] - g, atol=2e-6)


class BranchingCounts(TinyPretrainer):
    def target_counts(self, x):
        counts = super().target_counts(x)
        if counts["mlm"] > 0:  # A Python `if` on a tensor: needs AutoGraph in a graph.
            counts["mlm"] = counts["mlm"] + 0.0
        return counts


def test_the_models_own_code_keeps_autograph():
    """The Trainer traces its update loop without AutoGraph (cheaper to trace); the model's
    code it calls there (`target_counts`, or its forward pass) is still converted."""
    keras.utils.set_random_seed(0)
    trainer = Trainer(BranchingCounts(), Lamb(), micro_batch_size=2, progress=False,
                      log_every=1, jit_compile=False)
    assert trainer.fit(dataset(4), 1).step == 1

