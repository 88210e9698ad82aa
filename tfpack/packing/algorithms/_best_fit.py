"""Best fit decreasing on a histogram, with count splitting, into open packs.

Used by the `optimal` planner twice: on the whole histogram for a first plan
(its packs seed column generation and bound the answer from above), and on
the few sequences that rounding the LP solution down leaves without a slot,
which go into the free space of the rounded packs first::

    fill({500: 2, 12: 3}, packs={(300,): 1}, max_length=512, max_sequences_per_pack=2)
    -> {(300, 12): 1, (500, 12): 2}

Sequences are taken longest first; each group of identical sequences goes to
the open packs with the least free space that still fits them (and room for
one more sequence), splitting a group of identical packs when fewer sequences
than packs remain. Sequences that fit nowhere open new packs, filled with as
many copies as fit, as per-sequence best fit would.
"""

from __future__ import annotations

import bisect
from collections import defaultdict


def fill(counts: dict[int, int], packs: dict[tuple[int, ...], int], max_length: int,
         max_sequences_per_pack: int | None) -> dict[tuple[int, ...], int]:
    """Place ``counts[length]`` sequences of each length into ``packs`` (and new ones).

    Args:
        counts: sequences to place, by length.
        packs: open packs (lengths, longest first) -> how many; not modified.
        max_length: tokens per pack.
        max_sequences_per_pack: sequences per pack, or ``None`` for no limit.

    Returns:
        All packs (the given ones, extended, and new ones) -> how many.
    """
    depth = max_length if max_sequences_per_pack is None else max_sequences_per_pack
    packs = dict(packs)
    by_space: dict[int, dict[tuple[int, ...], None]] = defaultdict(dict)
    spaces: list[int] = []  # sorted spaces that have at least one open pack

    def add(pack: tuple[int, ...], number: int) -> None:
        packs[pack] = packs.get(pack, 0) + number
        space = max_length - sum(pack)
        if len(pack) < depth and space > 0:
            if not by_space[space]:
                bisect.insort(spaces, space)
            by_space[space][pack] = None

    def take(pack: tuple[int, ...], number: int) -> None:
        packs[pack] -= number
        if packs[pack] == 0:
            del packs[pack]
            space = max_length - sum(pack)
            bucket = by_space.get(space)
            if bucket is not None and pack in bucket:
                del bucket[pack]
                if not bucket:
                    spaces.pop(bisect.bisect_left(spaces, space))

    for pack, number in list(packs.items()):
        del packs[pack]
        add(pack, number)
    for length in sorted(counts, reverse=True):
        left = int(counts[length])
        while left > 0:
            at = bisect.bisect_left(spaces, length)
            if at == len(spaces):
                per_pack = min(depth, max_length // length)
                full, rest = divmod(left, per_pack)
                if full:
                    add((length,) * per_pack, full)
                if rest:
                    add((length,) * rest, 1)
                break
            pack = next(iter(by_space[spaces[at]]))
            moved = min(left, packs[pack])
            take(pack, moved)
            add(tuple(sorted(pack + (length,), reverse=True)), moved)
            left -= moved
    return packs
