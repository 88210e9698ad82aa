"""The mirrored distributed scenario (test_distributed.py), one of the checks of the suite's
one two-replica process (`tests/models/replicas_run.py`, `update_helpers.two_replicas`):

MirroredStrategy over two logical CPUs: the tiny model's Trainer, then `model.fit` of the
real BertPretrainer; and, in the same process, their one-device references on the default
strategy with the same global batch: the Trainer, `model.fit` with XLA
(`CHECKS["mirrored"]`). `train` is also the multi-worker scenario's (`multiworker_run.py`).
"""

import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# TensorFlow and Keras are imported with the garbage collector paused, then frozen, by the
# suite's site (tests/paused_imports.py); the process's `main` (`replicas_run.py`,
# `multiworker_run.py`) freezes what the rest holds.
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)


def train(strategy, *, micro, steps, acc, checkpoint_dir=None):
    """Weights and logged losses after ``steps`` updates of the tiny model."""
    import keras

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer, dataset

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = TinyPretrainer()
        trainer = Trainer(model, Lamb(learning_rate=0.02), micro_batch_size=micro,
                          accumulation_steps=acc, strategy=strategy, log_every=2,
                          progress=False, checkpoint_dir=checkpoint_dir)
    result = trainer.fit(dataset(64, seed=1), steps)
    losses = np.array([r["loss"] for r in result.history])
    return [w.numpy() for w in model.weights], losses, trainer._is_chief()


def fit(strategy, *, batch, steps, jit_compile):
    """Weights after ``steps`` batches of `model.fit` on the real BertPretrainer."""
    import keras

    from tfpack import models
    from tfpack.training import Lamb
    from tinymodels import L, V, dataset

    keras.utils.set_random_seed(0)
    with strategy.scope():
        encoder = models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8,
                                     num_heads=2, intermediate_dim=16, max_sequence_length=L,
                                     dropout=0.0, attention_dropout=0.0)
        model = models.BertPretrainer(encoder)
        model.compile(optimizer=Lamb(learning_rate=0.02), jit_compile=jit_compile)
    data = dataset(64, seed=1).batch(batch, drop_remainder=True).take(steps)
    history = model.fit(data, epochs=1, verbose=0)
    return [w.numpy() for w in model.weights], np.array(history.history["loss"]), True


# 3 updates of 2 accumulated micro-batches of 2 packs a replica (test_distributed.py's
# STEPS, ACC and GLOBAL_MICRO // 2).
STEPS, ACC, MICRO = 3, 2, 2


def mirrored(strategy):
    """``{"RUN:i": weight i, "RUN:loss": logged losses}`` of the four trainings, RUN one of
    ``mirrored`` (the Trainer on ``strategy``), ``reference`` (the Trainer on one device),
    ``fit`` (`model.fit` on ``strategy``) and ``fit_xla`` (`model.fit`, XLA, one device)."""
    one_device = tf.distribute.get_strategy()
    runs = {"mirrored": train(strategy, micro=MICRO, steps=STEPS, acc=ACC),
            "reference": train(one_device, micro=2 * MICRO, steps=STEPS, acc=ACC),
            # `fit(jit_compile=True)` fails under MirroredStrategy (docs/training.md).
            "fit": fit(strategy, batch=2 * MICRO, steps=STEPS, jit_compile=False),
            "fit_xla": fit(one_device, batch=2 * MICRO, steps=STEPS, jit_compile=True)}
    arrays = {}
    for run, (weights, losses, _) in runs.items():
        arrays.update({f"{run}:{i}": w for i, w in enumerate(weights)})
        arrays[f"{run}:loss"] = losses
    return arrays


CHECKS = {"mirrored": mirrored}
