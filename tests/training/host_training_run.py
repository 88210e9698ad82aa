"""Subprocess entry for the per-host training test: one MultiWorkerMirroredStrategy worker
(TF_CONFIG set by the caller) trains on the Google records of its own files only.

    python host_training_run.py FOLDER OUT.json

FOLDER holds ``part-*.tfrecord`` (Google ``create_pretraining_data`` records). In one
process start (the strategy can be made once), in order:

1. ``refused``: `Trainer.fit` on a `HostPacking` whose collective is not finite, then
   one that disagrees with this worker's own count (each worker's error message);
2. ``trainer``: `Trainer.fit(HostPacking(...))` for exactly one epoch (1 pack a
   micro-batch, 2 accumulated): the updates, the sequences it trained on (all workers,
   from the log) and this worker's report;
3. ``cli``: ``tfpack train --per-host`` on the same strategy for one epoch (2 packs a
   micro-batch): exit status, updates and the sequences of the chief's log.jsonl.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

L, K, M, V = 32, 3, 6, 40


def trainer(strategy, source, micro, acc):
    import keras

    from tfpack.training import Lamb, Trainer
    from tinymodels import TinyPretrainer

    keras.utils.set_random_seed(0)
    with strategy.scope():
        return Trainer(TinyPretrainer(vocab_size=V, max_length=L, max_sequences_per_pack=K,
                                      max_predictions_per_pack=M),
                       Lamb(learning_rate=0.01), micro_batch_size=micro,
                       accumulation_steps=acc, strategy=strategy, log_every=1,
                       progress=False, jit_compile=False, check_exact=False)


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


def one_epoch(strategy, pattern):
    from tfpack.training import HostPacking

    source = HostPacking(pattern, max_length=L, max_sequences_per_pack=K,
                         max_predictions_per_pack=M, algorithm="ffd")
    run = trainer(strategy, source, 1, 2)
    run.fit(source, 0)  # packs (the workers agree on the count), trains nothing
    report = run.host_report
    steps = report.packs // 2
    result = run.fit(source, steps)
    return {"steps": result.step, "epoch_steps": steps,
            "sequences": sum(r["sequences"] for r in result.history),
            "own_sequences": report.sequences, "packs": report.packs,
            "host_packs": report.host_packs, "padding_packs": report.padding_packs}


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


def main():
    folder, out = sys.argv[1:3]
    pattern = os.path.join(folder, "part-*.tfrecord")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    results = {"refused": refused(strategy, pattern),
               "trainer": one_epoch(strategy, pattern)}
    results["cli"] = cli(strategy, pattern, os.path.join(folder, f"run{index}"),
                         results["trainer"]["epoch_steps"])
    with open(out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
