"""Map concrete examples to the packs of a plan.

A plan says how many packs hold which lengths; an `Assignment` says which
examples go into each pack. For lengths ``[8, 3, 5, 3, 5]`` and the plan
``2 x (5, 3) + 1 x (8,)`` (max length 8) one assignment is::

    order  = [2, 3, 0, 4, 1]   # examples, pack by pack, longest first
    splits = [0, 2, 3, 5]      # pack p holds order[splits[p]:splits[p + 1]]
    # packs: [2, 3] (lengths 5, 3), [0] (8), [4, 1] (5, 3)

`assign` runs in O(n) vectorized numpy and is deterministic per seed. Each
example's pack is a pure function of its length, its rank among examples of
that length, the plan and the seed (`tfpack.packing.placement`), so workers
that see parts of the data place them exactly as `assign` does. Examples of
one length are spread at random over the slots of that length, and packs are
shuffled, so the packs of one strategy are not adjacent. An example whose
length has no slot left (the lengths differ from the plan's histogram) still
gets a pack: an unused slot of at least its length when one is free, else a
new pack (first fit decreasing among such examples).

Example:

>>> import numpy as np
>>> from tfpack.packing import plan
>>> lengths = np.array([8, 3, 5, 3, 5])
>>> p = plan(np.bincount(lengths, minlength=9)[1:], 8, 2, algorithm="spfhp")
>>> a = p.assign(lengths, seed=0)
>>> a.num_packs, sorted(int(lengths[a.pack(p)].sum()) for p in range(a.num_packs))
(3, [8, 8, 8])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing.histograms import validate_lengths
from tfpack.packing.placement import PLACEMENT_PARAMETERS, length_ranks, placement
from tfpack.params import Anything, declare_fields, validate_params

__all__ = ["Assignment", "assign", "layout"]

_CHUNK = 1 << 20


@declare_fields({"order": Anything("int64 [n] example indices, pack by pack"),
                 "splits": Anything("int64 [num_packs + 1] offsets into `order`"),
                 "balance": [None, Anything("the `BatchBalance` of `assign(balance=)`")]})
@dataclasses.dataclass(frozen=True, eq=False)
class Assignment:
    """Which examples share each pack.

    Attributes:
        order: int64 ``[n]``, every example index exactly once, grouped pack
            by pack, longest example first within a pack.
        splits: int64 ``[num_packs + 1]``; pack ``p`` holds
            ``order[splits[p]:splits[p + 1]]``.
        balance: with ``assign(..., balance=)``, the
            `tfpack.packing.balance.BatchBalance` of the pack order, else ``None``.

    Example:

    >>> import numpy as np
    >>> a = Assignment(order=np.array([2, 0, 1]), splits=np.array([0, 1, 3]))
    >>> a.num_packs, a.pack(1).tolist(), a.pack_of().tolist()
    (2, [0, 1], [1, 1, 0])
    """

    order: np.ndarray
    splits: np.ndarray
    balance: object = None

    @property
    def num_packs(self) -> int:
        """Number of packs."""
        return len(self.splits) - 1

    def pack(self, p: int) -> np.ndarray:
        """int64 indices of the examples in pack ``p``, longest first."""
        return self.order[self.splits[p] : self.splits[p + 1]]

    def pack_of(self) -> np.ndarray:
        """int64 ``[n]``: the pack of each example."""
        packs = np.empty(len(self.order), dtype=np.int64)
        packs[self.order] = np.repeat(np.arange(self.num_packs, dtype=np.int64), np.diff(self.splits))
        return packs


@validate_params({**PLACEMENT_PARAMETERS,
                  "lengths": Anything("int [n] lengths in 1..plan.max_length, checked here")})
def assign(plan, lengths, seed: int = 0, *, shuffle: bool = True,
           balance=None, batch_size: int | None = None, replicas: int | None = None,
           token_weight: int = 0) -> Assignment:
    """Assign examples to the packs of ``plan``.

    Each example's pack and slot come from `tfpack.packing.placement`: a pure
    function of its length, its rank among the examples of that length, the
    plan, the histogram and the seed, so that workers placing parts of the
    data agree with this function exactly.

    Args:
        plan: a `PackingPlan`.
        lengths: int ``[n]`` length of each example, each in ``1..plan.max_length``.
        seed: seeds the spreading of examples over slots and the pack order.
        shuffle: shuffle the packs (``False``: plan order).
        balance, batch_size: order the packs so that every ``batch_size``
            consecutive packs hold the same number of sequences
            (``balance=True`` or ``"sequences"``) or tokens (``"tokens"``),
            all but the last partial batch; see `tfpack.packing.balance`.
        replicas, token_weight: with ``balance``, split each batch among
            ``replicas`` by attention cost (``sum(l^2) + token_weight *
            tokens`` a pack); see `tfpack.packing.replicas`.

    Returns:
        An `Assignment`; packs left empty (fewer examples than slots) are dropped.
    """
    max_length = plan.max_length
    lengths = validate_lengths(lengths, max_length)
    if lengths.size == 0:
        raise TfpackError("`lengths` must hold at least one example (the dataset is empty). Received: lengths=[]")
    counts = np.bincount(lengths, minlength=max_length + 1)
    rule = placement(plan, counts[1:], seed=seed, shuffle=shuffle, balance=balance,
                     batch_size=batch_size, replicas=replicas, token_weight=token_weight)
    # Chunk by chunk, as workers that each see a part do: ranks continue from
    # the examples of each length before the chunk. Bounds the temporaries.
    pack = np.empty(lengths.size, dtype=np.int64)
    position = np.empty(lengths.size, dtype=np.int32)
    before = np.zeros(max_length + 1, dtype=np.int64)
    for start in range(0, lengths.size, _CHUNK):
        part = lengths[start:start + _CHUNK]
        ranks = length_ranks(part, max_length, start=before)
        before += np.bincount(part, minlength=max_length + 1)
        pack[start:start + _CHUNK], position[start:start + _CHUNK] = rule.place(part, ranks)
    assignment = layout(pack, position, lengths, rule.pack_depths())
    if rule.balance is None:
        return assignment
    return dataclasses.replace(assignment, balance=rule.balance)


def layout(pack: np.ndarray, position: np.ndarray, lengths: np.ndarray, depths: np.ndarray) -> Assignment:
    """The `Assignment` of examples placed at ``(pack, position)``, in O(n).

    Within a pack, examples come longest first, then by slot position.

    Args:
        pack, position: int ``[n]``, from `Placement.place`.
        lengths: int ``[n]``.
        depths: int ``[packs]``, slots of each pack (`Placement.pack_depths`).
    """
    n = pack.size
    first_slot = np.cumsum(depths) - depths
    slots = np.full(int(depths.sum()), -1, dtype=np.int32 if n < 2**31 else np.int64)
    slots[first_slot[pack] + position] = np.arange(n, dtype=slots.dtype)
    order = slots[slots >= 0].astype(np.int64)
    del slots
    splits = np.zeros(depths.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(pack, minlength=depths.size), out=splits[1:])
    in_order = lengths[order]
    same_pack = np.ones(n, dtype=bool)
    same_pack[splits[1:-1]] = False  # first example of each pack but the first
    rising = np.flatnonzero((np.diff(in_order) > 0) & same_pack[1:])
    if rising.size:
        # A surplus example in a longer unused slot: re-sort its pack longest first.
        owner = np.searchsorted(splits, rising, side="right") - 1
        messy = np.unique(owner)
        where = _ranges(splits[messy], splits[messy + 1] - splits[messy])
        inside = order[where]
        order[where] = inside[np.lexsort((position[inside], -lengths[inside], pack[inside]))]
    return Assignment(order=order, splits=splits)


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, a + k) for a, k in zip(starts, sizes)])``, vectorized."""
    sizes = np.asarray(sizes, dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes
    return np.repeat(np.asarray(starts, dtype=np.int64) - offsets, sizes) + np.arange(
        int(sizes.sum()), dtype=np.int64
    )
