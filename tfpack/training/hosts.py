"""Packing per host while training: each worker reads and packs only its own files.

`Trainer.fit` given a `HostPacking` (raw, unpacked files and the packing
settings) does what `tfpack.data.pack(..., input_sharded=True)` does for a
hand-written input function, on every worker of the strategy:

1. `tfpack.data.host_files` gives worker ``w`` of ``W`` the files
   ``files[w::W]`` (nothing else is opened);
2. the worker packs its share; the workers exchange their pack counts once
   (`tfpack.data.strategy_all_gather`, one all-reduce) and each pads with
   empty packs (``remainder="pad"``: nothing lost, no loss target) or cuts
   its last packs (``"drop"``, reported) to one count, a whole number of
   updates; a collective that disagrees with a worker's own count, or is not
   finite integers, is refused on every worker;
3. the packs are repeated epoch after epoch and cut into micro-batches; an
   update takes ``micro_batch_size * accumulation_steps`` packs from each
   replica, so every example is trained on exactly once an epoch, by the
   worker that read it.

A resumed run packs again, once (the same files give the same packs: planning is
seeded) and skips the packs the restored updates consumed: every example is
still trained on exactly once an epoch. The checkpoint records the stream its
step counts in (`stream`: the files with their sizes, the number of hosts, the
packing settings, the updates' size and each host's pack count); resuming on
another one (a file added or changed, another planner, more or fewer hosts)
is refused with one `TfpackError` naming what differs, on every worker.

Example (one process, one worker: every file is its own):

>>> import tfpack
>>> source = tfpack.training.HostPacking(
...     "wiki/*.tfrecord", max_length=128, max_sequences_per_pack=3,
...     max_predictions_per_pack=20)
>>> trainer.fit(source, num_steps=1000)  # doctest: +SKIP
"""

from __future__ import annotations

import collections.abc
import os

from tfpack import _tensorflow
from tfpack.data import pack
from tfpack.data.hosts import host_files, strategy_all_gather
from tfpack.data.pack import PARAMETERS
from tfpack.errors import TfpackError
from tfpack.params import Anything, InstanceOf, validate_params

tf = _tensorflow.require("tfpack.training.HostPacking")

__all__ = ["HostPacking"]

_CALLABLE = InstanceOf(collections.abc.Callable, description="a callable")


