"""First fit of pairs into packs with two limits, on groups of packs with the same room.

Cells (an input length, a target length, how many pairs) arrive in a given
order; each pair goes into the first open pack where it fits (input room,
target room and a free place), else a new pack. Pairs of one cell are
identical, so a pack takes as many as fit at once, and packs with the same
room form one group: a cell costs one vectorized scan of the groups, not one
per pair. A group that takes only some of a cell splits; its parts go to the
end of the order (so this is first fit on groups, which equals first fit per
pair until a group splits). Groups that no later cell fits leave the scan, and
a cell is tried in the first 4,096 open groups only (`_SCAN`; new ones join
the scan until the next pruning), so a cell costs O(4,096), not O(packs).

`first_fit` also fills packs that exist already (`Groups.of_packs`): the
repair step of the ``optimal`` planner places its leftovers there first.

>>> import numpy as np
>>> packs = first_fit(np.array([5, 3]), np.array([2, 4]), np.array([2, 2]), (8, 8, None))
>>> packs.pack.tolist(), packs.a.tolist(), packs.b.tolist()
([0, 1, 0, 1], [5, 5, 3, 3], [2, 2, 4, 4])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.packing.pairs._packs import cells, counts_of

_PRUNE_EVERY = 32  # cells between two removals of closed groups from the scan
# Open groups a cell is tried in, first ones first: a scan costs O(groups) per cell, and
# 20,000 cells x 100,000 groups took 10-40 s; the first 4,096 are where first fit looks first.
_SCAN = 4096


@dataclasses.dataclass
class Placed:
    """Pairs and their packs: ``pack[r]`` holds the pair ``(a[r], b[r])``; ``packs`` ids in all."""

    pack: np.ndarray
    a: np.ndarray
    b: np.ndarray
    packs: int


class Groups:
    """Packs grouped by equal room: input, target, places (growing arrays)."""

    def __init__(self, limits, rooms=None, members=None):
        self.limits = limits
        e, d, k = rooms if rooms is not None else (np.zeros(0, np.int64),) * 3
        self.size = len(e)
        capacity = max(64, 2 * self.size)
        self.room = np.zeros((3, capacity), dtype=np.int64)
        self.room[:, :self.size] = (e, d, k)
        self.members: list[np.ndarray] = list(members or [])
        self.count = np.zeros(capacity, dtype=np.int64)  # packs in each group
        self.count[:self.size] = [m.size for m in self.members]
        self.packs = int(sum(m.size for m in self.members))
        self.placed: list[tuple[np.ndarray, int, int, int]] = []  # (pack ids, a, b, copies)

    @classmethod
    def of_packs(cls, limits, pack: np.ndarray, a: np.ndarray, b: np.ndarray, packs: int) -> "Groups":
        """Groups of the packs ``0..packs-1`` holding the pairs given (some may be empty)."""
        max_input, max_target, depth = limits
        room = np.stack([max_input - np.bincount(pack, a, packs).astype(np.int64),
                         max_target - np.bincount(pack, b, packs).astype(np.int64),
                         depth - np.bincount(pack, minlength=packs)])
        # One integer key a room (rooms are within the limits): `np.unique(room, axis=1)` sorts
        # rows as records, 0.8 s on 2.6e5 packs; on keys 0.03 s, the same groups in the same order.
        span = (max_target + 1) * (depth + 1)
        distinct, inverse = np.unique(room[0] * span + room[1] * (depth + 1) + room[2], return_inverse=True)
        inverse = inverse.reshape(-1)
        keys = np.stack([distinct // span, distinct % span // (depth + 1), distinct % (depth + 1)])
        order = np.argsort(inverse, kind="stable")
        splits = np.cumsum(np.bincount(inverse, minlength=distinct.size))[:-1]
        members = np.split(order, splits)
        groups = cls(limits, tuple(keys), members)
        groups.packs = packs
        return groups

    def add(self, room, members: np.ndarray) -> int:
        if self.size == self.room.shape[1]:
            self.room = np.concatenate([self.room, np.zeros_like(self.room)], axis=1)
            self.count = np.concatenate([self.count, np.zeros_like(self.count)])
        self.room[:, self.size] = room
        self.count[self.size] = members.size
        self.members.append(members)
        self.size += 1
        return self.size - 1

    def put(self, group: int, a: int, b: int, copies: int) -> None:
        """``copies`` pairs ``(a, b)`` into every pack of ``group``."""
        self.room[:, group] -= (copies * a, copies * b, copies)
        self.placed.append((self.members[group], a, b, copies))

    def split(self, group: int, a: int, b: int, copies: int, pairs: int) -> None:
        """``pairs`` pairs into the first packs of ``group``, ``copies`` a pack at most."""
        members, room = self.members[group], self.room[:, group].copy()
        full, rest = divmod(pairs, copies)
        self.members[group] = members[:full]
        self.count[group] = full
        self.put(group, a, b, copies)
        if rest:
            self.put(self.add(room, members[full:full + 1]), a, b, rest)
        if full + (rest > 0) < members.size:
            self.add(room, members[full + (rest > 0):])

    def open(self, a: int, b: int, pairs: int) -> None:
        """New packs for ``pairs`` pairs ``(a, b)``, as many a pack as fit."""
        max_input, max_target, depth = self.limits
        copies = min(max_input // a, max_target // b, depth)
        number = -(-pairs // copies)
        ids = np.arange(self.packs, self.packs + number)
        self.packs += number
        self.split(self.add((max_input, max_target, depth), ids), a, b, copies, pairs)

    def result(self) -> Placed:
        if not self.placed:
            empty = np.zeros(0, np.int64)
            return Placed(empty, empty, empty, self.packs)
        sizes = [ids.size * copies for ids, _, _, copies in self.placed]
        pack = np.concatenate([np.repeat(ids, copies) for ids, _, _, copies in self.placed])
        a = np.repeat([x for _, x, _, _ in self.placed], sizes)
        b = np.repeat([y for _, _, y, _ in self.placed], sizes)
        return Placed(pack.astype(np.int64), a.astype(np.int64), b.astype(np.int64), self.packs)


def first_fit(a: np.ndarray, b: np.ndarray, n: np.ndarray, limits, groups: Groups | None = None) -> Placed:
    """Cells in the given order, first fit into ``groups`` (or new packs); ``limits``: (Le, Ld, K or None)."""
    max_input, max_target, depth = limits
    limits = (max_input, max_target, depth if depth is not None else max_input)  # a pair holds a token
    groups = groups if groups is not None else Groups(limits)
    groups.limits = limits
    active = np.arange(groups.size)
    for step, (x, y, pairs) in enumerate(zip(a.tolist(), b.tolist(), n.tolist())):
        if step % _PRUNE_EVERY == 0:
            active = _open(groups, a[step:], b[step:], max_input)[:_SCAN]
        before = groups.size
        room = groups.room[:, active]
        fits = active[(room[0] >= x) & (room[1] >= y) & (room[2] > 0)]
        if fits.size:
            room = groups.room[:, fits]
            copies = np.minimum(np.minimum(room[0] // x, room[1] // y), room[2])
            sizes = groups.count[fits]
            total = np.cumsum(copies * sizes)
            whole = int(np.searchsorted(total, pairs))  # groups before it take all they can
            for g, c in zip(fits[:whole].tolist(), copies[:whole].tolist()):
                groups.put(g, x, y, c)
            pairs -= int(total[whole - 1]) if whole else 0
            if whole < fits.size and pairs:
                groups.split(int(fits[whole]), x, y, int(copies[whole]), pairs)
                pairs = 0
        if pairs:
            groups.open(x, y, pairs)
        if groups.size > before:  # the parts of split groups and new packs join the scan
            active = np.concatenate([active, np.arange(before, groups.size)])
    return groups.result()


def _open(groups: Groups, a: np.ndarray, b: np.ndarray, max_input: int) -> np.ndarray:
    """Groups some cell still to come fits: room for its input, its target and a place."""
    # fewest[r]: the shortest target among cells to come with an input of at most r tokens.
    fewest = np.full(max_input + 1, np.iinfo(np.int64).max)
    np.minimum.at(fewest, a, b)
    fewest = np.minimum.accumulate(fewest)
    room = groups.room[:, :groups.size]
    return np.flatnonzero((room[2] > 0) & (groups.count[:groups.size] > 0)
                          & (fewest[np.minimum(room[0], max_input)] <= room[1]))


def refit(placed: Placed, keep: np.ndarray, limits, shape, beat: int | None = None) -> Placed | None:
    """The pairs not kept, first fit decreasing into the room the kept ones leave, then new packs.

    Pack ids are renumbered ``0..P-1`` over the packs that hold a pair. None,
    without the first fit, where it would give ``beat`` packs or more for
    sure (`floor`: a candidate that cannot win spares its first fit, 0.4-1.1 s
    on 1e6 pairs).
    """
    if beat is not None and floor(placed, keep, limits) >= beat:
        return None
    left = counts_of(placed.a[~keep], placed.b[~keep], shape)
    pack, a, b = placed.pack[keep], placed.a[keep], placed.b[keep]
    groups = Groups.of_packs((limits[0], limits[1], limits[2] or limits[0]), pack, a, b, placed.packs)
    la, lb, ln = cells(left)
    order = decreasing(la, lb, limits)
    extra = first_fit(la[order], lb[order], ln[order], limits, groups)
    pack = np.concatenate([pack, extra.pack])
    used = np.bincount(pack, minlength=extra.packs) > 0  # ids in order, as `np.unique` numbers them
    number = np.cumsum(used) - 1
    return Placed(number[pack].astype(np.int64), np.concatenate([a, extra.a]),
                  np.concatenate([b, extra.b]), int(used.sum()))


def floor(placed: Placed, keep: np.ndarray, limits) -> int:
    """Packs `refit` gives at least: those holding a kept pair, and those the pairs not kept need beyond.

    A pair not kept that fits no such pack's room (input, target and a
    place) goes to another pack, whose room is a whole pack: those pairs'
    tokens and count, each over its limit, are packs they need; so are all
    the pairs not kept beyond the room of the packs with a place (rooms only
    shrink as pairs arrive).

    >>> placed = Placed(np.array([0, 0, 1]), np.array([5, 2, 6]), np.array([1, 1, 3]), 2)
    >>> floor(placed, np.array([True, False, True]), (8, 4, 2))  # (2, 1) fits pack 0 again
    2
    >>> floor(placed, np.array([True, False, False]), (8, 4, 2))  # (6, 3) fits no pack's room
    2
    >>> floor(placed, np.array([True, False, False]), (8, 4, 1))  # no places left: both in new packs
    3
    """
    max_input, max_target, depth = limits
    depth = depth or max_input
    pack, out_a, out_b = placed.pack[keep], placed.a[~keep], placed.b[~keep]
    places = depth - np.bincount(pack, minlength=placed.packs)
    held = places < depth
    open_ = held & (places > 0)
    room_a = max_input - np.bincount(pack, placed.a[keep], placed.packs).astype(np.int64)[open_]
    room_b = max_target - np.bincount(pack, placed.b[keep], placed.packs).astype(np.int64)[open_]
    need = [out_a.size - int(places[open_].sum()), int(out_a.sum() - room_a.sum()), int(out_b.sum() - room_b.sum())]
    # Pairs that fit no room: the largest target room among rooms of at least their input.
    order = np.argsort(room_a, kind="stable")
    widest = np.maximum.accumulate(room_b[order][::-1])[::-1]
    at = np.searchsorted(room_a[order], out_a)
    nowhere = at >= order.size
    nowhere[~nowhere] = widest[at[~nowhere]] < out_b[~nowhere]
    need = [need, [int(nowhere.sum()), int(out_a[nowhere].sum()), int(out_b[nowhere].sum())]]
    limit = np.array([depth, max_input, max_target])
    return int(held.sum()) + max(0, int((-(-np.array(need) // limit)).max()))


def decreasing(a: np.ndarray, b: np.ndarray, limits) -> np.ndarray:
    """Order of cells for first fit decreasing: larger share of a limit first, then larger sum."""
    share_a, share_b = a / limits[0], b / limits[1]
    return np.lexsort((-(share_a + share_b), -np.maximum(share_a, share_b)))
