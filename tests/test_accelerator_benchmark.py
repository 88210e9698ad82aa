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
    # PYTHONPATH: the tfpack of this checkout, not an installed one.
    env = jax_env(PYTHONPATH=str(ROOT))
    env["KERAS_BACKEND"] = "tensorflow"
    done = subprocess.run(
        # Two of the four models: decoder-100M runs decoder-100M-8k's code.
        # Flash runs in Pallas interpret mode on the CPU.
        [sys.executable, str(ROOT / "benchmarks" / "accelerator.py"), "--toy",
         "--attention", "--models", "BERT-base,decoder-100M-8k",
         "--output", str(output)],
        env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = output.read_text()
    assert "TensorFlow not imported" in text
    assert re.search(r"Device: cpu .*jax \d", text)
    assert "GPU figures: pending" in text
    rate = (r"[\d,]+ \([\d,]+-[\d,]+\) \| \d+\.\d\dx \| \d+\.\d\d "
            r"\| (?:-|\d\.\de[-+]\d\d) \|$")
    rows = re.findall(r"^\| (BERT-base|decoder-100M-8k) \| [\d,]+ \| (\d+) \| "
                      r"(padded|packed, dense|packed, segmented|packed, flash) "
                      r"\| \d+ \| " + rate, text, re.M)
    assert len(rows) == 8, text
    attention = re.findall(r"^\| (BERT-base|decoder-100M-8k) \| (\d+) \| "
                           r"(packed, dense|packed, segmented|packed, flash) "
                           r"\| \d+ \| " + rate, text, re.M)
    assert len(attention) == 6, text
