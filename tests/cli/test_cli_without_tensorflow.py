"""The CLI where TensorFlow is not installed (Keras on JAX machines).

`tfpack plan` needs only numpy and scipy and runs; `tfpack pack` needs
TensorFlow's records and refuses in one stderr line with exit status 2,
naming what needs TensorFlow, never a traceback. TensorFlow is blocked as in
the suite's JAX checks (`tests/no_tensorflow/sitecustomize.py`).
"""

import os
import pathlib
import subprocess
import sys

from jax_env import jax_env

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tfpack.cli", *args], cwd=cwd,
                          env=jax_env(PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=300)


def test_plan_runs_and_pack_refuses_in_one_line(tmp_path):
    done = _cli("plan", "wikipedia_512", "--max-length", "512",
                "--max-sequences-per-pack", "3", "--algorithm", "spfhp",
                "--output", "plan.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "plan.json").is_file()

    done = _cli("pack", "--input", "missing.tfrecord", "--output", "out", "--max-length", "8",
                "--max-sequences-per-pack", "2", "--algorithm", "spfhp", cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tfpack pack: error: ") and "needs TensorFlow" in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["plan.json"]  # pack wrote nothing
