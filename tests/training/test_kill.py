"""`kill -9` a training run at random points: what is left resumes to exactly the weights
and log of an uninterrupted run (checkpoints are complete or absent, temporary files are
cleaned up, log lines are not repeated)."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np

from kill_train import train
from unused_imports import with_site

SCRIPT = os.path.join(os.path.dirname(__file__), "kill_train.py")
STEPS = 12


def _env():
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": with_site(os.pathsep.join(sys.path))}


def _logged(directory) -> int:
    """Updates logged so far (one line each; a line cut by a kill counts too)."""
    try:
        return (directory / "log.jsonl").read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_killed_training_resumes_to_the_uninterrupted_weights(tmp_path):
    rng = random.Random(0)
    kills = 0
    for _ in range(2):
        process = subprocess.Popen([sys.executable, SCRIPT, str(tmp_path), str(STEPS)],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env=_env())
        assert process.stdout.readline().strip() == b"training"  # Bounded by the timeout.
        # A random point 1-3 updates further on (the log has a line per update), not a
        # random time: on a fast machine a whole run takes less than a second.
        target = _logged(tmp_path) + rng.randint(1, 3)
        deadline = time.monotonic() + 120
        while (process.poll() is None and _logged(tmp_path) < target
               and time.monotonic() < deadline):
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait(timeout=60)
        process.stdout.close()
    assert kills == 2
    # The run that finishes resumes here: a fresh Trainer and model read only what the
    # killed processes left on disk (a process start would import TensorFlow again).
    resumed = train(str(tmp_path), STEPS, on_first=lambda: None)  # as the script does
    straight = train(None, STEPS)
    assert len(resumed) == len(straight)
    for got, expected in zip(resumed, straight):
        np.testing.assert_allclose(got, expected, atol=1e-6)
    steps = [json.loads(line)["step"] for line in (tmp_path / "log.jsonl").read_text()
             .splitlines()]
    assert steps == list(range(1, STEPS + 1))
    assert not [n for n in os.listdir(tmp_path / "ckpt") if not n.startswith("ckpt-")]
