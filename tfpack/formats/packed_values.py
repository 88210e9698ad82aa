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
from typing import NamedTuple

import numpy as np

from tfpack import features as contract
from tfpack.errors import TfpackError

__all__ = ["check_packs", "value_rule", "ValueRule", "INT32_MIN", "INT32_MAX"]

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


class ValueRule(NamedTuple):
    """What the values of one feature must be (see the module docstring).

    Attributes:
        integer: int32 in the contract (or an int feature outside it).
        paddings: the negative values allowed besides ``>= 0`` (padding
            values such as -1, -100); ``None`` for a feature outside the
            contract (any int32 value).
        high: exclusive upper bound, or ``None``.
        binary: only 0.0 or 1.0 (the packer's masks).
        requirement: the rule in words, for messages.
    """

    integer: bool
    paddings: tuple | None
    high: int | None
    binary: bool
    requirement: str


def value_rule(name: str, *, L: int | None = None, K: int | None = None,
               limit: int | None = None, integer: bool | None = None) -> ValueRule:
    """The `ValueRule` of feature ``name`` in packs of ``L`` tokens and ``K`` sequences.

    ``limit``: a further exclusive bound (a model's table size).
    ``integer``: for a feature outside the contract, whether its values are ints.

    >>> value_rule("sequence_ids", L=8, K=2).requirement
    'integers in [0, 3) (sequence numbers 0..K, K=2)'
    >>> value_rule("input_ids", L=8, limit=30).high
    30
    """
    entries = [f for f in contract.table() if f.name == name]
    if not entries:
        if integer:
            return ValueRule(True, None, None, False, "integers inside int32 [-2**31, 2**31)")
        return ValueRule(False, None, None, False, "finite float32 numbers")
    if entries[0].dtype == "float32":
        if any(f.source == "packer" for f in entries):
            return ValueRule(False, (), None, True, "only 0.0 or 1.0")
        return ValueRule(False, (), None, False, "finite float32 numbers >= 0")
    paddings = tuple(sorted({f.padding for f in entries if f.padding < 0}))
    bound = _bound(entries)
    high = {"L": L, "K": None if K is None else K + 1}.get(bound)
    if limit is not None:
        high = limit if high is None else min(high, limit)
    if high is None:
        requirement = "integers inside int32 [-2**31, 2**31), each >= 0"
    else:
        requirement = f"integers in [0, {high})"
    requirement += "".join(f" or {p}" for p in paddings)
    if bound == "K" and high == K + 1:
        requirement += f" (sequence numbers 0..K, K={K})"
    elif bound == "L" and high == L:
        requirement += f" (positions inside the pack, L={L})"
    elif limit is not None and high == limit:
        requirement += " (rows of the model embedding table)"
    return ValueRule(True, paddings, high, False, requirement)


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
        rule = value_rule(name, L=L, K=K, limit=limits.get(name),
                          integer=value.dtype.kind in "iub")
        if rule.integer and value.dtype.kind not in "iub":
            raise TfpackError(f"`{name}` must hold integers (int32 in the tfpack feature "
                              f"contract). Received: {name} of dtype {value.dtype}")
        if value.dtype.kind not in "iubf":
            raise TfpackError(f"`{name}` must hold numbers. Received: {name} of dtype "
                              f"{value.dtype}")
        if value.size == 0:
            continue
        bad = _broken(rule, value)
        if bad.any():
            raise TfpackError(f"`{name}` must hold {rule.requirement} (tfpack.features). "
                              f"Received: {name}={_first(bad, value, first_pack)}")


def _broken(rule: ValueRule, value: np.ndarray) -> np.ndarray:
    """Where ``value`` breaks ``rule``."""
    if rule.integer:
        value = value.astype(np.int64) if value.dtype.kind != "u" else value
        bad = (value < INT32_MIN) | (value > INT32_MAX)
        if rule.paddings is not None:
            bad |= (value < 0) & ~np.isin(value, rule.paddings)
    else:
        # float64 beyond float32's range would be stored as inf.
        bad = ~np.isfinite(value) | (np.abs(value) > np.finfo(np.float32).max)
        if rule.binary:
            bad |= (value != 0) & (value != 1)
        elif rule.paddings is not None:
            bad |= value < 0
    if rule.high is not None:
        bad |= value >= rule.high
    return bad
