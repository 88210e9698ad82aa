"""The one interface every ``tfpack pack`` engine implements.

An engine turns a checked `Job` (Google TFRecords in, ``L``, ``K``, ``M``,
plan or algorithm, seed) into complete shards in an empty staging directory.
Every engine runs the same stages, each on the data it can see (the whole
input on one machine, or one file / one shard per worker)::

    1. validate and scan   every record checked; its length and predictions
    2. plan                the histogram planned (or the given plan checked)
    3. place               each example's pack and slot (`tfpack.packing.placement`)
    4. build shards        the packs of each output shard (`ShardBuilder`), written
    5. finish              plan.json, stats.json, manifest.json last (`finish`, here)

What is shared is written once, here: the setup checks (`Job.check`), the
output directory (built beside, swapped in whole: `tfpack.formats.outputs`)
and the wrap-up (`finish`). An engine implements stages 1-4 as `Engine.build`
and returns a `Built`; `pack` runs the rest. Engines register themselves by
name with `register` (importing `tfpack.engines` registers ``local`` and
``beam``); a new engine is one module and a registration, and its
command-line flags come with it (`Engine.add_arguments`).

Example:

>>> from tfpack.engines import base
>>> sorted(base.names())
['beam', 'local']
>>> base.get("local").name
'local'
"""

from __future__ import annotations

import abc
import argparse
import dataclasses
import hashlib
import json
import os
import time

from tfpack.errors import TfpackError
from tfpack.packing.balance import check_balance
from tfpack.packing.flow import check_plan_fits, check_source, shard_size
from tfpack.packing.plans import PackingPlan
from tfpack.params import (Anything, Boolean, Directory, InstanceOf, Integer, Options,
                           OutputPath, Text, declare_fields, validate_params)

__all__ = ["Job", "JOB_FIELDS", "Built", "Engine", "register", "get", "names", "pack", "finish",
           "input_stamp", "check_unchanged"]

_ENGINES: dict[str, type[Engine]] = {}
_PATTERN = [Text("a glob or comma-separated globs"),
            InstanceOf(list, tuple, description="a list of globs")]
_NAME = Text("an engine name")
_COUNT = Integer(0)


@declare_fields({
    "input_pattern": _PATTERN, "max_length": Integer(1),
    "max_sequences_per_pack": [None, Integer(1)], "algorithm": [None, Text("a planner name")],
    "plan": [None, InstanceOf(PackingPlan)], "max_predictions_per_pack": [None, Integer(0)],
    "packs_per_shard": Integer(1), "seed": Integer(0), "shuffle": Boolean(),
    "batch_size": [None, Integer(1)],
    "balance": [None, Boolean(), Options("sequences", "tokens")],
})
@dataclasses.dataclass(frozen=True)
class Job:
    """What ``tfpack pack`` is asked to do, the same for every engine.

    Attributes:
        input_pattern: glob, comma-separated globs or list of globs.
        max_length, max_sequences_per_pack: ``L`` and ``K`` (``None``: the
            depth the plan uses).
        algorithm: planner name (default ``"optimal"``), or ``plan``: a
            `tfpack.packing.PackingPlan` (e.g. from ``tfpack plan``).
        max_predictions_per_pack: ``M``; ``None``: the most any pack needs.
        packs_per_shard: packs per output shard; bounds a worker's memory.
        seed: seeds the assignment and the pack shuffle.
        shuffle: shuffle whole packs across shards.
        batch_size, balance: order the packs so that every ``batch_size``
            consecutive packs (a batch of ``read_packed``) hold the same
            number of sequences (``balance=True`` or ``"sequences"``) or
            tokens (``"tokens"``), `tfpack.packing.balance`; shards then hold
            whole batches (`pack` rounds ``packs_per_shard`` down to a
            multiple of ``batch_size``).
    """

    input_pattern: object
    max_length: int
    max_sequences_per_pack: int | None
    algorithm: str | None = None
    plan: object = None
    max_predictions_per_pack: int | None = None
    packs_per_shard: int = 16384
    seed: int = 0
    shuffle: bool = True
    batch_size: int | None = None
    balance: object = None

    def check(self) -> None:
        """Refuse bad arguments before any input is read or anything written (each field's
        own kind is declared: `declare_fields`)."""
        from tfpack.formats import validation

        check_source(self.plan, self.algorithm)
        validation.check_sizes(self.max_length, self.max_sequences_per_pack,
                               self.max_predictions_per_pack)
        if self.plan is not None:
            check_plan_fits(self.plan, self.max_length, self.max_sequences_per_pack)
        check_balance(self.balance, self.batch_size, batch_size_alone=False)

    def shard_name(self, shard: int, num_shards: int) -> str:
        """File name of output shard ``shard`` of ``num_shards``."""
        return f"part-{shard:05d}-of-{num_shards:05d}.tfrecord"


