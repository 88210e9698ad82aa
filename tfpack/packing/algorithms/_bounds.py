"""Lower bounds on the packs any plan needs, each cheap, each named.

The `optimal` planner reports the strongest bound it proves and its kind
(`metrics["lower_bound_kind"]`). The cheap ones, O(L) on a histogram:

- ``tokens``: ``ceil(tokens / L)``;
- ``sequences``: ``ceil(sequences / depth)`` (with a depth limit);
- ``long``: Martello and Toth's L2: for a threshold ``k <= L / 2``, the
  sequences longer than ``L - k`` (nothing of length ``>= k`` fits beside
  them) and those in ``(L / 2, L - k]`` (one a pack) need a pack each; the
  sequences in ``[k, L / 2]`` fit only in these packs' free space or in more
  packs: ``|J1| + |J2| + ceil(max(0, tokens(J3) - free(J2)) / L)``, the best ``k``.
  It is at least the count of sequences longer than ``L / 2``, and it is what
  constrains where long sequences dominate (a token bound ignores that two of
  them never share a pack).

``windows`` (`windows_alone`: sequences of ``L`` one a pack, the others ``depth`` a
pack) is also O(L), but `optimal` proves it only after its search, which reads
`simple`'s bounds to choose its paths.
``lp`` (the LP relaxation, `optimal`'s column generation, possibly on lengths
rounded down) is computed by the planner, and so is ``pairs``: with at most two
sequences a pack, the fewest packs, which a greedy finds (`_pairs`). Each is valid on its own, so is
their maximum.

>>> import numpy as np
>>> histogram = np.zeros(10, dtype=np.int64)
>>> histogram[[5, 3]] = [3, 3]  # three 6s and three 4s into packs of 10
>>> simple(histogram, 10, None)
{'tokens': 3, 'long': 3}
>>> histogram[[5, 3]] = [3, 0]; histogram[4] = 1  # three 6s and a 5: no two share a pack
>>> strongest(simple(histogram, 10, None))
(4, 'long')

References:
    S. Martello, P. Toth, "Lower bounds and reduction procedures for the bin
    packing problem", Discrete Applied Mathematics 28 (1990).
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import _budget

# Preference among equal bounds: the simplest explanation first.
KINDS = ("tokens", "sequences", "windows", "long", "pairs", "lp")


def simple(histogram: np.ndarray, max_length: int,
           max_sequences_per_pack: int | None) -> dict[str, int]:
    """The cheap bounds of the module notes, by kind."""
    histogram = np.asarray(histogram, dtype=np.int64)
    lengths = np.arange(1, max_length + 1, dtype=np.int64)
    tokens = int(histogram @ lengths)
    bounds = {"tokens": -(-tokens // max_length)}
    if max_sequences_per_pack is not None:
        bounds["sequences"] = -(-int(histogram.sum()) // max_sequences_per_pack)
    bounds["long"] = long_bound(histogram, max_length)
    return bounds


def long_bound(histogram: np.ndarray, max_length: int) -> int:
    """Martello and Toth's L2 on a histogram (module notes), over every threshold at once."""
    histogram = np.asarray(histogram, dtype=np.int64)
    L = max_length
    half = L // 2
    count_le = np.concatenate([[0], np.cumsum(histogram)])  # count_le[x]: lengths <= x
    tokens_le = np.concatenate([[0], np.cumsum(histogram * np.arange(1, L + 1))])
    k = np.arange(1, half + 1)  # J3 = [k, half]; J2 = (half, L - k]; J1 = (L - k, L]
    if not len(k):
        return int(count_le[-1])  # L = 1: one sequence a pack
    j1 = count_le[L] - count_le[L - k]
    j2 = count_le[L - k] - count_le[half]
    free2 = j2 * L - (tokens_le[L - k] - tokens_le[half])
    j3 = tokens_le[half] - tokens_le[k - 1]
    more = -(-np.maximum(0, j3 - free2) // L)
    return int((j1 + j2 + more).max())


def windows_alone(histogram: np.ndarray, max_sequences_per_pack: int | None) -> int:
    """Sequences of ``max_length`` one a pack, the others ``max_sequences_per_pack`` a pack.

    Also a bound (a pack holding a full window holds nothing else), but not one of
    `simple`'s: `optimal`'s paths read it to tell where the depth binds beside the tokens
    (`_paths.prove_down`, `_paths.grouped`), and `optimal` proves it (kind ``windows``)
    after its search, where the LP over all lengths, which would prove as much, is often
    cut by the time on long contexts (`benchmarks/planners_long_context.py --seed 39`,
    case 42: 109,825 packs on ``sequences`` 109,438, 0.354%; on this bound, 109,744,
    0.074%). 0 without a depth limit.

    >>> windows_alone(np.array([5, 0, 0, 2]), 4)  # two 4s alone, five 1s in two packs
    4
    """
    if max_sequences_per_pack is None:
        return 0
    alone = int(histogram[-1])
    return alone + -(-(int(histogram.sum()) - alone) // max_sequences_per_pack)


def slots_share(histogram: np.ndarray, max_sequences_per_pack: int | None) -> float:
    """The sequences shorter than ``max_length`` over the slots of the packs their tokens
    need (``tokens / max_length * depth``): near 1 or over, the depth binds beside the tokens
    (or nearly); 0 without a depth limit or such sequences.

    >>> h = np.zeros(10, dtype=np.int64); h[[4, 9]] = [6, 2]  # six 5s and two 10s, depth 2
    >>> slots_share(h, 2), slots_share(h, 3)  # 30 tokens: 3 packs, 6 or 9 slots
    (1.0, 0.6666666666666666)
    """
    max_length = len(histogram)
    shorter = histogram[:-1]
    tokens = _budget.dot(np.arange(1, max_length), shorter)
    if max_sequences_per_pack is None or tokens <= 0:
        return 0.0
    return float(shorter.sum() / (tokens / max_length * max_sequences_per_pack))


def strongest(bounds: dict[str, int]) -> tuple[int, str]:
    """The largest bound and its kind (ties: the first in `KINDS`)."""
    value = max(bounds.values())
    return value, next(kind for kind in KINDS if bounds.get(kind) == value)
