"""`PackReport`: what a `tfpack.data.pack` transformation produced.

>>> PackReport(mode="offline", packs=2, sequences=4).padding_packs
0
"""

from __future__ import annotations

import dataclasses

from tfpack.params import Anything, Boolean, InstanceOf, Integer, Options, Real, declare_fields

__all__ = ["PackReport"]


_COUNT = [None, Integer(0)]


@declare_fields({
    "mode": Options("offline", "streaming"), "packs": _COUNT, "sequences": _COUNT,
    "tokens": _COUNT, "efficiency": [None, Real(0)], "packing_factor": [None, Real(0)],
    "padding_packs": Integer(0), "dropped_packs": Integer(0), "dropped_sequences": Integer(0),
    "num_workers": Integer(1), "worker": Integer(0), "max_predictions_per_pack": _COUNT,
    "input_sharded": Boolean(), "host_packs": [None, InstanceOf(list)],
    "plan": Anything("the PackingPlan used, or None"),
    "balance": Anything("the BatchBalance of the batches, or None"),
})
@dataclasses.dataclass
class PackReport:
    """What a `Packer` produced (offline mode: exact; streaming: settings only).

    Attributes:
        mode: ``"offline"`` or ``"streaming"``.
        packs: packs this worker emits (padding packs included).
        sequences: real sequences this worker emits.
        tokens: real tokens this worker emits.
        efficiency: ``tokens / (packs * L)`` over all workers, before sharding.
        packing_factor: sequences per non-empty pack, before sharding.
        padding_packs: empty packs added (all workers) so that every replica
            gets the same number of packs.
        dropped_packs, dropped_sequences: cut with ``remainder="drop"``.
        num_workers, worker: the input pipeline this dataset is for.
        max_predictions_per_pack: ``M`` in effect.
        input_sharded: the dataset was this host's own share of the input.
            Then ``packs``, ``sequences``, ``tokens``, ``efficiency``,
            ``packing_factor``, ``padding_packs``, ``dropped_packs`` and
            ``dropped_sequences`` describe this host only.
        host_packs: with ``all_gather``, every host's real packs before
            they were padded or cut, host by host; else ``None``.
        plan: the `tfpack.packing.PackingPlan` used (offline), else ``None``.
        balance: with ``balance=``, the `tfpack.packing.balance.BatchBalance`
            of the batches of all workers together (``low``/``high``: the
            fewest and most sequences, or tokens, in a full batch;
            ``excess``: by how much the worst misses the tolerance), else
            ``None``.
    """

    mode: str
    packs: int | None = None
    sequences: int | None = None
    tokens: int | None = None
    efficiency: float | None = None
    packing_factor: float | None = None
    padding_packs: int = 0
    dropped_packs: int = 0
    dropped_sequences: int = 0
    num_workers: int = 1
    worker: int = 0
    max_predictions_per_pack: int | None = None
    input_sharded: bool = False
    host_packs: list | None = None
    plan: object = None
    balance: object = None
