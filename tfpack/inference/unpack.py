"""Packed model outputs back to examples, through ``example_ids``.

A pack's outputs live in rows declared by the task contract
(`tfpack.tasks`, ``outputs``): ``"sequence"`` outputs ``[B, K, ...]`` have
one row per slot, ``"token"`` outputs ``[B, L, ...]`` one per token,
``"prediction"`` outputs ``[B, M, ...]`` one per prediction slot. `unpack_batch`
cuts one batch of packed outputs into per-example pieces keyed by the
``example_ids`` of the packs; `Collector` gathers them over many batches and
returns them in input order.

Worked example, ``L=5``, ``K=2``: a pack of example 1 (3 tokens) then example
0 (2 tokens)::

    example_ids  [1, 0]     sequence_ids [1, 1, 1, 2, 2]
    "sequence" output [[a], [b]]          -> example 0: [b], example 1: [a]
    "token" output    [t0, t1, t2, t3, t4] -> example 0: [t3, t4], example 1: [t0, t1, t2]

>>> import numpy as np
>>> packs = {"example_ids": np.array([[1, 0]]), "sequence_ids": np.array([[1, 1, 1, 2, 2]])}
>>> collector = Collector({"pooled": "sequence", "hidden": "token"})
>>> collector.add(packs, {"pooled": np.array([[[7.0], [8.0]]]),
...                       "hidden": np.arange(5.0).reshape(1, 5, 1)})
2
>>> result = collector.result()
>>> result["pooled"].tolist(), [h.ravel().tolist() for h in result["hidden"]]
([[8.0], [7.0]], [[3.0, 4.0], [0.0, 1.0, 2.0]])
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import InstanceOf, validate_params

__all__ = ["Collector", "unpack_batch"]

# Per-token outputs -> the feature naming each row's slot (pair packs: each side's own).
_OWNERS = {"token": "sequence_ids", "prediction": "masked_lm_sequence_ids",
           "encoder_token": "encoder_sequence_ids", "decoder_token": "decoder_sequence_ids"}


@validate_params({"packs": InstanceOf(Mapping, description="a dict of numpy features"),
                  "outputs": InstanceOf(Mapping, description="a dict of numpy outputs"),
                  "kinds": InstanceOf(Mapping, description="a dict of output name -> packing")})
def unpack_batch(packs: Mapping, outputs: Mapping, kinds: Mapping[str, str]):
    """``(ids, pieces)`` of one batch of packs.

    Args:
        packs: numpy features of the batch (``example_ids`` [B, K],
            ``sequence_ids`` [B, L]; ``masked_lm_sequence_ids`` [B, M] for
            ``"prediction"`` outputs).
        outputs: numpy model outputs, batch first.
        kinds: output name -> ``"sequence"``, ``"token"``, ``"prediction"``,
            or a side of a pair pack (``"encoder_token"``, ``"decoder_token"``).

    Returns:
        ``ids``: int64 ``[n]``, the examples of the batch in slot order;
        ``pieces``: output name -> ``[n, ...]`` array (``"sequence"``) or
        list of ``n`` arrays (``"token"``, ``"prediction"``), aligned with ``ids``.
    """
    example_ids = np.asarray(packs["example_ids"])
    real = example_ids >= 0
    ids = example_ids[real].astype(np.int64)
    pieces = {}
    for name, kind in kinds.items():
        value = np.asarray(outputs[name])
        if kind == "sequence":
            pieces[name] = value[:, :example_ids.shape[1]][real]
        elif kind in _OWNERS:
            pieces[name] = _split_rows(value, np.asarray(packs[_OWNERS[kind]]), real)
        else:
            raise TfpackError(f"Output kinds must be 'sequence' or one of {sorted(_OWNERS)}. "
                              f"Received: {name}={kind!r}")
    return ids, pieces


def _split_rows(value: np.ndarray, owner: np.ndarray, real: np.ndarray) -> list:
    """One array per real slot: the rows of ``value`` whose ``owner`` is that slot.

    A pack's sequences (and their prediction slots) are contiguous and in slot
    order from its first row, so each is one slice.
    """
    K = real.shape[1]
    counts = np.stack([np.bincount(row, minlength=K + 1)[1:K + 1] for row in owner])
    starts = np.cumsum(counts, axis=1) - counts
    return [value[row, starts[row, k]:starts[row, k] + counts[row, k]]
            for row in range(value.shape[0]) for k in np.flatnonzero(real[row])]


class Collector:
    """Gathers per-example outputs over batches; `result` puts them in input order.

    Args:
        kinds: output name -> ``"sequence"``, ``"token"`` or ``"prediction"``.
    """

    @validate_params({"kinds": InstanceOf(Mapping, description="a dict of output name -> packing")})
    def __init__(self, kinds: Mapping[str, str]):
        self.kinds = dict(kinds)
        self._ids = []
        self._pieces = {name: [] for name in self.kinds}
        self.count = 0

    def add(self, packs: Mapping, outputs: Mapping) -> int:
        """Add one batch; returns how many examples it held."""
        ids, pieces = unpack_batch(packs, outputs, self.kinds)
        self._ids.append(ids)
        for name, value in pieces.items():
            self._pieces[name].append(value)
        self.count += len(ids)
        return len(ids)

    def result(self, expected: int | None = None) -> dict:
        """Output name -> per-example results in input order (see `tfpack.predict`).

        Raises:
            TfpackError: when the examples seen are not exactly ``0..n-1``
                (each once), or not ``expected`` of them.
        """
        ids = np.concatenate(self._ids) if self._ids else np.zeros([0], np.int64)
        order = np.argsort(ids, kind="stable")
        n = len(ids)
        if not np.array_equal(ids[order], np.arange(n)) or (
                expected is not None and n != expected):
            raise TfpackError(
                "Every example must come back exactly once. Received: "
                f"{n} outputs for {expected if expected is not None else 'the'} examples, "
                f"ids {_few(np.sort(ids))}")
        out = {}
        for name, kind in self.kinds.items():
            parts = self._pieces[name]
            if kind == "sequence":
                values = np.concatenate(parts) if parts else np.zeros([0])
                out[name] = values[order]
            else:
                flat = [piece for part in parts for piece in part]
                out[name] = [flat[i] for i in order]
        return out


def _few(values: np.ndarray, limit: int = 8) -> str:
    shown = values[:limit].tolist()
    return f"{shown}{' ...' if len(values) > limit else ''}"
