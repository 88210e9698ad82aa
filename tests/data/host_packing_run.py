"""Subprocess entry for the packing-per-host test: one MultiWorkerMirroredStrategy worker
(TF_CONFIG set by the caller) packs only its own files and steps through its batches.

    python host_packing_run.py PATTERN OUT.json [--jax COORDINATOR]

Each record of the files is one example whose tokens all equal its unique id. The
worker takes its files with `tfpack.data.host_files`, packs them with
``input_sharded=True`` and `strategy_all_gather`, and runs one cross-worker all-reduce
a step until its dataset ends: unequal step counts would hang the job. It writes the
files it was given, its steps, the ids of the examples it trained on and its report,
for ``remainder="pad"`` and then ``"drop"`` (one process start for both). With ``--jax``,
the same process then joins `jax.distributed` (process id: its TF_CONFIG index) and packs
its files with `tfpack.data.jax_all_gather` (`host_packing_jax_run.run`): TensorFlow, which
both need, starts once a worker.
"""

import argparse
import gc
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# TensorFlow is imported with the garbage collector paused, then frozen, by the suite's
# site (tests/paused_imports.py).
import tensorflow as tf  # noqa: E402

import tfpack  # noqa: E402

L, K, PER_REPLICA = 16, 3, 2


def run(strategy, pattern, remainder):
    """Pack this worker's files, step through the batches; what the test checks."""
    seen = {}

    def dataset_fn(context):
        files = tfpack.data.host_files(pattern, context)
        seen["files"] = [os.path.basename(f) for f in files]
        examples = tf.data.TFRecordDataset(files).map(
            lambda r: {"input_ids": tf.ensure_shape(tf.io.parse_tensor(r, tf.int32), [None])})
        packer = tfpack.data.pack(
            max_length=L, max_sequences_per_pack=K, algorithm="ffd", input_context=context,
            input_sharded=True, all_gather=tfpack.data.strategy_all_gather(strategy),
            per_replica_batch_size=PER_REPLICA, remainder=remainder)
        packs = examples.apply(packer)
        seen["report"] = packer.report
        return packs.batch(PER_REPLICA, drop_remainder=True)

    batches = strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def step(batch):
        def replica(b):
            real = tf.reduce_sum(b["sequence_mask"])
            return tf.distribute.get_replica_context().all_reduce("sum", real)
        return strategy.run(replica, args=(batch,))

    steps, ids, global_sequences = 0, [], 0.0
    for batch in batches:  # A worker with fewer batches than the other would hang here.
        global_sequences += float(strategy.experimental_local_results(step(batch))[0])
        local = strategy.experimental_local_results(batch)[0]
        for input_ids, cls, mask in zip(local["input_ids"].numpy(),
                                        local["cls_positions"].numpy(),
                                        local["sequence_mask"].numpy()):
            ids += [int(input_ids[c]) for c, m in zip(cls, mask) if m > 0]
        steps += 1
    report = seen["report"]
    return {"files": seen["files"], "steps": steps, "ids": ids,
            "global_sequences": global_sequences, "host_packs": report.host_packs,
            "packs": report.packs, "padding_packs": report.padding_packs,
            "dropped_packs": report.dropped_packs,
            "dropped_sequences": report.dropped_sequences}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pattern")
    parser.add_argument("out")
    parser.add_argument("--jax", metavar="COORDINATOR", default=None)
    args = parser.parse_args()
    gc.freeze()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    results = {remainder: run(strategy, args.pattern, remainder)
               for remainder in ("pad", "drop")}
    if args.jax:
        from host_packing_jax_run import run as jax_run

        config = json.loads(os.environ["TF_CONFIG"])
        results["jax"] = jax_run(args.pattern, args.jax, len(config["cluster"]["worker"]),
                                 config["task"]["index"])
    with open(args.out, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    sys.exit(main())
