"""Keras on JAX across processes: `model.fit` on a packed output, each process reading its share.

The way Keras users train on TPU pods and GPU clusters: one process per host,
joined by `jax.distributed`, one global batch split over every device by
`keras.distribution.DataParallel`. tfpack gives each process a contiguous
range of the output's packs (`tfpack.packing.workers.split_packs`, from the
manifest's counts alone), and the process opens and reads only the shards
that range overlaps (`tfpack.formats.read_packed(..., packs=(start, stop))`).
Every process runs the same number of updates: the last one is padded with
empty packs, which carry no loss target (tfpack's losses divide by the
global count of targets, so they change nothing).

Launch one process per host (here: two on this machine, CPU only):

    JAX_PLATFORMS=cpu python examples/multihost_jax.py --input packed/ \\
        --coordinator localhost:12355 --num-processes 2 --process-id 0 &
    JAX_PLATFORMS=cpu python examples/multihost_jax.py --input packed/ \\
        --coordinator localhost:12355 --num-processes 2 --process-id 1

``packed/`` is what ``tfpack pack`` (BERT pre-training packs) or
``tfpack.formats.write_packed`` (causal-LM packs) wrote. On a TPU pod or a GPU
cluster, drop ``JAX_PLATFORMS=cpu`` and point ``--coordinator`` at process
0's host. The last stdout line is JSON: ``weights_sha256`` (the same on every
process), ``updates``, and what this process read.

``--as-processes N`` runs one process fed the global batches ``N`` processes
form, in the same order: its ``weights_sha256`` and weights match theirs (to
float32 rounding; tests/training/test_multihost_jax.py checks it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="a packed output directory")
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--coordinator", help="HOST:PORT of process 0 (needed for N > 1)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, help="updates per epoch (default: the whole epoch)")
    parser.add_argument("--batch-size", type=int, default=8, help="global packs per update")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-weights", help="write the final weights to this .npz file")
    parser.add_argument("--as-processes", type=int, default=None,
                        help="one process fed the global batches N processes form")
    args = parser.parse_args(argv)
    if args.num_processes < 1 or not 0 <= args.process_id < args.num_processes:
        parser.error("--process-id must be in [0, --num-processes)")
    if args.num_processes > 1 and not args.coordinator:
        parser.error("--coordinator HOST:PORT is needed with --num-processes > 1")
    if args.as_processes is not None and args.num_processes != 1:
        parser.error("--as-processes runs one process: leave --num-processes at 1")
    share = args.as_processes or args.num_processes
    if args.batch_size < 1 or args.batch_size % share:
        parser.error(f"--batch-size must be a positive multiple of the processes ({share})")
    return args


def join(args) -> None:
    """This process joins the job: `jax.distributed`, then Keras's data-parallel layout."""
    import jax
    import keras

    if args.num_processes > 1:
        jax.distributed.initialize(args.coordinator, num_processes=args.num_processes,
                                   process_id=args.process_id)
    # Each process feeds its own share: Keras must not shard the dataset again.
    keras.distribution.set_distribution(keras.distribution.DataParallel(
        devices=keras.distribution.list_devices(), auto_shard_dataset=False))


def build_model(output, args):
    """A small tfpack model for the packs' task (BERT pre-training or causal LM)."""
    import keras

    from tfpack import models

    keras.utils.set_random_seed(args.seed)  # the same initial weights on every process
    L = output.max_length
    if "masked_lm_positions" in output.features:
        encoder = models.BertEncoder(vocabulary_size=args.vocab_size, num_layers=2,
                                     hidden_dim=64, num_heads=2, intermediate_dim=128,
                                     max_sequence_length=L, dropout=0.0)
        model = models.BertPretrainer(encoder)
    elif output.features.get("labels", {}).get("shape") == [L]:
        model = models.CausalLM(vocabulary_size=args.vocab_size, num_layers=2, hidden_dim=64,
                                num_heads=2, intermediate_dim=128, max_sequence_length=L)
    else:
        raise SystemExit(f"multihost_jax.py: {args.input!r} holds neither BERT pre-training nor "
                         f"causal-LM packs (features: {sorted(output.features)})")
    model.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    return model


def process_dataset(output, split, worker: int, worker_batch: int):
    """This process's packs, batched: its range, then its empty packs, epoch after epoch."""
    from tfpack.training.inputs import worker_packs

    return worker_packs(output, split, worker).batch(worker_batch, drop_remainder=True)


def reference_dataset(output, split, worker_batch: int):
    """One process fed the global batches ``split.num_workers`` processes form."""
    import numpy as np
    import tensorflow as tf

    from tfpack.training.inputs import worker_packs

    rows, where = [], {}  # where: global pack index (-1: an empty pack) -> its row
    for worker in range(split.num_workers):
        packs = worker_packs(output, split, worker, repeat=False).as_numpy_iterator()
        for index, pack in zip(split.worker_order(worker), packs, strict=True):
            where.setdefault(int(index), len(rows))
            rows.append(pack)
    stacked = {n: np.stack([row[n] for row in rows]) for n in rows[0]}
    order = np.array([where[int(i)] for i in split.global_batches(worker_batch).reshape(-1)])
    return tf.data.Dataset.from_tensor_slices(
        {n: v[order] for n, v in stacked.items()}).batch(
            split.num_workers * worker_batch).repeat()


def weights_sha256(model) -> str:
    import numpy as np

    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(np.ascontiguousarray(np.asarray(weight), np.float32).tobytes())
    return digest.hexdigest()


def main(argv=None) -> int:
    args = parse_args(argv)
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")  # tf.data only: the devices are JAX's
    join(args)
    from tfpack.packing.workers import split_packs
    from tfpack.training.inputs import packed_output

    output = packed_output(args.input)
    workers = args.as_processes or args.num_processes
    worker_batch = args.batch_size // workers
    split = split_packs([records for _, records in output.shards], num_workers=workers,
                        packs_per_step=worker_batch)
    if args.as_processes:
        dataset = reference_dataset(output, split, worker_batch)
    else:
        dataset = process_dataset(output, split, args.process_id, worker_batch)
    steps = split.steps if args.steps is None else min(args.steps, split.steps)
    model = build_model(output, args)
    history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=steps, shuffle=False,
                        verbose=0)
    if args.save_weights:
        import numpy as np

        np.savez(args.save_weights, **{f"{i:03d}:{w.path}".replace("/", "."): np.asarray(w)
                                       for i, w in enumerate(model.weights)})
    share = split.shares[args.process_id]
    print(json.dumps({
        "process_id": args.process_id, "num_processes": args.num_processes,
        "updates": int(model.optimizer.iterations.numpy()),
        "loss": float(history.history["loss"][-1]),
        "packs": [share.start, share.stop], "empty_packs": share.padding,
        "shards_read": [os.path.basename(output.shards[s][0]) for s in share.shards],
        "weights_sha256": weights_sha256(model)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
