"""Each worker reads its own share of a packed output (tf.distribute input functions).

A dataset passed to `Trainer.fit` is read whole by every worker (each keeps
its micro-batches). A *packed output* (the directory `tfpack pack` or
`write_packed` wrote, or its `PackedOutput`) is split instead: the
manifest's record counts give every worker one contiguous range of packs
(`tfpack.packing.workers.split_packs`), and each worker opens and reads only
the shards of its range, about ``1 / W`` of the bytes.

Rules (documented in docs/training.md, "Many machines"):

- every pack is trained on exactly once per epoch, by the worker that reads
  it; every worker runs the same number of updates per epoch,
  ``ceil(N / (W * packs_per_step))``;
- the remainder is padded with *empty packs* (every feature at its padding
  value: ``sequence_mask`` and every label weight 0), at the end of each
  worker's range, so only the last update of an epoch holds any. An empty
  pack adds 0 to every loss sum and every target count, and the loss divides
  by the GLOBAL target counts of the update, so the update equals the one
  without it (`tests/training/test_worker_inputs.py` checks the gradients);
- the global order of packs depends on ``W``: update ``u`` takes, from each
  worker in turn, the next ``packs_per_step`` packs of its range
  (`PackSplit.global_batches` lists them for one process);
- a resumed job (same workers and batch sizes) starts each worker at
  update ``s`` of the same split by reading from that pack on: nothing lost
  or repeated.

Example:

>>> import tfpack
>>> fn = tfpack.training.packed_dataset_fn("packed/", global_batch_size=32)  # doctest: +SKIP
>>> data = strategy.distribute_datasets_from_function(fn)  # doctest: +SKIP
>>> model.fit(data, steps_per_epoch=fn.steps_per_epoch(strategy), epochs=3)  # doctest: +SKIP
"""

from __future__ import annotations

import os

from tfpack import _tensorflow
from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.formats.packed import PackedOutput, read_packed
from tfpack.formats.packed import packed_output as formats_packed_output
from tfpack.packing.workers import PackSplit, split_packs
from tfpack.params import Directory, InstanceOf, Integer, Text, validate_params

tf = _tensorflow.require("tfpack.training.packed_dataset_fn")

__all__ = ["PackedOutput", "packed_output", "empty_packs", "worker_packs", "packed_dataset_fn",
           "num_input_pipelines"]


def packed_output(pattern) -> PackedOutput:
    """`tfpack.formats.packed.packed_output` (metadata only); a `PackedOutput` as is."""
    return pattern if isinstance(pattern, PackedOutput) else formats_packed_output(pattern)


def is_packed_output(value) -> bool:
    """Whether `Trainer.fit` reads ``value`` by worker share (an output or its directory)."""
    if isinstance(value, PackedOutput):
        return True
    return isinstance(value, (str, os.PathLike)) and os.path.isdir(value)


def _read_range(output: PackedOutput, start: int, stop: int) -> tf.data.Dataset:
    """Packs ``[start, stop)`` in written order: only the shards holding them are opened,
    and every block is checked against the manifest as it is read (`read_packed`)."""
    reopened = formats_packed_output(output.directory)
    if (reopened.generation, reopened.shards) != (output.generation, output.shards):
        raise TfpackError(
            "A packed output must not change while a job reads it. Received: "
            f"{output.directory!r} was re-written after it was opened (generation "
            f"{output.generation} -> {reopened.generation})")
    return read_packed(output.directory, packs=(start, stop))


def _padding(name: str, size: int, sizes: dict) -> int | float:
    """The padding value of ``name`` at dimension ``size`` (``labels`` is [L] or [K])."""
    entries = [f for f in contract.table() if f.name == name]
    if not entries:
        return 0
    fitting = [f for f in entries if sizes.get(f.dimension) == size] or entries
    # Ambiguous only when L == K: IGNORE_LABEL (the smallest) is ignored by every loss.
    return min(f.padding for f in fitting)


