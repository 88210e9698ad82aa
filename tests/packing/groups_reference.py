"""A plain Python reference of `_groups.real_packs` (the C kernel's spec).

The loops `tfpack/packing/_kernels.c` replaced, kept to compare against
(tests/packing/test_kernels.py): the same packs, in the same order.
"""

import bisect

import numpy as np


def real_packs(strategies: list[tuple[int, ...]], counts: np.ndarray, histogram: np.ndarray,
               starts: np.ndarray) -> dict[tuple[int, ...], int]:
    """The real lengths of ``histogram`` in the slots of a plan for its rounded-up histogram.

    Each slot of a group's longest length gets a sequence of that group (they
    are no longer, so every pack still fits), longest sequences into the first
    packs; slots left over are dropped, and so are packs left empty.

    Works on counts, not sequences (histograms may count billions): a group's
    sequences, longest first, are a stream of runs of equal lengths; the packs
    of a strategy take consecutive pieces of each of its groups' streams, so
    they are identical between the places where some stream changes run, and
    each stretch of identical packs is one entry.

    >>> real_packs([(6, 2), (6,)], np.array([2, 1]), np.array([0, 2, 0, 1, 1, 1]),
    ...            np.array([1, 3]))
    {(6, 2): 1, (5, 2): 1, (4,): 1}
    """
    max_length = len(histogram)
    histogram = np.asarray(histogram, dtype=np.int64)
    ends = np.append(starts[1:] - 1, max_length)
    group_of = (np.searchsorted(starts, np.arange(1, max_length + 1), side="right") - 1).tolist()
    # Each group's stream: its lengths longest first (a run each), then zeros (slots nobody
    # needs); ``cum[i]``: where run i ends.
    lengths, cum, need = [], [], []
    for first, last in zip(starts.tolist(), ends.tolist()):
        copies = histogram[first - 1: last][::-1]
        present = np.flatnonzero(copies)
        lengths.append((last - present).tolist() + [0])
        cum.append(np.cumsum(copies[present]).tolist())
        need.append(cum[-1][-1] if cum[-1] else 0)
    position = [0] * len(starts)  # how much of each stream earlier packs took
    run = [0] * len(starts)  # the run of each stream holding the next slot's sequence
    packs: dict[tuple[int, ...], int] = {}
    for strategy, count in zip(strategies, np.asarray(counts).tolist()):
        slots: dict[int, int] = {}
        for length in strategy:
            slots[group_of[length - 1]] = slots.get(group_of[length - 1], 0) + 1
        cuts = {0, count}
        for g, m in slots.items():
            begin, end = position[g], position[g] + count * m
            # Runs change inside this strategy's part of the stream: packs differ there.
            for change in cum[g][bisect.bisect_right(cum[g], begin): bisect.bisect_left(cum[g], end)]:
                q = (change - begin) // m
                cuts.update((q, q + 1))
        cuts = sorted(c for c in cuts if c <= count)
        for a, b in zip(cuts[:-1], cuts[1:]):
            pack = []
            for g, m in slots.items():
                at = position[g] + a * m
                runs, first = cum[g], run[g]
                while first < len(runs) and runs[first] <= at:
                    first += 1  # `at` only grows: the run holding it, without bisection
                run[g] = first
                if m == 1 or first == len(runs) or runs[first] > at + m - 1:
                    pack += [lengths[g][first]] * m  # one run holds all m (the usual case)
                else:
                    pack += [lengths[g][bisect.bisect_right(cum[g], at + i)] for i in range(m)]
            pack.sort(reverse=True)
            while pack and not pack[-1]:
                pack.pop()  # slots nobody needs (zeros sort last)
            pack = tuple(pack)
            if pack:
                packs[pack] = packs.get(pack, 0) + b - a
        for g, m in slots.items():
            position[g] += count * m
    if any(p < n for p, n in zip(position, need)):  # pragma: no cover - the plan covers it
        raise AssertionError("a plan for the rounded-up histogram misses sequences")
    return packs
