"""A plain Python reference of best fit decreasing on groups (the C kernel's spec).

The loop of `tfpack.packing.algorithms._fit_decreasing` that
`tfpack/packing/_kernels.c` replaced (its module notes describe the buckets
and the zone), kept to compare against: the same groups, in the same order
(tests/packing/test_kernels.py), and the baseline of
benchmarks/planner_kernels.py.
"""

import bisect

import numpy as np

from tfpack.packing.algorithms import base


def best_fit_decreasing(histogram: np.ndarray, max_length: int,
                         depth_limit: int) -> base.AlgorithmResult:
    """Best fit decreasing on groups in buckets by free space; module notes."""
    groups: dict[int, list] = {}  # first pack's index -> [count, space, depth, contents]
    # Groups that can take more, by free space: -(first pack's index), ascending (so the
    # earliest opened is last), kept sorted only in the active zone (spaces >= `active`).
    buckets: dict[int, list[int]] = {}
    zone: list[int] = []  # -(space) of the zone's non-empty buckets, ascending
    active = max_length + 1  # the zone's least space
    opened = 0  # packs opened so far

    def place(key: int, count: int, space: int, depth: int, contents: tuple) -> None:
        """Record a group (in its bucket if it can take more)."""
        groups[key] = [count, space, depth, contents]
        if space > 0 and depth < depth_limit:
            bucket = buckets.get(space)
            if bucket is None:
                bucket = buckets[space] = []
            if space < active:  # sorted when the zone reaches it
                bucket.append(-key)
                return
            if not bucket:
                bisect.insort(zone, -space)
            bisect.insort(bucket, -key)

    lengths = np.flatnonzero(histogram)[::-1] + 1
    for length, left in zip(lengths.tolist(), np.asarray(histogram)[lengths - 1].tolist()):
        for space in range(active - 1, length - 1, -1):  # the zone grows down to `length`
            bucket = buckets.get(space)
            if bucket:
                bucket.sort()
                zone.append(-space)
        active = length
        while left and zone:
            space = -zone[-1]  # the tightest fit, and in it the earliest opened
            bucket = buckets[space]
            key = -bucket.pop()
            if not bucket:
                zone.pop()
            count, _, depth, contents = groups.pop(key)
            k = min(space // length, depth_limit - depth)
            if count * k <= left:  # every pack of the group takes k: below the zone now
                left -= count * k
                space -= k * length
                depth += k
                groups[key] = [count, space, depth, contents + (length,) * k]
                if space > 0 and depth < depth_limit:  # `place`, inlined: space < active
                    bucket = buckets.get(space)
                    if bucket is None:
                        buckets[space] = [-key]
                    else:
                        bucket.append(-key)
                continue
            packs, rest = divmod(left, k)  # split: full / partial / untouched
            pieces = [(packs, k), (int(rest > 0), rest), (count - packs - int(rest > 0), 0)]
            for number, taken in pieces:
                if number:
                    place(key, number, space - taken * length, depth + taken,
                          contents + (length,) * taken)
                    key += number
            left = 0
        if left:  # fits nowhere: new packs, each with as many copies as fit
            k = min(max_length // length, depth_limit)
            packs, rest = divmod(left, k)
            for number, taken in ((packs, k), (int(rest > 0), rest)):
                if number:
                    place(opened, number, max_length - taken * length, taken, (length,) * taken)
                    opened += number
    order = sorted(groups)
    return base.AlgorithmResult([groups[key][3] for key in order],
                                np.array([groups[key][0] for key in order], dtype=np.int64))
