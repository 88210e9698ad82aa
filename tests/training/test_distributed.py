"""Scale-out is tf.distribute: two replicas reach the weights of one device with the same
global batch, both as MirroredStrategy over two logical CPUs (the suite's one two-replica
process, `update_helpers.two_replicas` in tests/models, runs `distributed_run.py`'s
scenario) and as MultiWorkerMirroredStrategy with two worker processes on 127.0.0.1 (the
suite's one worker pair, `multiworker.py`)."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from unused_imports import with_site

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 150
# 3 updates of 2 accumulated micro-batches: 4 packs per micro-step in total
# (`distributed_run.STEPS, ACC, MICRO`).
STEPS, ACC, GLOBAL_MICRO = 3, 2, 4


def _env(**extra):
    """The workers' environment. XLA compiles the Trainer's step (and `fit` with
    ``jit_compile=True``) at LLVM level 0, as everywhere in the suite (``XLA_FLAGS`` from
    ``conftest.py``): how fast the code runs, not what it computes; every run a test
    compares (workers and their references) has the same flags. The mirrored process:
    22.3 -> 17.2 CPU s."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": with_site(ROOT), **extra}
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def _wait(process, timeout=TIMEOUT):
    if process.returncode is not None and process.stdout.closed:  # Waited for already.
        assert process.returncode == 0
        return
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        pytest.fail(f"worker timed out after {timeout}s:\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]


def _weights(path):
    data = np.load(path)
    return [data[f"arr_{i}"] for i in range(len(data.files) - 1)], data["loss"]


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _assert_same(weights, reference):
    (ours, our_loss), (theirs, their_loss) = weights, reference
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(our_loss, their_loss, rtol=1e-5)
    assert our_loss.shape == (2,)  # Logged at steps 2 and 3.


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory):
    """The Trainer, then `model.fit`, under MirroredStrategy, and their one-device
    references (the Trainer; `model.fit` with XLA), from the suite's one two-replica
    process (`distributed_run.CHECKS["mirrored"]`)."""
    sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "models"))  # tests/models: update_helpers
    from update_helpers import two_replicas

    return two_replicas(tmp_path_factory)["distributed_run", "mirrored"]


def _output(mirrored, run="mirrored"):
    """A run's weights and logged losses (`distributed_run.mirrored`)."""
    count = sum(1 for name in mirrored if name.split(":")[0] == run) - 1
    return [mirrored[f"{run}:{i}"] for i in range(count)], mirrored[f"{run}:loss"]


def test_mirrored_two_logical_cpus_matches_one_device(mirrored):
    _assert_same(_output(mirrored), _output(mirrored, "reference"))


def test_multi_worker_two_processes_matches_one_process(mirrored, tmp_path_factory):
    """Two workers train 2 updates and checkpoint, then a new Trainer (new model and
    optimizer) in each worker resumes to update 3: the weights equal 3 straight updates in
    one process (nothing lost or repeated). The suite's one worker pair
    (`multiworker.worker_pair`) runs it."""
    from multiworker import SETTINGS, scenario, worker_pair

    assert SETTINGS["distributed"] == {"micro": GLOBAL_MICRO // 2, "acc": ACC,
                                       "steps": STEPS - 1, "resume_to": STEPS}
    folder = worker_pair(tmp_path_factory)
    scenario(folder, "distributed")
    checkpoints = folder / "distributed" / "checkpoints"
    assert sorted(os.listdir(checkpoints)) == [f"ckpt-{STEPS - 1}", f"ckpt-{STEPS}"]
    weights, losses = _weights(folder / "distributed" / "w.npz")
    reference = _output(mirrored, "reference")
    for a, b in zip(weights, reference[0]):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(losses, reference[1][-1:], rtol=1e-5)  # the resumed interval


def test_fit_under_mirrored_matches_single_device_fit_with_xla(mirrored):
    """`model.fit`: two replicas (jit_compile=False, see docs/training.md) reach the weights
    of one device with `jit_compile=True` and the same global batch."""
    (ours, our_losses), (theirs, their_losses) = (_output(mirrored, "fit"),
                                                  _output(mirrored, "fit_xla"))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-5)
