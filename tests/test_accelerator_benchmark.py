"""benchmarks/accelerator.py at toy size: runs on JAX without TensorFlow."""

import pathlib
import re
import subprocess
import sys

import pytest

from jax_env import jax_env

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_accelerator_benchmark_toy_runs_on_jax_without_tensorflow(tmp_path):
    pytest.importorskip("jax")
    output = tmp_path / "accelerator.md"
    # KERAS_BACKEND=tensorflow in the environment must not win: the script
    # sets the JAX backend itself and exits non-zero if TF gets imported.
    # Fast-compiling XLA (tests/jax_env.py): the toy's figures are not judged,
    # only the report's form (35 -> 21 CPU seconds).
    env = jax_env()
    env["KERAS_BACKEND"] = "tensorflow"
    done = subprocess.run(
        # Two of the three models: decoder-100M runs decoder-100M-8k's code.
        [sys.executable, str(ROOT / "benchmarks" / "accelerator.py"), "--toy",
         "--models", "BERT-base,decoder-100M-8k", "--output", str(output)],
        env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = output.read_text()
    assert "TensorFlow not imported" in text
    assert re.search(r"Device: cpu .*jax \d", text)
    assert "GPU figures: pending" in text
    rows = re.findall(r"^\| (BERT-base|decoder-100M-8k) \| [\d,]+ \| (\d+) \| "
                      r"(padded|packed, dense|packed, segmented) \| \d+ \| [\d,]+ "
                      r"\([\d,]+-[\d,]+\) \| \d+\.\d\dx \|$", text, re.M)
    assert len(rows) == 6, text
