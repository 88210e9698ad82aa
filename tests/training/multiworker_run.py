"""Subprocess entry for every multi-worker training check: one MultiWorkerMirroredStrategy
worker (TF_CONFIG set by the caller; `multiworker.py` starts the pair) runs, in one process
start (TensorFlow, tfpack and the strategy once), the scenarios of three test files:

    python multiworker_run.py FOLDER SETTINGS_JSON

(SETTINGS_JSON: `multiworker.SETTINGS`, the scenarios' updates and batches.)

1. ``distributed`` (test_distributed.py): the tiny model, 2 updates of 2 accumulated
   micro-batches checkpointed, then a new Trainer resumed to update 3
   (`distributed_run.train`): the chief writes ``distributed/w.npz``;
2. ``packed`` (test_distributed_packed.py): the same on the packed output
   ``packed/output`` of uneven shards, 1 update before the resume
   (`packed_worker_run.trainer_weights`): ``packed/w.npz``;
3. ``hosts`` (test_host_training.py): per-host packing of the Google records of
   ``hosts/part-*.tfrecord`` (`host_training_run.run`): ``hosts/out{index}.json``;
4. ``fit`` (test_distributed_packed.py): `model.fit` on `packed_dataset_fn`, last as it
   raises under this strategy (a known Keras failure, `packed_worker_run.then_fit`):
   ``packed/fit.npz`` or ``packed/fit.npz.error{index}``.

A scenario that raises writes its traceback to ``NAME.error{index}`` (its test reports
it) and the next one runs; ``done{index}`` marks the end.
"""

import gc
import importlib
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# TensorFlow, Keras and JAX are imported with the garbage collector paused, then frozen, by
# the suite's site (tests/paused_imports.py); `main` freezes what the rest holds.
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

for _name in ("tfpack.cli.train", "tfpack.models", "tfpack.training", "distributed_run",
              "packed_worker_run", "host_training_run"):
    importlib.import_module(_name)

def trained_then_resumed(strategy, train, settings, **where):
    """``train`` for ``steps`` updates (checkpointed), then a new Trainer (new model and
    optimizer) resumed from that checkpoint to ``resume_to``: its weights and losses."""
    from tfpack.data import strategy_all_gather

    options = {"micro": settings["micro"], "acc": settings["acc"], **where}
    train(strategy, steps=settings["steps"], **options)
    # A collective: the chief's checkpoint is written (renamed into place) before any
    # worker restores, as when new processes start after the job ended.
    strategy_all_gather(strategy)(0)
    return train(strategy, steps=settings["resume_to"], **options)


def distributed(strategy, folder, settings):
    from distributed_run import train

    weights, losses, chief = trained_then_resumed(
        strategy, train, settings, checkpoint_dir=os.path.join(folder, "checkpoints"))
    if chief:
        np.savez(os.path.join(folder, "w.npz"), *weights, loss=losses)


def packed(strategy, folder, settings):
    from packed_worker_run import trainer_weights

    def train(strategy, *, micro, acc, steps, checkpoint_dir):
        return trainer_weights(strategy, os.path.join(folder, "output"), micro=micro,
                               acc=acc, steps=steps, checkpoint_dir=checkpoint_dir)

    weights, losses, chief = trained_then_resumed(
        strategy, train, settings, checkpoint_dir=os.path.join(folder, "checkpoints"))
    if chief:
        np.savez(os.path.join(folder, "w.npz"), *weights, loss=losses)


def hosts(strategy, folder, index):
    from host_training_run import run

    with open(os.path.join(folder, f"out{index}.json"), "w") as f:
        json.dump(run(strategy, folder, index), f)


def fit(strategy, folder, settings, index):
    from packed_worker_run import then_fit

    then_fit(strategy, os.path.join(folder, "output"), os.path.join(folder, "fit.npz"),
             micro=settings["micro"], steps=settings["fit_steps"])


def main():
    gc.freeze()
    import keras

    keras.config.disable_traceback_filtering()  # Whole tracebacks in the test log.
    root, settings = sys.argv[1], json.loads(sys.argv[2])
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    distributed_settings, packed_settings = settings["distributed"], settings["packed"]
    for name, folder, run in (
            ("distributed", "distributed",
             lambda folder: distributed(strategy, folder, distributed_settings)),
            ("packed", "packed", lambda folder: packed(strategy, folder, packed_settings)),
            ("hosts", "hosts", lambda folder: hosts(strategy, folder, index)),
            ("fit", "packed", lambda folder: fit(strategy, folder, packed_settings, index))):
        folder = os.path.join(root, folder)
        os.makedirs(folder, exist_ok=True)
        try:
            run(folder)
        except Exception:  # noqa: BLE001 - its test reports it
            with open(os.path.join(root, f"{name}.error{index}"), "w") as f:
                f.write(traceback.format_exc())
    open(os.path.join(root, f"done{index}"), "w").close()


if __name__ == "__main__":
    main()
