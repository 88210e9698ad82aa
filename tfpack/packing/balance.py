"""Balanced batches: arrange packs so every batch of ``B`` holds the same number of sequences.

Packing keeps the sequences per update right on average only: a batch of
``B`` packs drawn at random holds ``B`` times the mean pack depth, give or
take ``sqrt(B)`` standard deviations. `arrange` puts packs in an order whose
consecutive groups of ``B`` (the batches) hold the same total of a per-pack
value (sequences, or tokens), as nearly as the packs allow. It moves packs
only: no pack is added, dropped or changed.

How (numpy, deterministic per seed):

1. Ties are broken by a seeded shuffle, so packs of one value are picked at
   random. ``P mod B`` packs, spread evenly over the sorted values, are set
   aside for the last, partial batch (not balanced).
2. Serpentine deal: the other packs, sorted by value, are dealt round by
   round to the ``n = P // B`` batches, one pack each, in a seeded order of
   the batches in even rounds and in the reverse order in the next round.
   Two batches then differ by at most ``max - min`` of the values (proof: in
   each pair of rounds, the batch dealt earlier in the even round is dealt
   later in the odd one, so what the pair adds to the difference of two
   batches lies between minus the odd round's range and plus the even
   round's range; the rounds' ranges are disjoint intervals of the sorted
   values, so over all pairs they add up to at most ``max - min``).
3. Swaps: the fullest batches are paired with the emptiest ones, and each
   pair swaps the two packs whose difference ``d`` comes closest to half the
   gap ``g`` between them, provided ``0 < d < g``. Both batches then end
   strictly inside their old range, so the spread (``max - min`` over
   batches) never grows and the sum of squared deviations strictly falls:
   the search ends. It stops at the best spread any arrangement can have
   (0 if the total divides evenly into ``n`` batches, else 1) or at 0.5% of
   the mean (a quarter of the tolerance, for tokens), when neither the
   sorted pairing nor 16 seeded random pairings of all batches in a row find
   a better swap, or when 32 rounds in a row leave the spread as it was
   (plans that cannot be balanced: batches of 4 packs where one pack alone
   holds the mean). The random pairings may also swap two packs that differ by
   exactly the gap: the two batches trade sums (the spread and the squares
   stay), which gives the next rounds new compositions to work with.
4. Batches are shuffled with the seed, and packs within each batch.

`BatchBalance` reports the outcome: the per-batch totals, the tolerance
(2% of the mean or 1, whichever is more) and by how much the worst batch
misses it (``excess``; 0 on real lengths in practice).

Example: 6 packs of 3, 2, 2, 1, 1, 1 sequences, batches of 2:

>>> import numpy as np
>>> positions, report = arrange(np.array([3, 2, 2, 1, 1, 1]), 2, seed=0)
>>> sorted(positions.tolist())
[0, 1, 2, 3, 4, 5]
>>> per_batch = np.bincount(positions // 2, weights=[3, 2, 2, 1, 1, 1])
>>> sorted(per_batch.tolist()), report.low, report.high, report.excess
([3.0, 3.0, 4.0], 3, 4, 0.0)
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["BALANCE", "BatchBalance", "arrange", "check_balance"]

BALANCE = ("sequences", "tokens")
# |batch total - mean| allowed: this fraction of the mean, or 1 where that is less.
TOLERANCE = 0.02
# Elements of one pairwise-difference block [pairs, B, B]: bounds the temporaries.
_BLOCK = 1 << 22
_MAX_ROUNDS = 512
_ENOUGH = TOLERANCE / 4
_TRIES = 16  # random pairings tried in a row before the search gives up
_STALL = 32  # rounds without a narrower spread before the search gives up


@dataclasses.dataclass(frozen=True)
class BatchBalance:
    """How evenly `arrange` spread a per-pack value over the full batches.

    Attributes:
        by: what was balanced: ``"sequences"`` or ``"tokens"``.
        batch_size: packs per batch (``B``).
        batches: full batches (the last, partial one is not counted).
        mean: the mean total per full batch.
        low, high: the least and the most any full batch holds.
        unbalanced_low, unbalanced_high: the same for the packs in a seeded
            random order (what shuffling without balance gives), for
            comparison.
        tolerance: the largest ``|total - mean|`` allowed:
            ``max(0.02 * mean, 1)``.
        excess: by how much the worst batch exceeds ``tolerance`` (0: every
            full batch is within it).
        rounds: swap rounds the search ran.
        replicas: with ``replicas=`` (`tfpack.packing.replicas`), the
            `ReplicaBalance` of the split of each batch among replicas by
            attention cost; else None.

    Example:

    >>> report = arrange(np.array([2, 2, 1, 1]), 2, seed=0)[1]
    >>> report.within_tolerance, report.mean, report.to_dict()["high"]
    (True, 3.0, 3)
    """

    by: str
    batch_size: int
    batches: int
    mean: float
    low: int
    high: int
    unbalanced_low: int
    unbalanced_high: int
    tolerance: float
    excess: float
    rounds: int = 0
    replicas: object = None

    @property
    def within_tolerance(self) -> bool:
        """Every full batch within ``tolerance`` of the mean."""
        return self.excess == 0.0

    def to_dict(self) -> dict:
        """A JSON-ready dict (``stats.json``, `PackReport`)."""
        return {**dataclasses.asdict(self), "within_tolerance": self.within_tolerance}


def check_balance(balance, batch_size, *, batch_size_alone: bool = True) -> str | None:
    """``balance`` as ``None``, ``"sequences"`` or ``"tokens"``; it needs ``batch_size``.

    ``batch_size_alone=False``: ``batch_size`` means nothing without
    ``balance`` (``tfpack pack``) and is refused alone.

    >>> check_balance(True, 8), check_balance(False, None)
    ('sequences', None)
    """
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
            batch_size, (int, np.integer)) or batch_size < 1):
        raise TfpackError("`batch_size` must be a positive integer. "
                          f"Received: batch_size={batch_size!r}")
    if balance is None or balance is False:
        if batch_size is not None and not batch_size_alone:
            raise TfpackError("`batch_size` orders packs for `balance` and needs it. "
                              f"Received: batch_size={batch_size}, balance={balance!r}")
        return None
    if balance is True:
        balance = "sequences"
    if balance not in BALANCE:
        raise TfpackError("`balance` must be True, False, 'sequences' or 'tokens'. "
                          f"Received: balance={balance!r}")
    if batch_size is None:
        raise TfpackError("`balance` arranges packs into batches and needs `batch_size`. "
                          f"Received: balance={balance!r}, batch_size=None")
    return balance


def arrange(values, batch_size: int, *, seed: int = 0, shuffle: bool = True,
            by: str = "sequences") -> tuple[np.ndarray, BatchBalance]:
    """The place of each pack in an order whose batches of ``batch_size`` hold equal totals.

    Args:
        values: int ``[P]``, the value of each pack (its sequences or tokens).
        batch_size: packs per batch, positive.
        seed: seeds the tie-breaking and the order of batches and of packs
            within them; same values and seed, same places.
        shuffle: ``False``: batches and packs within them in construction
            order (still deterministic).
        by: the name of the value, for the report.

    Returns:
        ``(positions, report)``: int64 ``[P]``, a permutation of ``0..P-1``
        (pack ``i`` goes to place ``positions[i]``), and a `BatchBalance`.
    """
    values = np.asarray(values, np.int64)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise TfpackError("`batch_size` must be a positive integer. "
                          f"Received: batch_size={batch_size!r}")
    B, P = int(batch_size), values.size
    n, r = divmod(P, B)
    rng = np.random.default_rng(seed)
    # Seeded tie-breaking: packs of one value come in a random order.
    first = rng.permutation(P) if shuffle else np.arange(P)
    top = int(values.max(initial=0))
    keys = top - values[first]  # largest value first
    if top < 2**16:
        keys = keys.astype(np.uint16)  # a radix sort
    ranked = first[np.argsort(keys, kind="stable")]
    rest = np.zeros(P, bool)
    if r:
        rest[((np.arange(r) + 0.5) * P / r).astype(np.int64)] = True
    members = _deal(ranked[~rest], n, B, rng)  # [n, B] pack indices
    members, rounds = _swap(members, values, rng)
    if shuffle:
        members = members[rng.permutation(n)]
        members = np.take_along_axis(members, np.argsort(rng.random(members.shape), axis=1),
                                     axis=1)
    last = ranked[rest]
    if shuffle:
        last = rng.permutation(last)
    positions = np.empty(P, np.int64)
    positions[np.concatenate([members.ravel(), last])] = np.arange(P)
    return positions, _report(values, members, B, by, rounds, first)


def _deal(ranked: np.ndarray, n: int, B: int, rng) -> np.ndarray:
    """Serpentine deal of ``ranked`` (largest first) to ``n`` batches: ``[n, B]``.

    Each pair of rounds deals to the batches in a fresh seeded order, forward
    then backward: the bound of the module docstring holds pair by pair, and
    batches do not all share one structure (which would leave the swaps
    nothing to exchange).
    """
    if n == 0:
        return np.zeros((0, B), np.int64)
    rounds = ranked.reshape(B, n)
    orders = rng.permuted(np.tile(np.arange(n), ((B + 1) // 2, 1)), axis=1)
    batch = np.repeat(orders, 2, axis=0)[:B]
    batch[1::2] = batch[1::2, ::-1]
    members = np.empty((n, B), np.int64)
    members[batch, np.arange(B)[:, None]] = rounds
    return members


def _swap(members: np.ndarray, values: np.ndarray, rng) -> tuple[np.ndarray, int]:
    """Step 3 of the module docstring, in place on ``members``; the rounds run."""
    n, B = members.shape
    if n < 2:
        return members, 0
    sums = values[members].sum(axis=1)
    best = 0 if sums.sum() % n == 0 else 1  # the least spread any arrangement can have
    # Good enough: a quarter of the tolerance (matters for tokens, where the
    # best spread is out of reach and not worth the rounds).
    enough = max(best, int(_ENOUGH * sums.sum() / n))
    failed, rounds, narrowest, since = 0, 0, sums.max() - sums.min(), 0
    while rounds < _MAX_ROUNDS and narrowest > enough and since < _STALL:
        rounds += 1
        half = n // 2
        if not failed:  # the fullest batches with the emptiest
            order = np.argsort(sums, kind="stable")
            high, low = order[::-1][:half], order[:half]
        else:  # stuck: random pairs, which may also trade sums (below)
            pairs = rng.permutation(n)[:2 * half].reshape(2, half)
            flip = sums[pairs[0]] < sums[pairs[1]]
            high, low = np.where(flip, pairs[1], pairs[0]), np.where(flip, pairs[0], pairs[1])
        gap = sums[high] - sums[low]
        active = np.flatnonzero(gap > (0 if failed else best))
        improved = 0
        step = max(1, _BLOCK // (B * B))
        for start in range(0, active.size, step):
            part = active[start:start + step]
            hi, lo = high[part], low[part]
            g = gap[part][:, None, None]
            d = values[members[hi]][:, :, None] - values[members[lo]][:, None, :]
            gain = np.where((d > 0) & (d < g), np.minimum(d, g - d), 0.0)
            if failed:
                # A swap of exactly the gap trades the two sums: no better, no
                # worse, but new compositions for the next rounds to work with.
                gain = np.where((gain == 0) & (d == g), 0.5, gain)
            gain = gain.reshape(part.size, -1)
            pick = gain.argmax(axis=1)
            top = gain[np.arange(part.size), pick]
            ok = top > 0
            i, j = pick[ok] // B, pick[ok] % B
            hi, lo = hi[ok], lo[ok]
            moved = d.reshape(part.size, -1)[ok, pick[ok]]
            members[hi, i], members[lo, j] = members[lo, j], members[hi, i].copy()
            sums[hi] -= moved
            sums[lo] += moved
            improved += int((top >= 1).sum())
        failed = 0 if improved else failed + 1
        if failed > _TRIES:
            break
        spread = sums.max() - sums.min()
        narrowest, since = (spread, 0) if spread < narrowest else (narrowest, since + 1)
    return members, rounds


def _report(values, members, B, by, rounds, order) -> BatchBalance:
    n = members.shape[0]
    if n == 0:
        return BatchBalance(by, B, 0, 0.0, 0, 0, 0, 0, 0.0, 0.0, rounds)
    sums = values[members].sum(axis=1)
    before = values[order[:n * B]].reshape(n, B).sum(axis=1)
    mean = float(sums.mean())
    tolerance = max(TOLERANCE * mean, 1.0)
    worst = float(np.abs(sums - mean).max())
    return BatchBalance(by, B, n, mean, int(sums.min()), int(sums.max()), int(before.min()),
                        int(before.max()), tolerance, max(worst - tolerance, 0.0), rounds)