def empty_packs(output: PackedOutput, count: int) -> tf.data.Dataset:
    """``count`` empty packs of ``output``'s features: every feature at its padding value
    (``sequence_mask`` 0, ``example_ids`` -1, token labels `IGNORE_LABEL`): no loss target."""
    sizes = {"L": output.max_length, "K": output.max_sequences_per_pack,
             "M": output.max_predictions_per_pack}
    pack = {}
    for name, f in output.features.items():
        shape = list(f["shape"])
        value = _padding(name, shape[0] if shape else 1, sizes)
        dtype = tf.float32 if f["dtype"] == "float32" else tf.int32
        pack[name] = tf.fill(shape, tf.cast(value, dtype))
    return tf.data.Dataset.from_tensors(pack).repeat(count)


def worker_packs(output, split: PackSplit, worker: int, *, start_step: int = 0,
                 repeat: bool = True) -> tf.data.Dataset:
    """Unbatched packs of worker ``worker``: its range, then its empty packs, epoch after
    epoch (``repeat``), from update ``start_step`` of the split on."""
    output = packed_output(output)
    share = split.shares[worker]
    per_epoch = split.steps * split.packs_per_step

    def epoch(offset: int) -> tf.data.Dataset:
        real = share.stop - share.start
        parts = []
        if offset < real:
            parts.append(_read_range(output, share.start + offset, share.stop))
        pads = share.padding - max(0, offset - real)
        if pads:
            parts.append(empty_packs(output, pads))
        data = parts[0]
        for part in parts[1:]:
            data = data.concatenate(part)
        return data

    offset = (start_step * split.packs_per_step) % per_epoch
    if not repeat:
        if start_step >= split.steps:
            return epoch(per_epoch)  # nothing left: an empty epoch
        return epoch(offset)
    first = epoch(offset) if offset else None
    rest = epoch(0).repeat()
    return rest if first is None else first.concatenate(rest)


def num_input_pipelines(strategy: tf.distribute.Strategy) -> int:
    """Input pipelines of ``strategy``: one per worker (MultiWorkerMirrored, TPU pods)."""
    # `num_input_pipelines` is only handed to input functions; the strategy's
    # worker count is the same number.
    return int(getattr(strategy.extended, "_num_workers", 1) or 1)


class packed_dataset_fn:  # noqa: N801 - used like a function, as tf.distribute's dataset_fn
    """A ``dataset_fn(input_context)`` for `model.fit` on a packed output, one share a worker.

    ``strategy.distribute_datasets_from_function(packed_dataset_fn(output, B))``
    gives each replica batches of ``B / replicas`` packs; each worker reads only
    its range of the output (module docstring: the assignment, the padding with
    empty packs, the global order). Pass ``steps_per_epoch(strategy)`` to
    `model.fit`: the stream repeats epoch after epoch.

    Args:
        output: a packed output directory or `PackedOutput`.
        global_batch_size: packs per step over all replicas.
        start_step: skip this many steps of the stream (resuming).
    """

    @validate_params({
        "output": [InstanceOf(PackedOutput), Directory(),
                   Text("a packed output directory or a glob of its shards")],
        "global_batch_size": Integer(1), "start_step": Integer(0),
    })
    def __init__(self, output, global_batch_size: int, *, start_step: int = 0):
        self.output = packed_output(output)
        self.global_batch_size = global_batch_size
        self.start_step = start_step

    def split(self, num_workers: int, num_replicas: int) -> PackSplit:
        """The split of the output over ``num_workers`` (`split_packs`)."""
        if self.global_batch_size % num_replicas:
            raise TfpackError(
                f"`global_batch_size` must be a multiple of the replicas ({num_replicas}). "
                f"Received: global_batch_size={self.global_batch_size}")
        return split_packs([r for _, r in self.output.shards], num_workers=num_workers,
                           packs_per_step=self.global_batch_size // num_workers)

    def steps_per_epoch(self, strategy: tf.distribute.Strategy) -> int:
        """Steps of one epoch: every pack once (the same on every worker)."""
        return self.split(num_input_pipelines(strategy), strategy.num_replicas_in_sync).steps

    def __call__(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
        split = self.split(context.num_input_pipelines, context.num_replicas_in_sync)
        packs = worker_packs(self.output, split, context.input_pipeline_id,
                             start_step=self.start_step)
        batch = context.get_per_replica_batch_size(self.global_batch_size)
        return packs.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
