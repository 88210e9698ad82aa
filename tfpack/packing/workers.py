"""Which packs of a packed output each training worker reads (numpy only).

A packed output holds ``N`` packs in shards, in written order (the
manifest's record counts). `split_packs` gives each of ``W`` workers one
contiguous range of that order, and the number of empty packs to append, so
that:

- every pack is read by exactly one worker, once per epoch (nothing lost or
  repeated);
- every worker runs the same number of updates: each worker holds
  ``steps * packs_per_step`` packs, where ``steps = ceil(N / (W *
  packs_per_step))``; the ``W * steps * packs_per_step - N`` missing packs
  are empty packs (``sequence_mask`` all 0, no loss target), at the end of
  the workers' ranges, so only the last update of an epoch holds any;
- the real packs are spread as evenly as they can be: worker ``w`` gets
  ``N // W`` packs, plus one for the first ``N % W`` workers;
- a worker reads only the shards its range overlaps. A shard is read from its
  start (TFRecords have no index), so a worker reads at most its range plus
  the records of its first shard before the range: its share plus less than
  one shard (`WorkerShare.records_read`).

The assignment is a pure function of the shard counts, ``W`` and
``packs_per_step``: a resumed job (same settings) continues it exactly.

Global order: update ``u`` of the job takes, from every worker ``w`` in turn,
packs ``[u * packs_per_step, (u + 1) * packs_per_step)`` of its range. So
the global order of packs depends on ``W``: `PackSplit.global_batches` gives
the batches a single process must be fed to reach the same weights.

Worked example: shards of 5, 3 and 4 packs (``N = 12``), ``W = 2`` workers,
``packs_per_step = 4``: ``steps = ceil(12 / 8) = 2``, each worker holds 8
packs, 16 - 12 = 4 of them empty::

    worker 0: packs [0, 6)  + 2 empty   shards 0, 1   (reads records 0..5)
    worker 1: packs [6, 12) + 2 empty   shards 1, 2   (reads shard 1 from its
                                                      start: records 5..11)

>>> split = split_packs([5, 3, 4], num_workers=2, packs_per_step=4)
>>> split.steps, [(s.start, s.stop, s.padding) for s in split.shares]
(2, [(0, 6, 2), (6, 12, 2)])
>>> [s.shards for s in split.shares], [s.records_read for s in split.shares]
([(0, 1), (1, 2)], [6, 7])
>>> split.global_batches(4).tolist()
[[0, 1, 2, 3, 6, 7, 8, 9], [4, 5, -1, -1, 10, 11, -1, -1]]
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["PackSplit", "WorkerShare", "split_packs"]


@dataclasses.dataclass(frozen=True)
class WorkerShare:
    """One worker's packs for one epoch.

    Attributes:
        worker: the worker's index (its ``input_pipeline_id``).
        start, stop: its range ``[start, stop)`` of pack indices, in the
            output's written order (shards concatenated).
        padding: empty packs it appends after the range.
        shards: indices of the shards the range overlaps (empty when the
            range is empty).
        ranges: ``(shard, first, stop)`` per overlapped shard: the records
            ``[first, stop)`` of that shard, 0-based inside the shard.
        records_read: records a sequential reader reads for it: the range
            plus the records of its first shard before ``start``.
    """

    worker: int
    start: int
    stop: int
    padding: int
    shards: tuple[int, ...]
    ranges: tuple[tuple[int, int, int], ...]
    records_read: int

    @property
    def packs(self) -> int:
        """Packs the worker yields per epoch: its range plus its padding."""
        return self.stop - self.start + self.padding


@dataclasses.dataclass(frozen=True)
class PackSplit:
    """What `split_packs` returns: every worker's share of one epoch.

    Attributes:
        shard_records: packs per shard, in written order.
        num_workers: ``W``.
        packs_per_step: packs each worker contributes to one update.
        steps: updates per epoch (the same for every worker).
        shares: one `WorkerShare` per worker, in worker order.
    """

    shard_records: tuple[int, ...]
    num_workers: int
    packs_per_step: int
    steps: int
    shares: tuple[WorkerShare, ...]

    @property
    def num_packs(self) -> int:
        """Real packs in the output (``N``)."""
        return sum(self.shard_records)

    @property
    def padding(self) -> int:
        """Empty packs added over all workers."""
        return sum(s.padding for s in self.shares)

    def worker_order(self, worker: int) -> np.ndarray:
        """Pack indices worker ``worker`` yields in one epoch, ``-1`` for empty packs."""
        share = self.shares[worker]
        return np.concatenate([np.arange(share.start, share.stop, dtype=np.int64),
                               np.full(share.padding, -1, np.int64)])

    def global_batches(self, worker_batch: int) -> np.ndarray:
        """The global batches of one epoch, as one process must be fed them.

        Batch ``i`` is, for every worker ``w`` in turn, its packs ``[i *
        worker_batch, (i + 1) * worker_batch)`` (``-1``: an empty pack). With
        ``worker_batch`` = packs per worker per micro-step (micro-batch size
        times replicas per worker), batch ``i`` is micro-step ``i`` of the
        job, replicas in global order.

        Returns:
            int64 ``[steps * packs_per_step / worker_batch, W * worker_batch]``.
        """
        if (isinstance(worker_batch, bool) or not isinstance(worker_batch, (int, np.integer))
                or worker_batch < 1 or self.packs_per_step % worker_batch):
            raise TfpackError(
                f"`worker_batch` must be a positive divisor of packs_per_step="
                f"{self.packs_per_step}. Received: worker_batch={worker_batch!r}")
        per_worker = np.stack([self.worker_order(w) for w in range(self.num_workers)])
        batches = per_worker.reshape(self.num_workers, -1, worker_batch)
        return batches.transpose(1, 0, 2).reshape(batches.shape[1], -1)


def split_packs(shard_records: Sequence[int], *, num_workers: int,
                packs_per_step: int) -> PackSplit:
    """Each worker's contiguous range of packs and its padding (module docstring).

    Args:
        shard_records: packs per shard in written order (the manifest's
            record counts).
        num_workers: ``W``, the input pipelines (one per worker).
        packs_per_step: packs each worker contributes to one update
            (micro-batch size x replicas per worker x accumulation steps).

    Returns:
        A `PackSplit`.

    Raises:
        TfpackError: a count is negative or not an integer, the output holds
            no pack, or ``num_workers`` / ``packs_per_step`` is not positive.
    """
    for name, value in (("num_workers", num_workers), ("packs_per_step", packs_per_step)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise TfpackError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    counts = tuple(shard_records)
    if any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 0
           for c in counts):
        raise TfpackError("`shard_records` must be non-negative integers (packs per shard). "
                          f"Received: shard_records={list(counts)!r}")
    counts = tuple(int(c) for c in counts)
    total = sum(counts)
    if total == 0:
        raise TfpackError("The packed output must hold at least one pack. "
                          f"Received: shard_records={list(counts)!r}")
    W, P = int(num_workers), int(packs_per_step)
    steps = -(-total // (W * P))
    ends = np.cumsum(counts)  # Shard s holds packs [ends[s] - counts[s], ends[s]).
    shares, start = [], 0
    for w in range(W):
        real = total // W + (w < total % W)
        stop = start + real
        first = int(np.searchsorted(ends, start, side="right"))
        last = int(np.searchsorted(ends, stop - 1, side="right")) if real else first - 1
        shards = tuple(s for s in range(first, last + 1) if counts[s])
        ranges = tuple((s, max(start, int(ends[s]) - counts[s]) - (int(ends[s]) - counts[s]),
                        min(stop, int(ends[s])) - (int(ends[s]) - counts[s]))
                       for s in shards)
        read = stop - (int(ends[shards[0]]) - counts[shards[0]]) if shards else 0
        shares.append(WorkerShare(w, start, stop, steps * P - real, shards, ranges, read))
        start = stop
    return PackSplit(counts, W, P, steps, tuple(shares))
