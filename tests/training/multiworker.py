"""Test helper: the one MultiWorkerMirroredStrategy worker pair (processes on 127.0.0.1) of
the suite's multi-worker training checks (test_distributed.py, test_distributed_packed.py,
test_host_training.py), each scenario run once (`multiworker_run.py`).

Each process start imports TensorFlow, Keras and tfpack and makes the strategy (about
2.7 CPU s with the first trace's set-up): one pair for three files instead of a pair
each. `worker_pair` writes the inputs, starts the pair and waits once per test session:
under pytest-xdist the first worker process that asks runs it, the others wait on a file
lock and read what it left.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from session_once import session_folder
from sharded import write_sharded
from test_distributed import _env, _free_ports, _wait
from tinymodels import packed_examples

SCRIPT = os.path.join(os.path.dirname(__file__), "multiworker_run.py")
HOST_SIZES = [20, 6, 9]  # records a file: worker 0 reads files 0 and 2 (29), worker 1 file 1
PACKED_COUNTS = [7, 2, 5]  # 14 packs; 2 workers x 2 packs x 2 micro-steps: 2 updates an epoch
# The scenarios' updates and micro-batches (packs a worker), checked by their tests.
SETTINGS = {"distributed": {"micro": 2, "acc": 2, "steps": 2, "resume_to": 3},
            "packed": {"micro": 2, "acc": 2, "steps": 1, "resume_to": 3, "fit_steps": 4}}
# The pair runs three trainings of the distributed scenario, three of the packed one, an
# epoch, its resume and four refused resumes of the per-host one: 137-254 s of those loaded.
TIMEOUT = 900


def packed_inputs():
    """The packs of the packed scenario's output (numpy, the order of its shards)."""
    return packed_examples(sum(PACKED_COUNTS), seed=5)


def write_host_records(folder):
    """The per-host scenario's Google records: one file a `HOST_SIZES` entry."""
    import tensorflow as tf

    from tfpack.formats import google_example

    rng = np.random.default_rng(3)
    for i, size in enumerate(HOST_SIZES):
        with tf.io.TFRecordWriter(str(folder / f"part-{i}.tfrecord")) as writer:
            for _ in range(size):
                n = int(rng.integers(5, 16))
                ids = [2] + rng.integers(5, 40, size=n - 2).tolist() + [3]
                positions = sorted(rng.choice(np.arange(1, n - 1), 2, replace=False).tolist())
                writer.write(google_example(ids, [0] * n, positions, [ids[p] for p in positions],
                                            int(rng.integers(0, 2)), max_seq_length=32,
                                            max_predictions_per_seq=6))


def _run_pair(folder):
    (folder / "hosts").mkdir(parents=True)
    write_host_records(folder / "hosts")
    write_sharded(folder / "packed" / "output", packed_inputs(), PACKED_COUNTS)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    processes = [subprocess.Popen(
        [sys.executable, SCRIPT, str(folder), json.dumps(SETTINGS)],
        env=_env(TF_CONFIG=json.dumps({"cluster": cluster,
                                       "task": {"type": "worker", "index": i}})),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    for process in processes:  # a worker with fewer updates than the other would hang
        _wait(process, timeout=TIMEOUT)


def worker_pair(tmp_path_factory):
    """The folder of the pair's outputs (see `multiworker_run.py`), once per session
    (`session_folder`)."""
    return session_folder(tmp_path_factory, "multiworker", _run_pair)


def scenario(folder, name):
    """Fails (`pytest.fail`, never an AssertionError that an xfail would take for its
    own) with a worker's traceback where scenario ``name`` raised."""
    for index in range(2):
        error = folder / f"{name}.error{index}"
        if error.exists():
            pytest.fail(f"worker {index}:\n{error.read_text()[-3000:]}")
