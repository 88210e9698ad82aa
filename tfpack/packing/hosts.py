"""Packing per host: each host plans its own share, the hosts agree on one count.

Multi-host training needs every host to yield the same number of batches: a
host that runs out first leaves the others waiting forever in the next
collective. When every host packs only its own share of the raw input, the
shares (and so the pack counts) differ; the hosts exchange their counts once
(an all-gather of one integer, after planning and before the first pack) and
each pads its packs with empty ones up to the largest count
(``remainder="pad"``: nothing lost, the empty packs carry no loss) or cuts
its last packs down to the smallest (``remainder="drop"``: the cut packs and
their sequences are reported). Numpy only.

- `split_files`: the files host ``w`` of ``W`` reads (``files[w::W]``).
- `agreed_packs`: the count every host emits, from every host's count.
- `fit_to_count`: one host's assignment padded or cut to that count.

Example (3 hosts of 5, 2 and 4 real packs, 2 packs per step on each host):

>>> agreed_packs([5, 2, 4], multiple=2, remainder="pad")
6
>>> agreed_packs([5, 2, 4], multiple=2, remainder="drop")
2
>>> split_files(["a", "b", "c", "d", "e"], num_hosts=2, host=1)
['b', 'd']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["split_files", "agreed_packs", "fit_to_count", "check_counts", "FAILED"]

# The count a host contributes when packing its share failed: every host then
# raises instead of waiting for the failed one.
FAILED = -1


def split_files(files: Sequence[str], *, num_hosts: int, host: int) -> list[str]:
    """Host ``host``'s files: ``files[host::num_hosts]`` (the order given).

    Every file goes to exactly one host, and the hosts' file counts differ by
    at most one (their example counts may differ more: the hosts agree on the
    pack count afterwards). Fewer files than hosts is an error: a host without
    a file would pack nothing.
    """
    files = list(files)
    if len(files) < num_hosts:
        raise TfpackError(
            f"`files` must hold at least one file per host ({num_hosts} hosts), so that "
            f"each host reads only its own files. Received: {len(files)} files")
    if len(set(files)) != len(files):
        duplicate = next(f for f in files if files.count(f) > 1)
        raise TfpackError(f"`files` must not repeat a file. Received: {duplicate!r} twice")
    return files[host::num_hosts]


def check_counts(counts, num_hosts: int) -> list[int]:
    """Every host's count from what ``all_gather`` returned.

    ``all_gather`` may return one count a host or one a replica (``R``
    replicas a host, host-major: hosts ``[0] * R + [1] * R + ...``); a
    failed host's `FAILED` makes every host raise.

    >>> check_counts([4, 4, 1, 1], 2)
    [4, 1]
    """
    try:
        array = np.asarray(counts, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        array = np.zeros([0])
    if not array.size or not np.isfinite(array).all() or (array != np.round(array)).any():
        raise TfpackError("`all_gather` must return a list of finite integer counts. "
                          f"Received: {counts!r}")
    counts = [int(c) for c in array]
    if len(counts) % num_hosts:
        raise TfpackError(
            f"`all_gather` must return one count per host ({num_hosts} hosts) or per "
            f"replica. Received: {counts}")
    failed = sorted({i * num_hosts // len(counts) for i, c in enumerate(counts) if c == FAILED})
    if failed:
        raise TfpackError(
            f"Every host must pack its share; host(s) {failed} failed (see their error). "
            f"Received: pack counts {counts}")
    rows = np.asarray(counts).reshape(num_hosts, -1)
    if (rows < 0).any() or (rows != rows[:, :1]).any():
        raise TfpackError("`all_gather` must return counts >= 0, the same for every "
                          f"replica of a host. Received: {counts}")
    return rows[:, 0].tolist()


def agreed_packs(counts: Sequence[int], *, multiple: int, remainder: str) -> int:
    """The packs every host emits: a multiple of ``multiple``.

    ``"pad"``: the largest count rounded up; ``"drop"``: the smallest rounded
    down (possibly 0).
    """
    if remainder == "pad":
        return -(-max(counts) // multiple) * multiple
    return min(counts) // multiple * multiple


def fit_to_count(order, splits, count: int):
    """Pad with empty packs, or cut the last packs, to exactly ``count`` packs.

    Returns ``(order, splits, added_packs, dropped_packs, dropped_sequences)``.

    >>> order, splits = np.array([0, 1, 2]), np.array([0, 2, 3])
    >>> fit_to_count(order, splits, 3)[1:3]
    (array([0, 2, 3, 3]), 1)
    >>> o, s, _, dropped, sequences = fit_to_count(order, splits, 1)
    >>> o.tolist(), s.tolist(), dropped, sequences
    ([0, 1], [0, 2], 1, 1)
    """
    packs = len(splits) - 1
    if count >= packs:
        extra = count - packs
        return order, np.concatenate([splits, np.full(extra, splits[-1])]), extra, 0, 0
    kept = int(splits[count])
    return order[:kept], splits[:count + 1], 0, packs - count, len(order) - kept
