"""Subprocess entry for the mirrored distributed test: train the tiny model, save its weights.

    python distributed_run.py OUT.npz [--steps N] [--micro B] [--acc A]

MirroredStrategy over two logical CPUs: the Trainer into OUT, then `model.fit` of the
real BertPretrainer into OUT-fit.npz; and, in the same process, their one-device
references on the default strategy with the same global batch: the Trainer into
OUT-reference.npz, `model.fit` with XLA into OUT-fit-xla.npz. `train` is also the
multi-worker scenario's (`multiworker_run.py`).
"""

import argparse
import gc
import importlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# TensorFlow, Keras and tfpack imported with the cyclic garbage collector paused, then
# frozen out of its scans (`main`), as `tfpack.cli` does for its commands: about a million
# objects, none of them garbage, scanned over and over otherwise. (Imported by
# `multiworker_run` too: collection resumes as it was.)
_collecting = gc.isenabled()
gc.disable()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)

if _collecting:
    gc.enable()


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--acc", type=int, default=1)
    args = parser.parse_args()
    gc.freeze()
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    weights, losses, _ = train(strategy, micro=args.micro, steps=args.steps, acc=args.acc)
    np.savez(args.out, *weights, loss=losses)
    # One process for all four: TensorFlow starts once.
    one_device = tf.distribute.get_strategy()
    weights, losses, _ = train(one_device, micro=2 * args.micro, steps=args.steps,
                               acc=args.acc)
    np.savez(args.out.replace(".npz", "-reference.npz"), *weights, loss=losses)
    # `fit(jit_compile=True)` fails under MirroredStrategy (docs/training.md).
    for where, jit_compile, name in ((strategy, False, "-fit.npz"),
                                     (one_device, True, "-fit-xla.npz")):
        weights, losses, _ = fit(where, batch=2 * args.micro, steps=args.steps,
                                 jit_compile=jit_compile)
        np.savez(args.out.replace(".npz", name), *weights, loss=losses)


if __name__ == "__main__":
    main()
