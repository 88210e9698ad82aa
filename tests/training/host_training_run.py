"""The per-host training scenario of one MultiWorkerMirroredStrategy worker (TF_CONFIG set
by the caller; run by `multiworker_run.py`): it trains on the Google records of its own
files only. `run(strategy, FOLDER, index)`: FOLDER holds ``part-*.tfrecord`` (Google
``create_pretraining_data`` records); in order, on the one strategy of the process:

1. ``refused``: `Trainer.fit` on a `HostPacking` whose collective is not finite, then
   one that disagrees with this worker's own count (each worker's error message);
2. ``trainer``: `Trainer.fit(HostPacking(...))` for exactly one epoch (1 pack a
   micro-batch, 2 accumulated) in two calls, checkpointed after each: the updates, the
   sequences it trained on (all workers, from the log) and this worker's report;
3. ``resumed``: a new trainer resuming that epoch from its half-way checkpoint to its end
   (losses and weights against 2.), then resumes refused: other files, another planner,
   one host (the chief alone, on the default strategy), a checkpoint folder of its own
   on the other worker (empty there);
4. ``cli``: ``tfpack train --per-host`` on the same strategy for one epoch (2 packs a
   micro-batch): exit status, updates and the sequences of the chief's log.jsonl.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

L, K, M, V = 32, 3, 6, 40


def trainer(strategy, source, micro, acc, **options):
    import keras

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer

    keras.utils.set_random_seed(0)
    with strategy.scope():
        return Trainer(TinyPretrainer(vocab_size=V, max_length=L, max_sequences_per_pack=K,
                                      max_predictions_per_pack=M),
                       Lamb(learning_rate=0.01), micro_batch_size=micro,
                       accumulation_steps=acc, strategy=strategy, log_every=1,
                       progress=False, jit_compile=False, check_exact=False, **options)


def refused(strategy, pattern):
    from tfpack.data import strategy_all_gather
    from tfpack.errors import TfpackError
    from tfpack.training import HostPacking

    real = strategy_all_gather(strategy)
    messages = []
    for gather in (lambda count: [float("inf"), 3],
                   lambda count: [c + 1 for c in real(count)]):  # every count off by one
        source = HostPacking(pattern, max_length=L, max_sequences_per_pack=K,
                             max_predictions_per_pack=M, algorithm="ffd", all_gather=gather)
        try:
            trainer(strategy, source, 1, 2).fit(source, 1)
            messages.append(None)
        except TfpackError as error:
            messages.append(str(error))
    return messages


def source(pattern, algorithm="ffd"):
    from tfpack.training import HostPacking

    return HostPacking(pattern, max_length=L, max_sequences_per_pack=K,
                       max_predictions_per_pack=M, algorithm=algorithm)


def one_epoch(strategy, pattern, folder):
    """One epoch in two `fit` calls, a checkpoint at the end of each (in ``folder``)."""
    packs = source(pattern)
    run = trainer(strategy, packs, 1, 2, checkpoint_dir=folder)
    run.fit(packs, 0)  # packs (the workers agree on the count), trains nothing
    report = run.host_report
    steps = report.packs // 2
    history = run.fit(packs, steps // 2).history + run.fit(packs, steps).history
    return {"steps": run.step.numpy().item(), "epoch_steps": steps,
            "sequences": sum(r["sequences"] for r in history),
            "step_sequences": [r["sequences"] for r in history],
            "losses": [r["loss"] for r in history],
            "own_sequences": report.sequences, "packs": report.packs,
            "host_packs": report.host_packs, "padding_packs": report.padding_packs}, run


def resumed(strategy, pattern, folder, epoch_steps, reference):
    """A new trainer resumes the epoch from its half-way checkpoint (the epoch's own
    checkpoint removed, as a kill after the first would leave it) to the epoch's end: its
    losses and weights against the uninterrupted epoch's (``reference``); then resuming
    with other files, another planner, (the chief alone) one host, or folders not shared."""
    import shutil

    import numpy as np

    from tfpack.data import strategy_all_gather
    from tfpack.errors import TfpackError

    chief = json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0
    if chief:
        shutil.rmtree(os.path.join(folder, f"ckpt-{epoch_steps}"))
    strategy_all_gather(strategy)(0)  # a collective: no worker restores before the removal
    again = trainer(strategy, source(pattern), 1, 2, checkpoint_dir=folder)
    rest = again.fit(source(pattern), epoch_steps)
    weights = [np.abs(a.numpy() - b.numpy()).max() for a, b in
               zip(again.model.weights, reference.model.weights)]
    refused = {}
    changed = {"files": (strategy, source(os.path.join(os.path.dirname(pattern),
                                                       "part-[01].tfrecord"))),
               "algorithm": (strategy, source(pattern, "bfd"))}
    if chief:
        changed["hosts"] = (tf.distribute.get_strategy(), source(pattern))
    for name, (where, packs) in changed.items():
        try:
            trainer(where, packs, 1, 2, checkpoint_dir=folder).fit(packs, epoch_steps + 1)
            refused[name] = None
        except TfpackError as error:
            refused[name] = str(error)
    # Folders not shared: the chief resumed, the other started afresh (a collective failed).
    own = folder if chief else os.path.join(os.path.dirname(folder), "own")
    try:
        trainer(strategy, packs := source(pattern), 1, 2, checkpoint_dir=own).fit(
            packs, epoch_steps + 1)
        refused["folders"] = None
    except TfpackError as error:
        refused["folders"] = str(error)
    return {"resumed_from": rest.resumed_from, "steps": rest.step,
            "losses": [r["loss"] for r in rest.history],
            "sequences": sum(r["sequences"] for r in rest.history),
            "max_weight_difference": float(max(weights)), "refused": refused}


def cli(strategy, pattern, out, steps):
    from tfpack.cli import main, train

    train._strategy = lambda config: strategy  # one MultiWorkerMirroredStrategy a process
    code = main(["train", "--input", pattern, "--input-format", "google", "--per-host",
                 "--pack", "ffd", "--strategy", "multi-worker", "--output", out,
                 "--steps", str(steps), "--vocab-size", str(V), "--layers", "1",
                 "--hidden", "8", "--heads", "2", "--intermediate", "16",
                 "--max-length", str(L), "--max-sequences-per-pack", str(K),
                 "--max-predictions", str(M), "--batch-size", "2", "--log-every", "1",
                 "--dropout", "0", "--no-jit", "--no-check-exact"])
    log = os.path.join(out, "log.jsonl")
    records = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    return {"code": code, "steps": records[-1]["step"] if records else None,
            "sequences": sum(r["sequences"] for r in records)}


def run(strategy, folder, index):
    """Every check of this worker, in order, on the files ``folder/part-*.tfrecord``."""
    pattern = os.path.join(folder, "part-*.tfrecord")
    results = {"refused": refused(strategy, pattern)}
    checkpoints = os.path.join(folder, "checkpoints")
    results["trainer"], reference = one_epoch(strategy, pattern, checkpoints)
    results["resumed"] = resumed(strategy, pattern, checkpoints,
                                 results["trainer"]["epoch_steps"], reference)
    results["cli"] = cli(strategy, pattern, os.path.join(folder, f"run{index}"),
                         results["trainer"]["epoch_steps"])
    return results