# The `Job` fields an entry point passes through besides ``input_pattern``.
JOB_FIELDS = tuple(f.name for f in dataclasses.fields(Job) if f.name != "input_pattern")


@declare_fields({
    "plan": Anything("the PackingPlan used"), "shards": InstanceOf(list),
    "features": InstanceOf(dict), "max_sequences_per_pack": Integer(1),
    "max_predictions_per_pack": [None, _COUNT], "input_files": _COUNT, "sequences": _COUNT,
    "tokens": _COUNT, "packs": _COUNT, "seconds": InstanceOf(dict),
    "balance": [None, InstanceOf(dict)],
})
@dataclasses.dataclass
class Built:
    """What an engine hands to `finish`: complete shards and what they hold.

    Attributes:
        plan: the `PackingPlan` used.
        shards: `tfpack.formats.manifest.ShardInfo` (or ``(name, packs)``) of
            each shard, in shard order, complete under its final name.
        features: manifest ``features`` of the packs.
        max_sequences_per_pack, max_predictions_per_pack: ``K`` and ``M``.
        input_files, sequences, tokens, packs: what was packed.
        seconds: engine timings for ``stats.json`` (``"total"`` is added).
        balance: `tfpack.packing.balance.BatchBalance.to_dict` of the pack
            order (``job.balance``), else ``None``.
    """

    plan: object
    shards: list
    features: dict
    max_sequences_per_pack: int
    max_predictions_per_pack: int
    input_files: int
    sequences: int
    tokens: int
    packs: int
    seconds: dict = dataclasses.field(default_factory=dict)
    balance: dict | None = None


class Engine(abc.ABC):
    """A way to run stages 1-4 of a `Job`; `pack` does the rest.

    Subclasses are registered (`register`), implement `build`, and may add
    command-line flags (`add_arguments`, read back by `options_from`).
    Constructor keyword arguments are the engine's own options
    (``beam_options=`` for Beam); bad ones raise `TfpackError` there.
    """

    name: str = ""

    @abc.abstractmethod
    def build(self, job: Job, staging: str) -> Built:
        """Stages 1-4 of ``job`` into the empty directory ``staging``."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add this engine's own ``tfpack pack`` flags (default: none)."""

    @classmethod
    def options_from(cls, args: argparse.Namespace) -> dict:
        """This engine's constructor options from ``tfpack pack``'s parsed flags.

        Called by the CLI only, so an engine may also keep its libraries' log
        lines off the CLI's stderr here.
        """
        return {}

    @classmethod
    def flags_given(cls, args: argparse.Namespace) -> list[str]:
        """Which of this engine's own flags were given (to refuse them for another engine)."""
        return []


@validate_params({"name": _NAME})
def register(name: str):
    """Class decorator: register an `Engine` subclass under ``name``."""
    def decorate(cls):
        cls.name = name
        _ENGINES[name] = cls
        return cls
    return decorate


def names() -> list[str]:
    """Registered engine names, in registration order."""
    return list(_ENGINES)


@validate_params({"name": _NAME})
def get(name: str) -> type[Engine]:
    """The engine registered as ``name``."""
    if name not in _ENGINES:
        raise TfpackError(f"`engine` must be one of {names()}. Received: engine={name!r}")
    return _ENGINES[name]


@validate_params({"engine": _NAME, "input_pattern": _PATTERN,
                  "output_dir": OutputPath("directory"), "overwrite": Boolean(),
                  "engine_options": [None, InstanceOf(dict)]})
