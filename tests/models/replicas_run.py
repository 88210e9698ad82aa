"""Subprocess: `Trainer` updates and other checks under MirroredStrategy over
two logical CPUs.

    python replicas_run.py HELPERS VARIANT OUT.npz [HELPERS VARIANT OUT.npz ...]

For each triple, HELPERS is the helper module whose ``trainer_update(strategy,
VARIANT, micro, accumulation)`` makes one update (``sft_helpers``: VARIANT is
the averaging; ``preference_helpers``: the loss), saved to OUT.npz; or
``distributed_checks`` (or tests/training's ``distributed_run``), whose
``CHECKS[VARIANT](strategy)`` returns the arrays saved to OUT.npz. One process
for all: TensorFlow starts once. See `update_helpers.replicas_updates`.
"""

import gc
import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# tests/training: `distributed_run` (test_distributed.py's mirrored scenario) and its models.
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "training"))

# TensorFlow and Keras are imported with the garbage collector paused, then frozen, by the
# suite's site (tests/paused_imports.py); `main` freezes what the rest holds.
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)


def main():
    gc.freeze()
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    # 1 pack per replica per micro-batch, 2 micro-batches: the 4 packs in one update.
    jobs = sys.argv[1:]
    for helpers, variant, out in zip(jobs[0::3], jobs[1::3], jobs[2::3]):
        module = importlib.import_module(helpers)
        if hasattr(module, "CHECKS"):
            np.savez(out, **module.CHECKS[variant](strategy))
            continue
        weights, record = module.trainer_update(strategy, variant, micro=1, accumulation=2)
        np.savez(out, *weights, loss=record["loss"])


if __name__ == "__main__":
    main()
