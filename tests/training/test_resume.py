"""Resuming the Trainer: the learning rate passed in applies, a damaged latest checkpoint
falls back to the newest intact one, dropout's random state is checkpointed (resumed ==
uninterrupted), a finite dataset ends cleanly, logs do not repeat, leftovers are cleaned."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.training import Lamb, Trainer
from tinymodels import TinyPretrainer, dataset, packed_examples


@keras.saving.register_keras_serializable(package="tfpack_tests")
class DropoutPretrainer(TinyPretrainer):
    """TinyPretrainer with dropout on its hidden states."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dropout = keras.layers.Dropout(0.3, seed=7)

    def call(self, x, training=False):
        h = self.embed(x["input_ids"]) + self.position(x["position_ids"])
        h = self.dropout(self.layer_norm(self.dense(h)), training=training)
        gather = lambda p: keras.ops.take_along_axis(h, keras.ops.expand_dims(p, -1), axis=1)
        return {"mlm_logits": self.mlm(gather(x["masked_lm_positions"])),
                "nsp_logits": self.nsp(gather(x["cls_positions"]))}


def _trainer(directory=None, model=TinyPretrainer, learning_rate=0.02, **kwargs):
    keras.utils.set_random_seed(0)
    return Trainer(model(), Lamb(learning_rate=learning_rate), micro_batch_size=2,
                   progress=False, jit_compile=False, checkpoint_dir=directory,
                   log_every=kwargs.pop("log_every", 1), **kwargs)


def _weights(trainer):
    return [w.numpy() for w in trainer.model.weights]


@pytest.fixture(scope="module")
def four_updates_run(tmp_path_factory):
    """4 updates at learning rate 0.02, trained once, logged every update: the checkpoints
    (ckpt-2, ckpt-4) for the tests that resume from a copy, the weights and the log."""
    folder = tmp_path_factory.mktemp("four_updates")
    trainer = _trainer(str(folder / "ckpt"), checkpoint_every=2,
                       log_path=str(folder / "log.jsonl"))
    trainer.fit(dataset(40).repeat(), 4)
    return folder / "ckpt", _weights(trainer), folder / "log.jsonl"


@pytest.fixture(scope="module")
def four_updates(four_updates_run):
    return four_updates_run[0]


def test_dropout_resumed_equals_uninterrupted(tmp_path):
    data = dataset(40).repeat()
    straight = _trainer(str(tmp_path), model=DropoutPretrainer, checkpoint_every=2)
    straight.fit(data, 4)
    shutil.rmtree(tmp_path / "ckpt-4")  # as a kill between the two saves leaves the folder
    resumed = _trainer(str(tmp_path), model=DropoutPretrainer, checkpoint_every=2)
    assert resumed.fit(data, 4).resumed_from == 2
    for x, y in zip(_weights(resumed), _weights(straight)):
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_resume_applies_the_new_learning_rate(tmp_path, four_updates):
    shutil.copytree(four_updates, tmp_path / "run")
    second = _trainer(str(tmp_path / "run"), learning_rate=0.005)
    assert second.fit(dataset(40).repeat(), 5).resumed_from == 4
    assert float(second.optimizer.learning_rate.numpy()) == pytest.approx(0.005)


@pytest.mark.parametrize("damage", ["metadata", "state"])
def test_damaged_latest_checkpoint_falls_back_with_a_warning(tmp_path, four_updates, damage):
    data = dataset(40).repeat()
    folder = tmp_path / "run"
    shutil.copytree(four_updates, folder)
    latest = folder / "ckpt-4"
    if damage == "metadata":
        (latest / "tfpack_checkpoint.json").write_text('{"step": 4, "sig')
    else:
        index = next(p for p in latest.iterdir() if p.name.endswith(".index"))
        index.write_bytes(index.read_bytes()[:20])
    resumed = _trainer(str(folder), checkpoint_every=2)
    with pytest.warns(RuntimeWarning, match=r"skipping damaged checkpoint .*ckpt-4"):
        result = resumed.fit(data, 5)
    assert result.resumed_from == 2 and result.step == 5


def test_every_checkpoint_damaged_is_a_clear_error(tmp_path, four_updates):
    shutil.copytree(four_updates, tmp_path / "run")
    for step in (2, 4):
        (tmp_path / "run" / f"ckpt-{step}" / "tfpack_checkpoint.json").write_text("[")
    with pytest.warns(RuntimeWarning), pytest.raises(
            TfpackError, match=r"A checkpoint must be intact to resume from. Received: "
                               r".*ckpt-4.*ckpt-2"):
        _trainer(str(tmp_path / "run")).fit(dataset(40).repeat(), 5)


def test_finite_dataset_ends_cleanly_with_consistent_counters(tmp_path, four_updates_run):
    # 9 packs, 2 per update: 4 updates, then the 9th pack alone is not an update.
    trainer = _trainer(str(tmp_path), log_every=3)
    result = trainer.fit(dataset(9), 10)
    assert result.data_exhausted and result.step == 4 == int(trainer.step.numpy())
    assert [r["step"] for r in result.history] == [3, 4]
    assert result.checkpoint.endswith("ckpt-4")
    # The weights of exactly 4 updates: the fixture's, on the same first 8 packs
    # (`packed_examples(9)` is the start of `packed_examples(40)`).
    start = packed_examples(40)
    for name, values in packed_examples(9).items():
        np.testing.assert_array_equal(values, start[name][:9])
    for x, y in zip(four_updates_run[1], _weights(trainer)):
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_resume_does_not_repeat_log_lines_and_cleans_leftovers(tmp_path, four_updates_run):
    checkpoints, _, straight_log = four_updates_run
    lines = straight_log.read_text().splitlines(keepends=True)
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]
    # As after a kill while update 4 was saved: steps 1-3 logged and a half-written line,
    # ckpt-2 complete and what the interrupted save of ckpt-4 left (a copy of the run).
    shutil.copytree(checkpoints, tmp_path / "ckpt")
    os.rename(tmp_path / "ckpt" / "ckpt-4", tmp_path / "ckpt" / ".tmp-ckpt-4-deadbeef")
    log = tmp_path / "log.jsonl"
    log.write_text("".join(lines[:3]) + '{"step": 4, "lo')
    data = dataset(40).repeat()
    _trainer(str(tmp_path / "ckpt"), log_path=str(log), checkpoint_every=2).fit(data, 4)
    steps = [json.loads(line)["step"] for line in log.read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["ckpt-2", "ckpt-4"]
