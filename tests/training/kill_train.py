"""Run in a subprocess by test_kill.py: train the tiny model with dropout, checkpointing every
update, resuming from DIR; prints "training" once the first update is done; at the end writes
DIR/weights.npz.

    python kill_train.py DIR STEPS
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402


def train(directory, steps, on_first=None):
    import keras

    from test_resume import DropoutPretrainer
    from tfpack.training import Lamb, Trainer
    from tinymodels import dataset

    keras.utils.set_random_seed(0)
    trainer = Trainer(DropoutPretrainer(), Lamb(learning_rate=0.02), micro_batch_size=2,
                      progress=False, jit_compile=False, log_every=1, checkpoint_every=1,
                      checkpoint_dir=directory and os.path.join(directory, "ckpt"),
                      log_path=directory and os.path.join(directory, "log.jsonl"))
    data = dataset(40).repeat()
    trainer.fit(data, 1 if on_first else 0)  # Resumes, or trains the first update.
    if on_first:
        on_first()
    trainer.fit(data, steps)
    return [w.numpy() for w in trainer.model.weights]


if __name__ == "__main__":
    # TensorFlow, Keras and tfpack imported (the collector paused, then frozen, by the
    # suite's site: tests/paused_imports.py) before the first step, which the kill follows.
    import gc
    import importlib

    for name in ("tensorflow", "test_resume", "tfpack.training"):
        importlib.import_module(name)

    gc.freeze()
    directory, steps = sys.argv[1], int(sys.argv[2])
    weights = train(directory, steps, on_first=lambda: print("training", flush=True))
    np.savez(os.path.join(directory, "weights.npz"), *weights)
