"""examples/preference.py runs as documented on its tiny setting (SFT then DPO)."""

import json
import os
import subprocess
import sys

import pytest

from unused_imports import with_site

pytest.importorskip("keras_hub")
pytest.importorskip("tokenizers")


@pytest.mark.slow
def test_example_runs_and_dpo_raises_held_out_reward_accuracy():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # XLA's fast-compiling flags (``XLA_FLAGS`` from conftest.py, inherited): the
    # run's jit-compiled predictions and DPO steps compile in less CPU (31.9 -> 25.0 CPU s a
    # run). No fast math; rounding may differ (the reward accuracy before DPO, whose margins
    # are ~0, read 0.0 and 0.05): the figures checked below have wide margins.
    env = {**os.environ, "PYTHONPATH": with_site(root), "CUDA_VISIBLE_DEVICES": "",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, os.path.join(root, "examples", "preference.py"),
                           "--tiny"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["pairs"] > 100 and summary["pairs_per_pack"] > 1.5
    # Before DPO the policy is its own reference: margins ~0, loss log 2.
    assert abs(summary["reward_margin"]["before_dpo"]) < 1e-3
    assert abs(summary["dpo_loss"]["before"] - 0.6931) < 1e-3
    assert summary["reward_accuracy"]["after_dpo"] > 0.6
    assert summary["dpo_loss"]["after"] < summary["dpo_loss"]["before"]