class HostPacking:
    """Raw training files that each worker packs from its own share (`Trainer.fit`).

    Args:
        files: a path or glob, or a list of them: every worker must be given
            the same; worker ``w`` of ``W`` reads ``files[w::W]`` of the
            expanded list (`tfpack.data.host_files`), so there must be at
            least one file per worker.
        read: ``files -> tf.data.Dataset`` of unpacked examples (default
            `tfpack.formats.read_google_records`: Google
            ``create_pretraining_data`` records).
        max_length, max_sequences_per_pack, max_predictions_per_pack,
            algorithm, roles, truncate, seed, remainder: as for
            `tfpack.data.pack` (``K`` and, for masked-LM data, ``M`` fixed so
            that every worker's packs have one shape).
        all_gather: the collective of the pack counts; ``None``:
            `tfpack.data.strategy_all_gather` of the trainer's strategy.

    >>> HostPacking("part-*.tfrecord", max_length=8, max_sequences_per_pack=2).remainder
    'pad'
    """

    @validate_params({
        "files": Anything("paths or patterns, checked by tfpack.data.host_files"),
        "read": [None, _CALLABLE],
        **{name: PARAMETERS[name] for name in (
            "max_length", "max_predictions_per_pack", "algorithm", "roles", "truncate", "seed",
            "remainder")},
        "max_sequences_per_pack": PARAMETERS["max_sequences_per_pack"][1],
        "all_gather": [None, _CALLABLE],
    })
    def __init__(self, files, read=None, *, max_length: int, max_sequences_per_pack: int,
                 max_predictions_per_pack: int | None = None, algorithm: str | None = None,
                 roles=None, truncate: bool = False, seed: int = 0, remainder: str = "pad",
                 all_gather=None):
        self.files = files
        self.read = read
        self.max_length = max_length
        self.max_sequences_per_pack = max_sequences_per_pack
        self.max_predictions_per_pack = max_predictions_per_pack
        self.algorithm = algorithm
        self.roles = roles
        self.truncate = truncate
        self.seed = seed
        self.remainder = remainder
        self.all_gather = all_gather

    def packer(self, context: tf.distribute.InputContext, strategy, per_replica_batch_size: int):
        """This worker's `tfpack.data.pack` transformation (``input_sharded``)."""
        gather = self.all_gather or strategy_all_gather(strategy)
        return pack(max_length=self.max_length,
                    max_sequences_per_pack=self.max_sequences_per_pack,
                    max_predictions_per_pack=self.max_predictions_per_pack,
                    algorithm=self.algorithm, roles=self.roles, truncate=self.truncate,
                    seed=self.seed, remainder=self.remainder, input_context=context,
                    input_sharded=True, all_gather=gather,
                    per_replica_batch_size=per_replica_batch_size)

    def examples(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
        """The unpacked examples of this worker's files only."""
        files = host_files(self.files, context)
        if self.read is None:
            from tfpack.formats import read_google_records

            return read_google_records(files)
        return self.read(files)


def distribute(trainer, source: HostPacking, start_step: int = 0, packed: dict | None = None):
    """``(distributed micro-batches, {"spec", "report", "hosts", "packs"})``: every worker
    packs its share, from update ``start_step`` on, epoch after epoch. ``packed``: what
    an earlier call returned, whose packs (by input pipeline) are read again instead of
    reading and planning the share a second time (a resumed run's stream is the same)."""
    per_replica = trainer.micro_batch_size * trainer.accumulation_steps
    seen = {"packs": {}} if packed is None else packed

    def dataset_fn(context: tf.distribute.InputContext):
        packs = seen["packs"].get(context.input_pipeline_id)
        if packs is None:
            packer = source.packer(context, trainer.strategy, per_replica)
            packs = source.examples(context).apply(packer)
            seen["spec"], seen["report"] = packs.element_spec, packer.report
            seen["hosts"] = context.num_input_pipelines
            seen["packs"][context.input_pipeline_id] = packs
        per_worker = context.num_replicas_in_sync // context.num_input_pipelines
        packs = packs.repeat().skip(start_step * per_replica * max(per_worker, 1))
        return packs.batch(trainer.micro_batch_size, drop_remainder=True).prefetch(
            tf.data.AUTOTUNE)

    return trainer.strategy.distribute_datasets_from_function(dataset_fn), seen


def stream(trainer, source: HostPacking, seen: dict) -> dict:
    """What a checkpoint's step counts in (`Checkpointer`): equal on every worker."""
    files = host_files(source.files, None)  # every host's, in the order they are shared
    settings = ("max_length", "max_sequences_per_pack", "max_predictions_per_pack",
                "algorithm", "truncate", "seed", "remainder")
    return {"kind": "per-host packing", "hosts": seen["hosts"],
            "files": [[os.path.abspath(f) if "://" not in f else f,
                       int(tf.io.gfile.stat(f).length)] for f in files],
            **{name: getattr(source, name) for name in settings},
            "roles": None if source.roles is None else repr(source.roles),
            "packs_per_update": trainer.packs_per_update,
            "host_packs": [int(c) for c in seen["report"].host_packs]}


def fit(trainer, source: HostPacking, num_steps: int):
    """`Trainer.fit` on a `HostPacking`: the same stream on every later call."""
    if trainer._iterator is not None and trainer._dataset is not source:
        raise TfpackError("Later `fit` calls continue the stream of the first call's input "
                          f"and must pass it again. Received: dataset={source!r:.200}")
    if trainer._iterator is None:
        distributed, seen = distribute(trainer, source)
        trainer._dataset = source
        trainer._element_spec = seen["spec"]
        trainer.host_report = seen["report"]
        trainer._build(trainer._element_spec)
        trainer._iterator = iter(distributed)
        trainer._host_stream = stream(trainer, source, seen)
        trainer._host_packed = seen
    return trainer._run(num_steps, lambda resumed: iter(distribute(
        trainer, source, resumed, packed=trainer._host_packed)[0]),
                        save_iterator=False, stream=trainer._host_stream)
