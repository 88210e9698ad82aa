"""Two MultiWorkerMirroredStrategy workers (processes on 127.0.0.1), each reading only its
share of a packed output of uneven shards, reach the weights of one process fed the same
global batches (`split_packs(...).global_batches`), across an epoch boundary with empty
packs, resumed after a checkpoint; and the same for `model.fit` on `packed_dataset_fn`.
One worker pair runs both (`packed_worker_run.py trainer ... --then-fit`): TensorFlow and
the strategy start once."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from sharded import in_order, write_sharded
from test_distributed import TIMEOUT, _env, _free_ports, _wait, _weights
from tfpack.packing.workers import split_packs
from tfpack.training import inputs
from tinymodels import packed_examples

SCRIPT = os.path.join(os.path.dirname(__file__), "packed_worker_run.py")
COUNTS = [7, 2, 5]  # 14 packs; 2 workers x 2 packs x 2 micro-steps: 2 updates an epoch
MICRO, ACC = 2, 2

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    packs = packed_examples(sum(COUNTS), seed=5)
    return write_sharded(tmp_path_factory.mktemp("packed"), packs, COUNTS), packs


def _workers(mode, directory, out, steps, extra=(), timeout=TIMEOUT):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    processes = [subprocess.Popen(
        [sys.executable, SCRIPT, mode, directory, str(out), "--steps", str(steps),
         "--micro", str(MICRO), "--acc", str(ACC), *extra],
        env=_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": i}})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    for process in processes:
        _wait(process, timeout)


def _global_stream(directory, packs, packs_per_step, worker_batch, epochs):
    split = split_packs(COUNTS, num_workers=2, packs_per_step=packs_per_step)
    order = np.concatenate([split.global_batches(worker_batch).ravel()] * epochs)
    empty = next(inputs.empty_packs(inputs.packed_output(directory), 1).as_numpy_iterator())
    return tf.data.Dataset.from_tensor_slices(in_order(packs, order, empty))


@pytest.fixture(scope="module")
def workers(output, tmp_path_factory):
    """The worker pair: the Trainer (2 updates, then resumed to 3), then `model.fit` for an
    epoch of global batch 4 (2 per worker: 4 steps, the last with an empty pack per worker)."""
    folder = tmp_path_factory.mktemp("workers")
    _workers("trainer", output[0], folder / "w.npz", 2,
             ("--checkpoint-dir", str(folder / "checkpoints"), "--resume-to", "3",
              "--then-fit", str(folder / "fit.npz"), "--fit-steps", "4"),
             timeout=3 * TIMEOUT)  # three trainings a process
    return folder


def test_two_workers_read_their_shares_and_match_one_process(output, workers):
    """3 updates (the third starts epoch 2; each worker's second update holds one empty
    pack): 2 updates, checkpoint, a new Trainer (new model and optimizer) in each worker
    resumes to 3 == one process, 3 updates."""
    import keras

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer

    directory, packs = output
    weights, losses = _weights(workers / "w.npz")
    keras.utils.set_random_seed(0)
    reference = Trainer(TinyPretrainer(), Lamb(learning_rate=0.02), micro_batch_size=2 * MICRO,
                        accumulation_steps=ACC, log_every=1, progress=False, jit_compile=False)
    history = reference.fit(_global_stream(directory, packs, MICRO * ACC, MICRO, 2), 3).history
    for a, b in zip(weights, reference.model.weights):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, [history[-1]["loss"]], rtol=1e-5)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "Keras 3 `fit` under MultiWorkerMirroredStrategy fails for every model "
    "(tensorflow/tensorflow#72388: it reduces a batch of dict features and scalar logs with "
    "`strategy.reduce`, which MWMS refuses); passes, and must then lose this mark, once fixed"))
def test_model_fit_on_packed_dataset_fn_matches_one_process(output, workers):
    from packed_worker_run import bert

    directory, packs = output
    for index in range(2):  # `model.fit` raised on a worker (which went on to exit 0)
        error = workers / f"fit.npz.error{index}"
        assert not error.exists(), f"worker {index}:\n{error.read_text()[-3000:]}"
    weights, losses = _weights(workers / "fit.npz")
    model = bert(tf.distribute.get_strategy())
    data = _global_stream(directory, packs, MICRO, MICRO, 1).batch(2 * MICRO)
    history = model.fit(data, epochs=1, verbose=0)
    for a, b in zip(weights, model.weights):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, history.history["loss"], rtol=1e-5)
