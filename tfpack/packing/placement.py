"""`Placement`: the pack and slot of one example, from its length and rank alone.

An example's place is a pure function of its length, its *rank* (how many
examples of that length come before it in input order), the plan, the
histogram of the examples and the seed; no array over all examples is
needed. That lets workers that each see a part of the data (Beam workers, one
input file each) place their examples exactly as one process placing all of
them would, given only the histogram and their files' rank offsets (see
`length_ranks`).

How an example of length ``l`` and rank ``r`` is placed:

1. ``q = perm_l(r)``: a seeded pseudo-random permutation of the ranks of
   length ``l`` (`tfpack.packing.permutation`), so that examples of one
   length are spread at random over the slots of that length.
2. The slots of length ``l`` are listed strategy by strategy (plan order) and
   pack by pack; ``q < min(examples, slots)`` takes slot ``q``. Surplus
   examples (lengths the plan has no slot left for) take an unused longer
   slot (longest surplus first) or a slot of a new pack planned by first fit
   decreasing.
3. The pack's ordinal among the packs that get examples, strategy by
   strategy, is mapped through a seeded permutation of the packs
   (``shuffle=True``) to its pack id; or, with ``balance=`` and
   ``batch_size=``, through the arrangement of `tfpack.packing.balance`, so
   that every ``batch_size`` consecutive pack ids hold the same number of
   sequences (or tokens). The sequences and tokens of every pack follow from
   the tables below, so the arrangement too is a pure function of the plan,
   the histogram and the seed; it is the one table of the size of the packs.

Example:

>>> import numpy as np
>>> from tfpack.packing import plan
>>> lengths = np.array([8, 3, 5, 3, 5])
>>> p = plan(np.bincount(lengths, minlength=9)[1:], 8, 2, algorithm="spfhp")
>>> rule = placement(p, np.bincount(lengths, minlength=9)[1:], seed=0)
>>> pack, position = rule.place(lengths, length_ranks(lengths, 8))
>>> rule.num_packs, sorted(np.bincount(pack, weights=lengths).tolist())
(3, [8.0, 8.0, 8.0])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError
from tfpack.packing import algorithms
from tfpack.packing.checks import flatten, slot_counts
from tfpack.packing.histograms import validate_histogram, validate_seed
from tfpack.packing.balance import BatchBalance, arrange, check_balance
from tfpack.packing.replicas import split_replicas
from tfpack.packing.permutation import Permutations
from tfpack.params import Anything, Boolean, Integer, Options, declare_fields, validate_params

__all__ = ["Placement", "placement", "length_ranks"]


PLACEMENT_PARAMETERS = {
    "plan": Anything("a `PackingPlan` (its lengths and slots are read)"),
    "seed": Integer(0), "shuffle": Boolean(),
    "balance": [None, Boolean(), Options("sequences", "tokens")],
    "batch_size": [None, Integer(1)], "replicas": [None, Integer(1)],
    "token_weight": Integer(0),
}


@validate_params({"lengths": Anything("integer lengths in 1..max_length, the caller's (a hot path)"),
                  "max_length": Integer(1),
                  "start": [None, Anything("int [max_length + 1] offsets per length")]})
def length_ranks(lengths: np.ndarray, max_length: int, start=None) -> np.ndarray:
    """int64 ``[n]``: how many examples of the same length precede each one.

    ``start`` (int ``[max_length + 1]``, indexed by length) adds an offset per
    length: the examples of that length in earlier files.

    >>> length_ranks(np.array([3, 1, 3, 3]), 4).tolist()
    [0, 0, 1, 2]
    >>> length_ranks(np.array([3, 1]), 4, start=np.array([0, 5, 0, 7, 0])).tolist()
    [7, 5]
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    small = lengths.astype(np.uint16) if max_length < 2**16 else lengths
    by_length = np.argsort(small, kind="stable")  # radix sort for uint16
    counts = np.bincount(lengths, minlength=max_length + 1)
    first = np.cumsum(counts) - counts
    ranks = np.empty(lengths.size, dtype=np.int64)
    ranks[by_length] = np.arange(lengths.size, dtype=np.int64) - np.repeat(first, counts)
    if start is not None:
        ranks += np.asarray(start, dtype=np.int64)[lengths]
    return ranks


@declare_fields({"max_length": Integer(1), "num_packs": Integer(0),
                 **{name: Anything("a table `placement` computes") for name in (
                     "histogram", "kept", "moved", "slot_start", "loose_base", "loose_cum",
                     "loose_slot", "run_start", "run_owner", "run_position", "run_size",
                     "first_pack", "used", "depth", "permutations")},
                 "shuffle": Boolean(),
                 "arrangement": [None, Anything("int [num_packs] pack id of each ordinal")],
                 "balance": [None, Anything("the `BatchBalance` of the order")]})
