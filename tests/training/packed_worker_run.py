"""Subprocess entry for the per-worker-input tests: one MultiWorkerMirroredStrategy worker
(TF_CONFIG set by the caller) trains on a packed output it reads its share of.

    python packed_worker_run.py trainer|fit PACKED_DIR OUT.npz [--steps N] [--micro B]
        [--acc A] [--checkpoint-dir DIR [--resume-to N]] [--then-fit FIT.npz --fit-steps N]

``trainer``: `tfpack.training.Trainer.fit(PACKED_DIR)` of the tiny model (with
``--resume-to``, a new Trainer, new model and optimizer, in the same process then
resumes from the first one's checkpoint to update N: OUT holds its weights);
``fit``: `model.fit` of a one-layer BertPretrainer on
`tfpack.training.packed_dataset_fn` (``--micro`` packs per worker per step).
Only the chief writes OUT (weights, logged losses). ``--then-fit``: after ``trainer``,
the same process (TensorFlow and the strategy started once) runs ``fit`` for
``--fit-steps`` into FIT.npz, or, where `model.fit` raises, writes the error to
FIT.npz.error<worker index> and exits 0.
"""

import argparse
import gc
import importlib
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# TensorFlow, Keras and tfpack imported with the cyclic garbage collector paused, then
# frozen out of its scans (`main`), as `tfpack.cli` does for its commands: about a million
# objects, none of them garbage, scanned over and over otherwise.
# (Imported by tests too: collection resumes as it was; only `main` freezes.)
_collecting = gc.isenabled()
gc.disable()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)

if _collecting:
    gc.enable()


def trainer_weights(strategy, directory, *, micro, acc, steps, checkpoint_dir=None):
    import keras

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer

    keras.utils.set_random_seed(0)
    with strategy.scope():
        trainer = Trainer(TinyPretrainer(), Lamb(learning_rate=0.02), micro_batch_size=micro,
                          accumulation_steps=acc, strategy=strategy, log_every=1,
                          progress=False, jit_compile=False, checkpoint_dir=checkpoint_dir)
    result = trainer.fit(directory, steps)
    losses = np.array([r["loss"] for r in result.history])
    return [w.numpy() for w in trainer.model.weights], losses, trainer._is_chief()


def bert(strategy):
    import keras

    from tfpack import models
    from tfpack.training import Lamb
    import tinymodels
    from tinymodels import L, V

    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = models.BertPretrainer(models.BertEncoder(
            vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
            max_sequence_length=L, dropout=0.0, attention_dropout=0.0))
        model.compile(optimizer=Lamb(learning_rate=0.02), jit_compile=False)
        model(tinymodels.dataset(1).batch(1).get_single_element())  # Built before `fit`.
        model.optimizer.build(model.trainable_variables)
    return model


def fit_weights(strategy, directory, *, global_batch, steps):
    from tfpack.training import packed_dataset_fn

    model = bert(strategy)
    fn = packed_dataset_fn(directory, global_batch_size=global_batch)
    data = strategy.distribute_datasets_from_function(fn)
    history = model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    return [w.numpy() for w in model.weights], np.array(history.history["loss"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["trainer", "fit"])
    parser.add_argument("directory")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--acc", type=int, default=1)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--resume-to", type=int, default=None)
    parser.add_argument("--then-fit", default=None)
    parser.add_argument("--fit-steps", type=int, default=None)
    args = parser.parse_args()
    gc.freeze()
    import keras

    keras.config.disable_traceback_filtering()  # Whole tracebacks in the test log.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if args.mode == "trainer":
        weights, losses, chief = trainer_weights(
            strategy, args.directory, micro=args.micro, acc=args.acc, steps=args.steps,
            checkpoint_dir=args.checkpoint_dir)
        if args.resume_to is not None:
            from tfpack.data import strategy_all_gather

            # A collective: the chief's checkpoint is in place before any worker
            # restores, as when new processes start after the job ended.
            strategy_all_gather(strategy)(0)
            weights, losses, chief = trainer_weights(
                strategy, args.directory, micro=args.micro, acc=args.acc,
                steps=args.resume_to, checkpoint_dir=args.checkpoint_dir)
    else:
        weights, losses = fit_weights(strategy, args.directory,
                                      global_batch=args.micro * strategy.num_replicas_in_sync,
                                      steps=args.steps)
        chief = json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0
    if chief:
        np.savez(args.out, *weights, loss=losses)
    if args.then_fit:
        then_fit(strategy, args)


def then_fit(strategy, args):
    """`model.fit` after the trainer, in the same process: its weights, or its error."""
    import traceback

    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    try:
        weights, losses = fit_weights(strategy, args.directory,
                                      global_batch=args.micro * strategy.num_replicas_in_sync,
                                      steps=args.fit_steps)
    except Exception:  # noqa: BLE001 - the test reports it (a known Keras failure)
        with open(f"{args.then_fit}.error{index}", "w") as f:
            f.write(traceback.format_exc())
        return
    if index == 0:
        np.savez(args.then_fit, *weights, loss=losses)


if __name__ == "__main__":
    main()
