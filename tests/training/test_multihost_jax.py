"""Keras on JAX, two processes (`examples/multihost_jax.py`): each reads its share, exact.

Two `jax.distributed` CPU processes (gloo collectives) train `model.fit` on a
packed output of uneven shards under `keras.distribution.DataParallel`. Both
end with the same weights, run the same updates, open only the shards of
their own range (seen by strace where it is installed), and match one
process fed the same global batches (``--as-processes 2``).
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from jax_env import jax_env
from open_trace import traced

pytest.importorskip("jax")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "multihost_jax.py")


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """BERT packs as `tfpack pack` writes them: 4 shards of 7, 7, 7 and a last short one."""
    import tensorflow as tf

    from tfpack.formats import google_example
    from tfpack.engines.local import pack_records

    folder = tmp_path_factory.mktemp("multihost")
    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(str(folder / "train.tfrecord")) as writer:
        for _ in range(60):
            n = int(rng.integers(5, 16))
            ids = [2] + list(rng.integers(5, 40, size=n - 2)) + [3]
            positions = sorted(rng.choice(np.arange(1, n - 1), size=2, replace=False).tolist())
            writer.write(google_example(ids, [0] * n, positions, [ids[p] for p in positions],
                                        int(rng.integers(0, 2)), max_seq_length=32,
                                        max_predictions_per_seq=6))
    stats = pack_records(str(folder / "train.tfrecord"), str(folder / "packed"), max_length=32,
                         max_sequences_per_pack=3, max_predictions_per_pack=6,
                         packs_per_shard=7, algorithm="ffd", seed=0)
    assert stats["packs"] % 7 and stats["packs"] > 21, stats["packs"]
    return str(folder / "packed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _command(packed, *args, trace=None):
    command = [sys.executable, EXAMPLE, "--input", packed, "--batch-size", "4",
               "--vocab-size", "40", *map(str, args)]
    return traced(command, trace) if trace else command


def _env():
    # Fast-compiling XLA (tests/jax_env.py): the three runs share the flags, so the
    # two processes and the reference still compute the same program. TensorFlow
    # stays importable: examples/multihost_jax.py reads the packed TFRecords with tf.data.
    return jax_env(tensorflow=True, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow  # three JAX processes, started together: ~30-60 s
def test_two_processes_read_their_shares_and_match_one_process(packed, tmp_path):
    port = _free_port()
    runs = [subprocess.Popen(
        _command(packed, "--num-processes", 2, "--process-id", i, "--coordinator",
                 f"localhost:{port}", "--epochs", 2, "--save-weights", tmp_path / f"w{i}.npz",
                 trace=tmp_path / f"trace{i}"),
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)]
    # The one-process reference runs meanwhile: most of each run is start-up.
    reference = subprocess.Popen(
        _command(packed, "--as-processes", 2, "--epochs", 2, "--save-weights",
                 tmp_path / "reference.npz"),
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = [run.communicate(timeout=600) for run in runs]
    alone_out, alone_err = reference.communicate(timeout=600)
    for run, (out, err) in zip(runs, done):
        assert run.returncode == 0, err[-4000:]
    assert reference.returncode == 0, alone_err[-4000:]
    first, second = (_last_json(out) for out, _ in done)
    assert first["weights_sha256"] == second["weights_sha256"]
    assert first["updates"] == second["updates"] > 0
    # Contiguous halves of the packs, the padding on the shorter one only.
    assert first["packs"][0] == 0 and first["packs"][1] == second["packs"][0]
    assert first["packs"][1] - first["packs"][0] >= second["packs"][1] - second["packs"][0]

    shards = sorted(n for n in os.listdir(packed) if n.startswith("part-"))
    assert first["shards_read"] != shards and second["shards_read"] != shards
    for i, report in enumerate((first, second)):
        trace = tmp_path / f"trace{i}"
        if trace.exists():  # strace installed: the shards this process really opened
            opened = {n for n in shards if n in trace.read_text()}
            assert opened == set(report["shards_read"]), (i, opened, report)

    assert _last_json(alone_out)["updates"] == first["updates"]
    distributed, alone = np.load(tmp_path / "w0.npz"), np.load(tmp_path / "reference.npz")
    assert sorted(distributed.files) == sorted(alone.files)
    for name in alone.files:
        np.testing.assert_allclose(distributed[name], alone[name], rtol=2e-5, atol=2e-6,
                                   err_msg=name)


@pytest.mark.slow
def test_bad_arguments_are_one_line(packed):
    done = subprocess.run(_command(packed, "--num-processes", 2, "--process-id", 0),
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--coordinator" in done.stderr.strip().splitlines()[-1]
