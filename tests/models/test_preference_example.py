"""examples/preference.py runs as documented on its tiny setting (SFT then DPO).

Its ``main()`` runs in the test's process with ``sys.argv`` as the command line
``python examples/preference.py --tiny`` gives it: the script's own code, its
own seed (``keras.utils.set_random_seed(0)`` first thing), and its last stdout
line judged; a subprocess paid a second start of TensorFlow, Keras, keras-hub
and tokenizers (about 3 of its 23 CPU s) for nothing the test checks.
"""

import json
import os
import runpy
import sys

import pytest

pytest.importorskip("keras_hub")
pytest.importorskip("tokenizers")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "preference.py")


@pytest.mark.slow
def test_example_runs_and_dpo_raises_held_out_reward_accuracy(monkeypatch, capsys):
    # The script puts examples/ first on sys.path to import its sibling
    # (keras_hub_sft); monkeypatch restores sys.path and sys.modules' new entry.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", [SCRIPT, "--tiny"])
    monkeypatch.delitem(sys.modules, "keras_hub_sft", raising=False)
    # XLA's fast-compiling flags (``XLA_FLAGS`` from conftest.py): the run's
    # jit-compiled predictions and DPO steps compile in less CPU (31.9 -> 25.0 CPU s a
    # run). No fast math; rounding may differ (the reward accuracy before DPO, whose margins
    # are ~0, read 0.0 and 0.05): the figures checked below have wide margins.
    runpy.run_path(SCRIPT, run_name="preference_example")["main"]()
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["pairs"] > 100 and summary["pairs_per_pack"] > 1.5
    # Before DPO the policy is its own reference: margins ~0, loss log 2.
    assert abs(summary["reward_margin"]["before_dpo"]) < 1e-3
    assert abs(summary["dpo_loss"]["before"] - 0.6931) < 1e-3
    assert summary["reward_accuracy"]["after_dpo"] > 0.6
    assert summary["dpo_loss"]["after"] < summary["dpo_loss"]["before"]
