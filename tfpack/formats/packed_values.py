"""Every value of a pack checked against the feature contract, before it is written or run.

`tfpack.formats.validation` checks the records that enter tfpack; this module
checks the packs that leave it (`write_packed`) or reach a model
(`tfpack.predict`), whoever built them. The rules derive from the feature
table (`tfpack.features`: dtype, padding, how a feature packs, where its
values come from):

- an ``int32`` feature holds integers inside int32 (stored as int64 and read
  back as int32, a larger value would wrap: ``2**31 + 5`` reads back as
  ``-2147483643``), each ``>= 0`` or equal to its padding value (``-1`` for
  ``example_ids``, ``-100`` for ignored labels);
- a ``float32`` feature holds finite numbers ``>= 0``; the packer's masks
  (``sequence_mask``) hold exactly 0.0 or 1.0;
- positions inside the pack (``shift=True`` features, ``position_ids``,
  ``cls_positions``) lie in ``[0, L)``; sequence numbers (``sequence_ids``,
  ``source="slot"`` features such as ``masked_lm_sequence_ids``) in
  ``[0, K]``;
- ``limits`` (from the model: its vocabulary, token types, position table)
  bound a feature's values further: ``value < limit``.

Features outside the contract are only held to int32 (ints) or finiteness
(floats). ``L`` is the width of the token features, ``K`` of the sequence
features (``L`` when a pack has none). One numpy pass per feature; no
TensorFlow, so the engines can call it too.

Example:

>>> import numpy as np
>>> packs = {"input_ids": np.array([[5, 6, 7, 0]]), "sequence_ids": np.array([[1, 1, 2, 0]]),
...          "position_ids": np.array([[0, 1, 0, 0]]),
...          "sequence_mask": np.array([[1.0, 1.0]], np.float32)}
>>> check_packs(packs)
>>> check_packs({**packs, "input_ids": np.array([[5, 2**31 + 5, 7, 0]])})
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `input_ids` must hold integers inside int32 [-2**31, 2**31), each >= 0 (tfpack.features). Received: input_ids=2147483653 in pack 0 at index (1,)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tfpack import features as contract
from tfpack.errors import TfpackError

__all__ = ["check_packs", "INT32_MIN", "INT32_MAX"]

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

# The packer's own index features (source "packer") and what bounds them:
# "L" = a position inside the pack, [0, L); "K" = a sequence number, [0, K].
_PACKER_BOUNDS = {"sequence_ids": "K", "position_ids": "L", "cls_positions": "L"}


def _bound(entries) -> str | None:
    """``"L"``, ``"K"`` or ``None``: what bounds a contract feature's values from above."""
    for entry in entries:
        if entry.shift:
            return "L"
        if entry.source == "slot":
            return "K"
        if entry.source == "packer" and entry.name in _PACKER_BOUNDS:
            return _PACKER_BOUNDS[entry.name]
    return None


def _rules(name: str) -> tuple[str, set, str | None, bool]:
    """``(dtype, paddings, bound, binary)`` of feature ``name`` (``dtype`` None: not in
    the contract)."""
    entries = [f for f in contract.table() if f.name == name]
    if not entries:
        return None, set(), None, False
    binary = any(f.source == "packer" and f.dtype == "float32" for f in entries)
    return entries[0].dtype, {f.padding for f in entries}, _bound(entries), binary


def _sizes(packs: Mapping[str, np.ndarray]) -> tuple[int | None, int | None]:
    """``(L, K)`` of a batch of packs: widths of its token and sequence features."""
    L = K = None
    for name, value in packs.items():
        if np.ndim(value) < 2:
            continue
        dimensions = {f.dimension for f in contract.table() if f.name == name}
        if dimensions == {"L"} and L is None:
            L = np.shape(value)[1]
        elif dimensions == {"K"} and K is None:
            K = np.shape(value)[1]
    return L, (K if K is not None else L)


def _first(bad: np.ndarray, value: np.ndarray, first_pack: int) -> str:
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    shown = value[where]
    shown = shown.item() if hasattr(shown, "item") else shown
    if len(where) == 1:
        return f"{shown!r} in pack {first_pack + where[0]}"
    return f"{shown!r} in pack {first_pack + where[0]} at index {where[1:]}"


def check_packs(packs: Mapping[str, np.ndarray], *, first_pack: int = 0,
                limits: Mapping[str, int] | None = None) -> None:
    """Raise `TfpackError` naming the first value of a batch of packs the contract forbids.

    Args:
        packs: feature name -> array ``[P, ...]`` (a batch of packs).
        first_pack: the index of the batch's first pack, for the message.
        limits: feature name -> exclusive upper bound of its values (the
            model's ``vocabulary_size`` for ``input_ids``, the rows of its
            position table for ``position_ids``, ...).

    Raises:
        TfpackError: "`name` must ... Received: name=value in pack p at index (i,)".
    """
    L, K = _sizes(packs)
    limits = dict(limits or {})
    for name, value in packs.items():
        value = np.asarray(value)
        dtype, paddings, bound, binary = _rules(name)
        if dtype == "int32" or (dtype is None and value.dtype.kind in "iub"):
            _check_ints(name, value, paddings, bound, L, K, limits.get(name), first_pack)
        else:
            _check_floats(name, value, dtype is not None, binary, first_pack)


def _check_ints(name, value, paddings, bound, L, K, limit, first_pack) -> None:
    if value.dtype.kind not in "iub":
        raise TfpackError(f"`{name}` must hold integers (int32 in the tfpack feature contract). "
                          f"Received: {name} of dtype {value.dtype}")
    if value.size == 0:
        return
    value = value.astype(np.int64) if value.dtype.kind != "u" else value
    bad = (value < INT32_MIN) | (value > INT32_MAX)
    requirement = "integers inside int32 [-2**31, 2**31)"
    if paddings:  # A contract feature: >= 0, or its padding value.
        padding = sorted(p for p in paddings if p < 0)
        bad |= (value < 0) & ~np.isin(value, padding)
        requirement += ", each >= 0" + "".join(f" or {p}" for p in padding)
    high = {"L": L, "K": None if K is None else K + 1}.get(bound)
    if limit is not None:
        high = limit if high is None else min(high, limit)
    if high is not None:
        bad |= value >= high
        requirement += f" and < {high}"
        if bound == "K":
            requirement += f" (sequence numbers 0..K, K={K})"
        elif bound == "L":
            requirement += f" (positions inside the pack, L={L})"
    if bad.any():
        raise TfpackError(f"`{name}` must hold {requirement} (tfpack.features). "
                          f"Received: {name}={_first(bad, value, first_pack)}")


def _check_floats(name, value, in_contract, binary, first_pack) -> None:
    if value.dtype.kind not in "iubf":
        raise TfpackError(f"`{name}` must hold numbers. Received: {name} of dtype {value.dtype}")
    if value.size == 0:
        return
    # float64 beyond float32's range would be stored as inf.
    bad = ~np.isfinite(value) | (np.abs(value) > np.finfo(np.float32).max)
    requirement = "finite float32 numbers"
    if in_contract and binary:
        bad |= (value != 0) & (value != 1)
        requirement = "only 0.0 or 1.0"
    elif in_contract:
        bad |= value < 0
        requirement += " >= 0"
    if bad.any():
        raise TfpackError(f"`{name}` must hold {requirement} (tfpack.features). "
                          f"Received: {name}={_first(bad, value, first_pack)}")
