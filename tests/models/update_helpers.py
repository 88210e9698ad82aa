"""One `Trainer` update, in process or over two replicas: the loss-normalization tests.

The SFT tests (`sft_helpers`) and the preference tests (`preference_helpers`)
ask the same question of different models: does one update split into
micro-batches, accumulation steps or replicas move the weights as the global
loss does? `trainer_update` makes the update; `replicas_updates` makes it under
MirroredStrategy over two logical CPUs, in a subprocess (`replicas_run.py`:
logical devices must be set before TensorFlow starts). `two_replicas` runs every
two-replica check of the suite (`SESSION_JOBS`) in that one subprocess, once a
test session.
"""

import os
import subprocess
import sys

import numpy as np

_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replicas_run.py")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def trainer_update(strategy, make_model, packs, micro, accumulation):
    """Weights after ONE `Trainer` update (SGD, learning rate 1) on ``packs``.

    ``make_model()`` builds the model inside the strategy's scope (and seeds it).
    Returns the trainable weights and the update's history record.
    """
    import keras
    import tensorflow as tf

    from tfpack.training import Trainer

    with strategy.scope():
        model = make_model()
        trainer = Trainer(model, keras.optimizers.SGD(1.0), micro_batch_size=micro,
                          accumulation_steps=accumulation, strategy=strategy,
                          jit_compile=False, progress=False, log_every=1)
    result = trainer.fit(tf.data.Dataset.from_tensor_slices(packs), 1)
    return [v.numpy() for v in model.trainable_variables], result.history[-1]


def _outputs(jobs, directory):
    return {job: os.path.join(str(directory), f"{job[0]}-{job[1]}.npz") for job in jobs}


def _run(jobs, directory, timeout):
    from unused_imports import with_site  # tests/: on the path in the suite, not in the runner

    env = {**os.environ, "PYTHONPATH": with_site(_ROOT), "CUDA_VISIBLE_DEVICES": ""}
    outs = _outputs(jobs, directory)
    arguments = [a for job in jobs for a in (*job, outs[job])]
    done = subprocess.run([sys.executable, _RUNNER, *arguments], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _load(jobs, directory):
    weights = {}
    for job, out in _outputs(jobs, directory).items():
        data = np.load(out)
        if job[0] in ("distributed_checks", "distributed_run"):
            weights[job] = dict(data)
            continue
        weights[job] = [data[f"arr_{i}"] for i in range(len(data.files) - 1)]
    return weights


def replicas_updates(jobs, directory, timeout=400):
    """For each ``(helpers, variant)``, ``trainer_update(strategy, variant, micro=1,
    accumulation=2)`` of the module ``helpers`` on 2 replicas, all in one subprocess.

    ``helpers`` names the helper module (``"sft_helpers"``, ``"preference_helpers"``),
    or ``"distributed_checks"`` / ``"distributed_run"`` (``variant`` names one of its
    ``CHECKS``); the ``.npz`` files go to ``directory``. Returns ``{(helpers, variant):
    weights}``, a check's ``{name: array}`` in place of weights.
    """
    _run(jobs, directory, timeout)
    return _load(jobs, directory)


# Every check of the suite under MirroredStrategy over two logical CPUs: test_replicas.py's
# and tests/training/test_distributed.py's (`distributed_run`). One process start (Python,
# TensorFlow and tfpack imported, the logical devices and the strategy made: about 2.5 CPU
# s) instead of one a file.
SESSION_JOBS = (("sft_helpers", "token"), ("preference_helpers", "sigmoid"),
                ("distributed_checks", "bert_gradients"), ("distributed_checks", "fit_loss"),
                ("distributed_run", "mirrored"))


def two_replicas(tmp_path_factory, timeout=900):
    """`replicas_updates` of `SESSION_JOBS`, once per test session (`session_folder`: under
    pytest-xdist the first worker process that asks runs it, the others read what it left).
    Fails (`pytest.fail`) in every test that asks where the process failed."""
    from session_once import session_folder

    folder = session_folder(tmp_path_factory, "two_replicas",
                            lambda folder: _run(SESSION_JOBS, folder, timeout))
    return _load(SESSION_JOBS, folder)


def max_difference(a, b):
    """The largest absolute difference between two lists of weights."""
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