@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """Where examples go; make one with `placement`. Small: O(strategies + L).

    Tables are indexed by length ``l - 1`` (``[L]``), by *run* (a maximal run
    of one length inside one strategy, in length order) or by strategy.

    Attributes:
        max_length: ``L``.
        num_packs: packs that get at least one example (pack ids ``0..num_packs-1``).
        histogram: int64 ``[L]``, examples of each length.
    """

    max_length: int
    num_packs: int
    histogram: np.ndarray
    kept: np.ndarray          # [L] examples placed in planned slots of their own length
    moved: np.ndarray         # [L] surplus examples placed in unused longer slots
    slot_start: np.ndarray    # [L + 1] first slot of each length
    loose_base: np.ndarray    # [L] first surplus-pair entry of each example length
    loose_cum: np.ndarray     # [pairs + 1] cumulative examples of each surplus pair
    loose_slot: np.ndarray    # [pairs] first slot taken by each surplus pair
    run_start: np.ndarray     # [runs] first slot of each run
    run_owner: np.ndarray     # [runs] strategy of each run
    run_position: np.ndarray  # [runs] place of the run's first slot in its strategy
    run_size: np.ndarray      # [runs] slots of the run in one pack
    first_pack: np.ndarray    # [strategies] first pack ordinal of each strategy
    used: np.ndarray          # [strategies] packs of each strategy that get examples
    depth: np.ndarray         # [strategies] slots per pack
    permutations: Permutations  # stream 0: packs; stream l: ranks of length l
    shuffle: bool
    arrangement: np.ndarray | None = None  # [num_packs] pack id of each ordinal (balance)
    balance: BatchBalance | None = None      # how even the batches came out

    def place(self, lengths, ranks) -> tuple[np.ndarray, np.ndarray]:
        """Pack id and slot position (0 = longest) of each example.

        Args:
            lengths: int ``[n]`` in ``1..max_length``.
            ranks: int ``[n]``, see `length_ranks`; each ``(length, rank)``
                at most once and below ``histogram[length - 1]``.

        Returns:
            int64 ``(pack, position)``, each ``[n]``.
        """
        lengths = np.asarray(lengths, dtype=np.int64)
        ranks = np.asarray(ranks, dtype=np.int64)
        index = lengths - 1
        bad = np.flatnonzero(ranks >= self.histogram[index])
        if bad.size:
            i = int(bad[0])
            raise TfpackError(
                "Every example must be counted in the histogram the placement was made "
                "for (did the input change?). Received: an example of length "
                f"{int(lengths[i])} with rank {int(ranks[i])} of "
                f"{int(self.histogram[index[i]])}")
        q = self.permutations(ranks, lengths)
        kept, moved = self.kept[index], self.moved[index]
        slot = self.slot_start[index] + q - np.where(q >= kept + moved, moved, 0)
        loose = np.flatnonzero((q >= kept) & (q < kept + moved))
        if loose.size:
            entry = self.loose_base[index[loose]] + q[loose] - kept[loose]
            pair = np.searchsorted(self.loose_cum, entry, side="right") - 1
            slot[loose] = self.loose_slot[pair] + entry - self.loose_cum[pair]
        run = np.searchsorted(self.run_start, slot, side="right") - 1
        within = slot - self.run_start[run]
        size = self.run_size[run]
        owner = self.run_owner[run]
        ordinal = self.first_pack[owner] + within // size
        position = self.run_position[run] + within % size
        return self.pack_ids(ordinal), position

    def pack_ids(self, ordinal) -> np.ndarray:
        """Pack id of each pack ordinal (plan order, strategy by strategy)."""
        ordinal = np.asarray(ordinal, dtype=np.int64)
        if self.arrangement is not None:
            return self.arrangement[ordinal]
        if not self.shuffle:
            return ordinal
        return self.permutations(ordinal, np.zeros(1, np.int64))

    def pack_depths(self) -> np.ndarray:
        """int64 ``[num_packs]``: slots in each pack id (its strategy's depth)."""
        depths = np.empty(self.num_packs, dtype=np.int64)
        depths[self.pack_ids(np.arange(self.num_packs))] = np.repeat(self.depth, self.used)
        return depths


@validate_params({**PLACEMENT_PARAMETERS,
                  "histogram": Anything("int [plan.max_length] counts, checked with the plan")})
