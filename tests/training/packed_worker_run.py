"""The per-worker-input scenarios of one MultiWorkerMirroredStrategy worker (TF_CONFIG set
by the caller), on a packed output it reads its share of (run by `multiworker_run.py`):

- `trainer_weights`: `tfpack.training.Trainer.fit(PACKED_DIR)` of the tiny model;
- `then_fit`: `model.fit` of a one-layer BertPretrainer (`bert`) on
  `tfpack.training.packed_dataset_fn` (``micro`` packs per worker per step).
"""

import importlib
import json
import os
import sys
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# TensorFlow and Keras are imported with the garbage collector paused, then frozen, by the
# suite's site (tests/paused_imports.py); `multiworker_run.main` freezes what the rest holds.
import numpy as np  # noqa: E402

for _name in ("tfpack.models", "tfpack.training"):
    importlib.import_module(_name)


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


def then_fit(strategy, directory, out, *, micro, steps):
    """`model.fit` for ``steps`` of ``micro`` packs a worker: the chief writes its weights and
    losses to ``out``; where `model.fit` raises, each worker writes its error to
    ``out.error<worker index>`` instead (a known Keras failure, the test's xfail)."""
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    try:
        weights, losses = fit_weights(strategy, directory,
                                      global_batch=micro * strategy.num_replicas_in_sync,
                                      steps=steps)
    except Exception:  # noqa: BLE001 - the test reports it (a known Keras failure)
        with open(f"{out}.error{index}", "w") as f:
            f.write(traceback.format_exc())
        return
    if index == 0:
        np.savez(out, *weights, loss=losses)