def pack(engine: str, input_pattern, output_dir: str, *, overwrite: bool = False,
         engine_options: dict | None = None, **job) -> dict:
    """Run ``tfpack pack`` on ``engine``; returns the stats (also in ``stats.json``).

    ``job`` holds the `Job` fields. The job is checked and the engine
    created (so a bad option fails) before ``output_dir`` is touched; the
    output is built beside ``output_dir`` and swapped in whole, or not at all.
    """
    from tfpack.formats import outputs

    started = time.perf_counter()
    job = Job(input_pattern, **job)
    job.check()
    job = dataclasses.replace(  # balance named once; shards of whole batches
        job, balance=check_balance(job.balance, job.batch_size),
        packs_per_shard=shard_size(job.packs_per_shard, job.batch_size))
    runner = get(engine)(**(engine_options or {}))
    with outputs.replacing_output(output_dir, overwrite=overwrite) as staging:
        built = runner.build(job, staging)
        built.seconds["total"] = time.perf_counter() - started
        return finish(job, built, staging, engine=runner.name)


def input_stamp(path: str) -> tuple[int, int] | None:
    """``(size in bytes, modification time in ns)`` of an input file (any file system)."""
    import tensorflow as tf

    try:
        info = tf.io.gfile.stat(path)
    except tf.errors.OpError:
        return None
    return int(info.length), int(info.mtime_nsec)


def check_unchanged(path: str, stamp) -> None:
    """Refuse an input file whose size or modification time is not ``stamp`` any more.

    The Beam engine reads its input twice (scan, then route and build), and
    the local engine checks the files it scanned did not change meanwhile: a
    file rewritten in between would be packed against the plan of its old
    records.
    """
    now = input_stamp(path)
    if now is None or tuple(now) != tuple(stamp):
        what = ("is gone" if now is None else
                f"has {now[0]} bytes, {stamp[0]} when scanned" if now[0] != stamp[0] else
                "was modified after it was scanned")
        raise TfpackError("The input files must not change while they are packed. "
                          f"Received: file={path!r} {what}")


@validate_params({"job": InstanceOf(Job), "built": InstanceOf(Built), "directory": Directory(),
                  "engine": _NAME})
def finish(job: Job, built: Built, directory: str, *, engine: str) -> dict:
    """Stage 5: ``plan.json``, ``stats.json`` and, last, ``manifest.json``; the stats."""
    from tfpack.formats import manifest

    L, K, M = job.max_length, built.max_sequences_per_pack, built.max_predictions_per_pack
    stats = {
        "input_files": built.input_files,
        "output_files": [s.name if isinstance(s, manifest.ShardInfo) else s[0]
                         for s in built.shards],
        "packs": built.packs,
        "sequences": built.sequences,
        "tokens": built.tokens,
        "padding_tokens": built.packs * L - built.tokens,
        "efficiency": built.tokens / (built.packs * L),
        "packing_factor": built.sequences / built.packs,
        "max_length": L,
        "max_sequences_per_pack": K,
        "max_predictions_per_pack": M,
        "algorithm": built.plan.algorithm,
        "seed": job.seed,
        "balance": built.balance,
        "engine": engine,
        "seconds": built.seconds,
    }
    plan_json = built.plan.to_json()
    manifest.write_atomic(os.path.join(directory, "plan.json"), plan_json)
    manifest.write_atomic(os.path.join(directory, "stats.json"), json.dumps(stats, indent=2))
    # Last: the manifest that makes the output complete for `read_packed`.
    manifest.write_manifest(
        directory, built.shards, features=built.features, max_length=L,
        max_sequences_per_pack=K, max_predictions_per_pack=M, sequences=built.sequences,
        tokens=built.tokens, files=("plan.json", "stats.json"), seed=job.seed,
        plan_sha256=hashlib.sha256(plan_json.encode()).hexdigest(),
        created_by="tfpack pack" if engine == "local" else f"tfpack pack --engine {engine}",
        extra={"algorithm": built.plan.algorithm, "shuffle": job.shuffle,
               "packs_per_shard": job.packs_per_shard, "batch_size": job.batch_size,
               "balance": job.balance, "engine": engine})
    return stats
