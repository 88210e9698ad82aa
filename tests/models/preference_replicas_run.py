"""Subprocess: one preference update under MirroredStrategy over two logical CPUs.

    python preference_replicas_run.py LOSS OUT.npz
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from preference_helpers import trainer_update  # noqa: E402


def main():
    loss, out = sys.argv[1:3]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    # 1 pack per replica per micro-batch, 2 micro-batches: the 4 packs in one update.
    weights, record = trainer_update(strategy, loss, micro=1, accumulation=2)
    np.savez(out, *weights, loss=record["loss"])


if __name__ == "__main__":
    main()
