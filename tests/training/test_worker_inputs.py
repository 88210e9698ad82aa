"""Each worker reads its share of a packed output (`tfpack.training.inputs`): its ranges,
its empty packs, only its shards; the padding is exact; `Trainer.fit(directory)` and
`packed_dataset_fn` feed the global batches `split_packs` documents."""

import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from sharded import in_order, write_sharded
from tfpack.errors import TfpackError
from tfpack.packing.workers import split_packs
from tfpack.training import Lamb, Trainer, inputs, packed_dataset_fn
from tinymodels import L, TinyPretrainer, V, packed_examples

COUNTS = [7, 2, 5]  # 14 packs in uneven shards


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    packs = packed_examples(sum(COUNTS), seed=3)
    directory = write_sharded(tmp_path_factory.mktemp("packed"), packs, COUNTS)
    return directory, packs


def _empty(output_dir):
    return next(inputs.empty_packs(inputs.packed_output(output_dir), 1).as_numpy_iterator())


def _stack(dataset):
    items = list(dataset.as_numpy_iterator())
    return {n: np.stack([x[n] for x in items]) for n in items[0]}


def test_empty_pack_is_every_feature_at_its_padding(output):
    empty = _empty(output[0])
    assert set(empty) == set(output[1])
    assert not any(np.any(v) for v in empty.values())  # all 0 here: no example_ids, no [L] labels
    assert empty["sequence_mask"].shape == (3,) and empty["sequence_mask"].dtype == np.float32


def test_each_worker_reads_its_range_then_its_empty_packs(output):
    directory, packs = output
    split = split_packs(COUNTS, num_workers=2, packs_per_step=4)  # 2 updates, 1 empty each
    empty = _empty(directory)
    for w, expected in enumerate([list(range(0, 7)) + [-1], list(range(7, 14)) + [-1]]):
        got = _stack(inputs.worker_packs(directory, split, w, repeat=False))
        want = in_order(packs, expected, empty)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{w} {name}")


def test_a_worker_never_opens_the_shards_of_others(output, tmp_path):
    directory, packs = output
    copy = write_sharded(tmp_path / "copy", packs, COUNTS)
    described = inputs.packed_output(copy)
    # Worker 1 holds packs [7, 14): shards 1 and 2. Shard 0 becomes garbage after opening.
    path = described.shards[0][0]
    size = os.path.getsize(path)
    with open(path, "wb") as f:  # Same size: only reading it can tell.
        f.write((b"\x00garbage" * size)[:size])
    split = split_packs(COUNTS, num_workers=2, packs_per_step=4)
    assert split.shares[1].shards == (1, 2)
    assert len(list(inputs.worker_packs(described, split, 1, repeat=False))) == 8
    # The damage is seen by the worker that reads it, as the block is checked.
    with pytest.raises((TfpackError, tf.errors.OpError), match="digest|checked|corrupt|Data|readable TFRecord"):
        list(inputs.worker_packs(described, split, 0, repeat=False))


@pytest.mark.parametrize("start_step", [0, 1, 2, 3])
def test_resuming_at_a_step_continues_the_same_stream(output, start_step):
    directory, _ = output
    split = split_packs(COUNTS, num_workers=2, packs_per_step=2)  # 4 updates of 2 packs
    ids = lambda d: [x["input_ids"].tolist() for x in d.as_numpy_iterator()]  # noqa: E731
    straight = ids(inputs.worker_packs(directory, split, 1).take(20))
    resumed = ids(inputs.worker_packs(directory, split, 1, start_step=start_step)
                  .take(20 - 2 * start_step))
    assert resumed == straight[2 * start_step:]


def _gradients(model, batch):
    x = {n: tf.constant(v) for n, v in batch.items()}
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x, y_pred=model(x, training=False))
    return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]


@pytest.mark.parametrize("kind", ["tiny", "bert"])
def test_empty_packs_change_no_loss_and_no_gradient(output, kind):
    """The padding is exact: a batch with empty packs has the loss and gradients of the
    same batch without them (0 added to every loss sum and every target count)."""
    from tfpack import models

    directory, packs = output
    keras.utils.set_random_seed(0)
    if kind == "tiny":
        model = TinyPretrainer()
    else:
        model = models.BertPretrainer(models.BertEncoder(
            vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
            max_sequence_length=L, dropout=0.0, attention_dropout=0.0))
    real = in_order(packs, [0, 1, 2], _empty(directory))
    padded = in_order(packs, [0, -1, 1, 2, -1, -1], _empty(directory))
    model(real)
    loss, grads = _gradients(model, real)
    padded_loss, padded_grads = _gradients(model, padded)
    assert np.isfinite(float(padded_loss))
    np.testing.assert_allclose(float(padded_loss), float(loss), rtol=1e-6)
    for a, b in zip(padded_grads, grads):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def _trainer(micro, acc, **kwargs):
    keras.utils.set_random_seed(0)
    return Trainer(TinyPretrainer(), Lamb(learning_rate=0.02), micro_batch_size=micro,
                   accumulation_steps=acc, progress=False, jit_compile=False, log_every=1,
                   **kwargs)