def placement(plan, histogram, *, seed: int = 0, shuffle: bool = True,
              balance=None, batch_size: int | None = None, replicas: int | None = None,
              token_weight: int = 0) -> Placement:
    """The `Placement` of examples with length ``histogram`` in the packs of ``plan``.

    Args:
        plan: a `PackingPlan`.
        histogram: int ``[plan.max_length]``, the examples of each length
            (may differ from ``plan.histogram``: surplus examples get unused
            slots or new packs; packs left empty are dropped).
        seed: non-negative; seeds the spread over slots and the pack order.
        shuffle: ``False`` keeps packs in plan order.
        balance: ``True`` / ``"sequences"`` or ``"tokens"``: order the packs
            so that every ``batch_size`` consecutive ones hold the same total
            (`tfpack.packing.balance`); ``Placement.balance`` reports how even.
        batch_size: packs per batch, with ``balance``.
        replicas: with ``balance``, also split each batch among this many
            replicas by attention cost, ``sum(l^2) + token_weight * tokens``
            a pack (`tfpack.packing.replicas`); ``Placement.balance.replicas``
            reports the spread against its bound.
        token_weight: the per-token cost in score-pairs (``~6 * hidden``).
    """
    balance = check_balance(balance, batch_size)
    if replicas is not None and balance is None:
        raise TfpackError("`replicas` splits the batches of `balance` and needs it. "
                          f"Received: replicas={replicas!r}, balance=None")
    seed = validate_seed(seed)
    L = plan.max_length
    examples = validate_histogram(histogram, L)
    planned = slot_counts(plan.strategies, plan.counts, L)
    pairs, extra = _overflow(examples, planned, L, plan.max_sequences_per_pack)
    strategies, counts = list(plan.strategies), np.asarray(plan.counts, dtype=np.int64)
    if extra is not None:
        strategies += list(extra.strategies)
        counts = np.concatenate([counts, np.asarray(extra.counts, dtype=np.int64)])
    kept = np.minimum(examples, planned)
    moved = np.zeros(L, dtype=np.int64)
    needed = kept.copy()
    for item, slot_length, count in pairs:
        moved[item - 1] += count
        needed[slot_length - 1] += count
    runs = _runs(strategies, counts, L, needed, first_new=len(plan.strategies))
    run_length, run_owner, run_position, run_size, taken = runs
    per_length = np.bincount(run_length - 1, weights=taken, minlength=L).round().astype(np.int64)
    slot_start = np.concatenate([[0], np.cumsum(per_length)])
    run_start = np.cumsum(taken) - taken
    used = np.zeros(len(strategies), dtype=np.int64)
    np.maximum.at(used, run_owner, -(-taken // run_size))
    # Surplus pairs take the unused slots of their slot length, after the kept ones.
    next_unused = (slot_start[:-1] + kept).tolist()
    loose_slot = []
    for _, slot_length, count in pairs:
        loose_slot.append(next_unused[slot_length - 1])
        next_unused[slot_length - 1] += count
    loose_cum = np.concatenate([[0], np.cumsum([count for _, _, count in pairs], dtype=np.int64)])
    depth = np.diff(flatten(strategies)[1])
    rule = Placement(
        max_length=L, num_packs=int(used.sum()), histogram=examples, kept=kept, moved=moved,
        slot_start=slot_start, loose_base=np.cumsum(moved) - moved,
        loose_cum=loose_cum, loose_slot=np.array(loose_slot, dtype=np.int64),
        run_start=run_start, run_owner=run_owner, run_position=run_position, run_size=run_size,
        first_pack=np.cumsum(used) - used, used=used, depth=depth,
        permutations=Permutations(seed, np.concatenate([[used.sum()], examples])),
        shuffle=bool(shuffle),
    )
    if balance is None:
        return rule
    values = _ordinal_sequences(rule, run_length) if balance == "sequences" else \
        _ordinal_tokens(rule, run_length, pairs)
    positions, report = arrange(values, batch_size, seed=seed, shuffle=shuffle, by=balance)
    if replicas is not None:
        # Attention cost of each pack ordinal, in the order just made; then
        # each batch's packs split among the replicas (places stay in their batch).
        costs = _ordinal_slots(rule, run_length * run_length)
        if token_weight:
            costs = costs + token_weight * _ordinal_tokens(rule, run_length, pairs)
        placed = np.empty_like(costs)
        placed[positions] = costs
        within, spread = split_replicas(placed, batch_size, replicas, seed=seed)
        positions = within[positions]
        report = dataclasses.replace(report, replicas=spread)
    return dataclasses.replace(rule, arrangement=positions, balance=report)


def _ordinal_slots(rule: Placement, weight: np.ndarray) -> np.ndarray:
    """Per pack ordinal, the sum of ``weight`` (one per run) over its taken slots.

    A run's taken slots are listed pack by pack: its first ``taken // size``
    packs get ``size`` slots each, the next one the rest.
    """
    taken = np.diff(np.append(rule.run_start, rule.slot_start[-1]))
    touched = -(-taken // rule.run_size)
    ordinal = np.repeat(rule.first_pack[rule.run_owner], touched)
    offsets = np.cumsum(touched) - touched
    ordinal += np.arange(ordinal.size) - np.repeat(offsets, touched)
    slots = np.repeat(rule.run_size, touched)
    last = offsets + touched - 1
    slots[last] = taken - (touched - 1) * rule.run_size
    return np.bincount(ordinal, weights=slots * np.repeat(weight, touched),
                       minlength=rule.num_packs).round().astype(np.int64)


def _ordinal_sequences(rule: Placement, run_length: np.ndarray) -> np.ndarray:
    """int64 ``[num_packs]``: examples in each pack ordinal (every taken slot holds one)."""
    return _ordinal_slots(rule, np.ones(run_length.size, np.int64))


def _ordinal_tokens(rule: Placement, run_length: np.ndarray, pairs) -> np.ndarray:
    """int64 ``[num_packs]``: tokens in each pack ordinal.

    Slot lengths, less what surplus examples in longer slots leave empty.
    """
    tokens = _ordinal_slots(rule, run_length)
    for (item, slot_length, count), first in zip(pairs, rule.loose_slot):
        slot = np.arange(first, first + count)
        run = np.searchsorted(rule.run_start, slot, side="right") - 1
        ordinal = rule.first_pack[rule.run_owner[run]] + (slot - rule.run_start[run]) \
            // rule.run_size[run]
        np.subtract.at(tokens, ordinal, slot_length - item)
    return tokens


def _runs(strategies, counts, max_length: int, needed: np.ndarray, first_new: int):
    """The runs of one length inside one strategy, in length order, and the
    slots each one gives: the first ``needed[l - 1]`` slots of length ``l`` of
    the planned strategies, every slot of the strategies from ``first_new`` on.

    Returns:
        int64 ``(length, owner, position, size, taken)`` per run that gives
        slots; a run's slots are listed pack by pack.
    """
    flat, offsets = flatten(strategies)
    depths = np.diff(offsets)
    owner = np.repeat(np.arange(len(strategies)), depths)
    # Runs of one length inside one strategy (strategies list longest first).
    starts = np.flatnonzero(np.diff(flat, prepend=-1) | np.diff(owner, prepend=-1))
    order = np.argsort(flat[starts], kind="stable")
    run_owner, run_length = owner[starts][order], flat[starts][order]
    run_size = np.diff(np.append(starts, flat.size))[order]
    run_position = (starts - offsets[owner[starts]])[order]
    per_run = counts[run_owner] * run_size
    before = np.cumsum(per_run) - per_run
    length_first = np.cumsum(np.bincount(run_length, weights=per_run, minlength=max_length + 1)
                             .round().astype(np.int64))
    taken = np.where(
        run_owner >= first_new,
        per_run,
        np.clip(needed[run_length - 1] - (before - length_first[run_length - 1]), 0, per_run),
    )
    keep = taken > 0
    return (run_length[keep], run_owner[keep], run_position[keep], run_size[keep], taken[keep])


def _overflow(examples: np.ndarray, slots: np.ndarray, max_length: int, max_sequences_per_pack):
    """Where examples beyond the plan's slots of their length go.

    Unused slots take the longest surplus examples that fit them (slots
    longest first), which leaves the short ones, the easiest to pack, for new
    packs planned by first fit decreasing.

    Returns:
        (pairs, extra): ``[(example length, slot length, count)]`` in
        increasing example length, and the `AlgorithmResult` of the new packs
        (or ``None``).
    """
    surplus = np.maximum(examples - slots, 0)
    if not surplus.any():
        return [], None
    left = surplus.tolist()
    free = np.maximum(slots - examples, 0).tolist()
    pairs = []
    item = max_length
    for slot in range(max_length, 0, -1):
        item = min(item, slot)
        while free[slot - 1] and item:
            if not left[item - 1]:
                item -= 1
                continue
            count = min(free[slot - 1], left[item - 1])
            pairs.append((item, slot, count))
            free[slot - 1] -= count
            left[item - 1] -= count
    rest = np.array(left, dtype=np.int64)
    extra = algorithms.get("ffd")(rest, max_length, max_sequences_per_pack, seed=0) if rest.any() else None
    return sorted(pairs), extra
