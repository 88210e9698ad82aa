"""Each host reads its own files; the hosts agree on how many packs they emit.

`tfpack.data.pack(..., input_context=context, input_sharded=True)` packs the
dataset it is given as this host's share of the input. These helpers make
that share without reading anybody else's data, and let the hosts agree on
one pack count (`tfpack.packing.hosts` has the rules):

- `host_files`: this host's files of a list or glob (``files[w::W]``),
  before anything is read; build the dataset from them.
- `strategy_all_gather`: every input pipeline's count through a
  `tf.distribute` strategy (one all-reduce; `MultiWorkerMirroredStrategy`).
- `jax_all_gather`: every process's count through JAX
  (``jax.experimental.multihost_utils``; Keras on JAX across processes).

Example (one host: every file is its own):

>>> import os, tempfile, tensorflow as tf
>>> folder = tempfile.mkdtemp()
>>> for name in "abc":
...     open(os.path.join(folder, name + ".txt"), "w").close()
>>> context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
>>> [os.path.basename(f) for f in host_files(os.path.join(folder, "*.txt"), context)]
['b.txt']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.packing.hosts import split_files
from tfpack.params import Anything, InstanceOf, validate_params

__all__ = ["host_files", "strategy_all_gather", "jax_all_gather"]

_GLOB = set("*?[")


@validate_params({
    "files": Anything("paths or patterns, checked one by one"),
    "input_context": [None, InstanceOf(tf.distribute.InputContext)],
})
def host_files(files: str | Sequence[str],
               input_context: tf.distribute.InputContext | None) -> list[str]:
    """The files this input pipeline reads: ``files[w::W]`` of the expanded list.

    Args:
        files: a path or glob pattern, or a list or tuple of them (`str` or
            `os.PathLike`); patterns expand in
            sorted order, the list keeps its order. Every host must be given
            the same list.
        input_context: the `tf.distribute.InputContext` (``W`` pipelines,
            this one ``w``); ``None``: all files.

    Returns:
        This host's file paths (at least one): nothing is opened.

    Raises:
        TfpackError: a path that does not exist, a pattern matching nothing,
            a file named twice, or fewer files than hosts.
    """
    single = isinstance(files, (str, os.PathLike))
    entries = [files] if single else list(files) if isinstance(files, (list, tuple)) else []
    if not entries or not all(isinstance(e, (str, os.PathLike)) for e in entries):
        raise TfpackError("`files` must be a path or pattern, or a non-empty list of them. "
                          f"Received: files={files!r}")
    entries = [os.fspath(e) for e in entries]
    expanded = []
    for entry in entries:
        if _GLOB & set(entry):
            matches = sorted(tf.io.gfile.glob(entry))
        else:
            matches = [entry] if tf.io.gfile.exists(entry) else []
        if not matches:
            raise TfpackError(f"`files` must name existing files. Received: {entry!r} "
                              "matches no file")
        directories = [m for m in matches if tf.io.gfile.isdir(m)]
        if directories:
            raise TfpackError("`files` must name files, not directories (use a pattern such "
                              f"as 'DIR/*.tfrecord'). Received: {directories[0]!r}")
        expanded += matches
    _check_distinct_files(expanded)
    if input_context is None:
        return split_files(expanded, num_hosts=1, host=0)
    return split_files(expanded, num_hosts=input_context.num_input_pipelines,
                       host=input_context.input_pipeline_id)


def _check_distinct_files(files: list[str]) -> None:
    """One file named twice (through ``./``, ``//`` or a link) would go to two hosts and
    every example in it be packed twice: local files are told apart by (device, inode)."""
    seen = {}
    for path in files:
        if "://" in path:
            continue
        info = os.stat(path)
        first = seen.setdefault((info.st_dev, info.st_ino), path)
        if first != path:
            raise TfpackError("`files` must not name a file twice (by another path or a "
                              f"link). Received: {first!r} and {path!r}")


@validate_params({"strategy": InstanceOf(tf.distribute.Strategy)})
def strategy_all_gather(strategy: tf.distribute.Strategy) -> Callable[[int], list[int]]:
    """An ``all_gather`` for `pack` through ``strategy``: one count a replica.

    Every replica contributes its host's count at its own slot of a vector
    and the strategy sums the vectors (``strategy.reduce``, which
    `MultiWorkerMirroredStrategy` runs as one collective all-reduce across the
    workers). Call it on every worker, outside ``strategy.run`` (e.g. in the
    ``dataset_fn`` of ``distribute_datasets_from_function``), once per packer.

    Example (the default strategy: one replica):

    >>> import tensorflow as tf
    >>> strategy_all_gather(tf.distribute.get_strategy())(5)
    [5]
    """
    replicas = strategy.num_replicas_in_sync

    def all_gather(count: int) -> list[int]:
        def slot():
            replica = tf.distribute.get_replica_context().replica_id_in_sync_group
            return tf.one_hot(replica, replicas, dtype=tf.float64) * float(count)

        total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(slot), axis=None)
        return [int(round(c)) for c in np.asarray(total).tolist()]

    return all_gather


def jax_all_gather() -> Callable[[int], list[int]]:
    """An ``all_gather`` for `pack` across JAX processes: one count a process.

    Uses ``jax.experimental.multihost_utils.process_allgather`` (after
    ``jax.distributed.initialize``); every process must apply its packer at
    the same point of its program.

    Example (one process)::

        >>> jax_all_gather()(5)  # doctest: +SKIP
        [5]
    """
    from jax.experimental import multihost_utils  # JAX is optional for tfpack.

    def all_gather(count: int) -> list[int]:
        gathered = multihost_utils.process_allgather(np.asarray(count, np.int32))
        return [int(c) for c in np.asarray(gathered).reshape(-1)]

    return all_gather
