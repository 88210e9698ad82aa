"""Subprocess entry for the distributed tests: train the tiny model, save its weights.

    python distributed_run.py MODE OUT.npz [--steps N] [--micro B] [--acc A]
        [--checkpoint-dir DIR [--resume-to N]]

MODE: ``mirrored`` (MirroredStrategy over two logical CPUs: the Trainer, then
`model.fit` of the real BertPretrainer into OUT-fit.npz; and, in the same process,
their one-device references on the default strategy with the same global batch: the
Trainer into OUT-reference.npz, `model.fit` with XLA into OUT-fit-xla.npz) or ``multiworker``
(MultiWorkerMirroredStrategy; TF_CONFIG set by the caller). With ``--resume-to``,
a new Trainer (new model and optimizer) in the same process then resumes from the
checkpoint of the first to update N, and OUT holds its weights and losses (one
process start, TensorFlow's import and the strategy paid once). Only the chief
writes OUT.
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
# objects, none of them garbage, scanned over and over otherwise.
gc.disable()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)

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
    parser.add_argument("mode", choices=["mirrored", "multiworker"])
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--acc", type=int, default=1)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--resume-to", type=int, default=None)
    args = parser.parse_args()
    gc.freeze()
    if args.mode == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    weights, losses, chief = train(strategy, micro=args.micro, steps=args.steps, acc=args.acc,
                                   checkpoint_dir=args.checkpoint_dir)
    if args.resume_to is not None:
        from tfpack.data import strategy_all_gather

        # A collective: the chief's checkpoint is written (renamed into place) before
        # any worker restores, as when new processes start after the job ended.
        strategy_all_gather(strategy)(0)
        weights, losses, chief = train(strategy, micro=args.micro, steps=args.resume_to,
                                       acc=args.acc, checkpoint_dir=args.checkpoint_dir)
    if chief:
        np.savez(args.out, *weights, loss=losses)
    if args.mode == "mirrored":  # One process for all four: TensorFlow starts once.
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