def _global_stream(directory, packs, split, worker_batch, epochs):
    order = np.concatenate([split.global_batches(worker_batch).ravel()] * epochs)
    return tf.data.Dataset.from_tensor_slices(in_order(packs, order, _empty(directory)))


def test_trainer_on_a_packed_output_equals_the_global_batches(output, tmp_path):
    directory, packs = output
    # One worker, micro-batch 2, 2 accumulation steps: 4 updates per epoch (2 empty packs);
    # 6 updates cross into the second epoch. Checkpointed at updates 3 and 6.
    run = tmp_path / "run"
    ours = _trainer(2, 2, checkpoint_dir=str(run), checkpoint_every=3)
    result = ours.fit(directory, 6)
    assert result.step == 6 and ours.split(directory).steps == 4
    split = split_packs(COUNTS, num_workers=1, packs_per_step=4)
    reference = _trainer(2, 2)
    reference.fit(_global_stream(directory, packs, split, 2, 2), 6)
    for a, b in zip(ours.model.weights, reference.model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    # Resumed at update 3 from a checkpoint (update 6's removed, as a kill between the
    # two saves leaves the folder): the same weights as straight through.
    shutil.rmtree(run / "ckpt-6")
    second = _trainer(2, 2, checkpoint_dir=str(run), checkpoint_every=3)
    assert second.fit(inputs.packed_output(directory), 6).resumed_from == 3
    for a, b in zip(second.model.weights, ours.model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)


def test_a_later_fit_must_pass_the_same_input(output):
    directory, packs = output
    trainer = _trainer(2, 1)
    trainer.fit(directory, 0)  # Sets up the packed output's stream, traces nothing.
    with pytest.raises(TfpackError, match="continue the stream"):
        trainer.fit(tf.data.Dataset.from_tensor_slices(packs), 2)
    with pytest.raises(TfpackError, match="must be a tf.data.Dataset"):
        _trainer(2, 1).fit([1, 2], 1)


def test_packed_dataset_fn_for_model_fit(output):
    directory, packs = output
    fn = packed_dataset_fn(directory, global_batch_size=4)
    strategy = tf.distribute.get_strategy()
    assert fn.steps_per_epoch(strategy) == 4  # 14 packs + 2 empty
    batches = list(fn(tf.distribute.InputContext()).take(4).as_numpy_iterator())
    split = split_packs(COUNTS, num_workers=1, packs_per_step=4)
    want = _stack(_global_stream(directory, packs, split, 4, 1))
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches]),
                                  want["input_ids"])
    with pytest.raises(TfpackError, match="global_batch_size"):
        packed_dataset_fn(directory, global_batch_size=0)


@pytest.mark.parametrize("workers, replicas", [(2, 2), (2, 4)])
def test_packed_dataset_fn_gives_each_input_pipeline_its_share(output, workers, replicas):
    """Simulated contexts: worker w's per-replica batches are its part of each global batch."""
    directory, packs = output
    fn = packed_dataset_fn(directory, global_batch_size=8)
    per_worker = 8 // workers
    split = split_packs(COUNTS, num_workers=workers, packs_per_step=per_worker)
    empty = _empty(directory)
    for w in range(workers):
        context = tf.distribute.InputContext(workers, w, replicas)
        batches = list(fn(context).take(split.steps * replicas // workers).as_numpy_iterator())
        assert {len(b["input_ids"]) for b in batches} == {8 // replicas}
        got = np.concatenate([b["input_ids"] for b in batches])
        want = in_order(packs, split.worker_order(w), empty)["input_ids"]
        np.testing.assert_array_equal(got, want)


def test_model_fit_under_mirrored_on_packed_dataset_fn_equals_the_global_batches(output):
    """`model.fit` on `distribute_datasets_from_function(packed_dataset_fn)` (MirroredStrategy,
    one device) trains on the global batches of the split, empty packs included."""
    from packed_worker_run import bert

    directory, packs = output
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    fn = packed_dataset_fn(directory, global_batch_size=4)
    ours = bert(strategy)
    ours.fit(strategy.distribute_datasets_from_function(fn),
             steps_per_epoch=fn.steps_per_epoch(strategy), epochs=1, verbose=0)
    reference = bert(tf.distribute.get_strategy())
    split = split_packs(COUNTS, num_workers=1, packs_per_step=4)
    reference.fit(_global_stream(directory, packs, split, 4, 1).batch(4), epochs=1, verbose=0)
    for a, b in zip(ours.weights, reference.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
