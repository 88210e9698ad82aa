"""Batch-size and accumulation rules for packed data (seed 000, section 3.3).

A pack holds ``p`` sequences on average (the plan's packing factor), so an
update over ``B`` packs sees ``p * B`` sequences. To keep the unpacked
hyperparameters, cut the gradient-accumulation count (or the micro-batch) by
``p``: each update then sees, on average, as many sequences as before, and
the learning curves against sequences seen line up (section 4.2)::

    unpacked: 8 sequences x 4 accumulation steps x 2 replicas = 64 sequences/update
    packed (p = 2.0, cut="accumulation"): 8 packs x 2 steps x 2 replicas
        = 32 packs = 64 sequences/update on average

Example:

>>> from tfpack.training import for_packing
>>> rule = for_packing(micro_batch_size=8, accumulation_steps=4,
...                    packing_factor=2.0, num_replicas=2)
>>> rule.micro_batch_size, rule.accumulation_steps, rule.sequences_per_update
(8, 2, 64.0)

The sequences per update never change silently: when the requested cut cannot
apply (one accumulation step cannot be cut by 2), the rule takes the cut that
can and says so in ``note``:

>>> rule = for_packing(32, 1, packing_factor=2.0)
>>> rule.micro_batch_size, rule.accumulation_steps, rule.cut
(16, 1, 'batch')
>>> rule.note
'cut="accumulation" cannot apply (1 accumulation step / packing factor 2 rounds to 1 step: 64 sequences per update instead of 32); used cut="batch": 32 sequences per update'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tfpack.errors import TfpackError

__all__ = ["BatchRule", "for_packing", "packing_factor_of"]

_CUTS = ("accumulation", "batch", "auto")


@dataclasses.dataclass(frozen=True)
class BatchRule:
    """How many packs each replica and update processes.

    Attributes:
        micro_batch_size: packs per replica per forward/backward pass.
        accumulation_steps: micro-batches whose gradients form one update.
        num_replicas: data-parallel replicas (all workers together).
        packing_factor: average sequences per pack the rule assumes.
        target_sequences_per_update: what the unpacked setup used.
        cut: the cut applied (``"accumulation"``, ``"batch"`` or ``"auto"``).
        note: why it is not the requested cut (empty when it is).
    """

    micro_batch_size: int
    accumulation_steps: int
    num_replicas: int
    packing_factor: float
    target_sequences_per_update: float
    cut: str = "accumulation"
    note: str = ""

    @property
    def global_batch_size(self) -> int:
        """Packs in one micro-step over all replicas (the tf.data batch size)."""
        return self.micro_batch_size * self.num_replicas

    @property
    def packs_per_update(self) -> int:
        """Packs whose gradients make one optimizer update."""
        return self.global_batch_size * self.accumulation_steps

    @property
    def sequences_per_update(self) -> float:
        """Expected sequences per update: ``packs_per_update * packing_factor``."""
        return self.packs_per_update * self.packing_factor

    @property
    def relative_error(self) -> float:
        """``sequences_per_update / target - 1`` (0 when the cut is exact)."""
        return self.sequences_per_update / self.target_sequences_per_update - 1.0


def packing_factor_of(plan_or_factor: Any) -> float:
    """The packing factor of a `PackingPlan`, its metrics dict, or a number.

    >>> packing_factor_of({"packing_factor": 1.9})
    1.9
    """
    value = plan_or_factor
    if hasattr(value, "metrics"):
        value = value.metrics
    if isinstance(value, dict):
        value = value.get("packing_factor")
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value < 1.0):
        raise TfpackError(
            "The packing factor must be a finite number >= 1 (a PackingPlan, "
            "its metrics, or the number itself). "
            f"Received: plan_or_factor={plan_or_factor!r}")
    return float(value)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TfpackError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return value


def _cut(kind: str, micro_batch_size: int, accumulation_steps: int, p: float):
    if kind == "accumulation":
        return micro_batch_size, max(1, round(accumulation_steps / p))
    if kind == "batch":
        return max(1, round(micro_batch_size / p)), accumulation_steps
    packs_per_replica = micro_batch_size * accumulation_steps / p
    candidates = [(abs(m * s - packs_per_replica), -m, m, s)
                  for m in range(1, micro_batch_size + 1)
                  for s in range(1, accumulation_steps + 1)]
    return min(candidates)[2:]


def for_packing(
    micro_batch_size: int,
    accumulation_steps: int = 1,
    packing_factor: Any = 1.0,
    *,
    num_replicas: int = 1,
    cut: str = "accumulation",
    tolerance: float = 0.1,
) -> BatchRule:
    """Turn an unpacked batch setup into a packed one with the same sequences per update.

    Args:
        micro_batch_size: unpacked sequences per replica per micro-step.
        accumulation_steps: unpacked accumulation count.
        packing_factor: a number, a `PackingPlan` or its metrics dict.
        num_replicas: data-parallel replicas (stays the same).
        cut: what to divide by the packing factor: `"accumulation"` (the
            paper's choice, keeps the device busy), `"batch"` (the micro-batch),
            or `"auto"` (the pair with the smallest error, largest micro-batch
            first).
        tolerance: the largest relative change of sequences per update the
            requested cut may make; beyond it, and where another cut does
            better, that cut is used and `BatchRule.note` says so.

    Returns:
        A `BatchRule`; `relative_error` says how far rounding moved it,
        ``cut`` which cut was applied and ``note`` why, if not the requested one.
    """
    micro_batch_size = _positive_int("micro_batch_size", micro_batch_size)
    accumulation_steps = _positive_int("accumulation_steps", accumulation_steps)
    num_replicas = _positive_int("num_replicas", num_replicas)
    p = packing_factor_of(packing_factor)
    if cut not in _CUTS:
        raise TfpackError(f"`cut` must be one of {_CUTS}. Received: cut={cut!r}")
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
        raise TfpackError("`tolerance` must be a non-negative number. "
                          f"Received: tolerance={tolerance!r}")
    target = float(micro_batch_size * accumulation_steps * num_replicas)

    def rule(kind, note=""):
        micro, steps = _cut(kind, micro_batch_size, accumulation_steps, p)
        return BatchRule(micro, steps, num_replicas, p, target, kind, note)

    requested = rule(cut)
    if abs(requested.relative_error) <= tolerance:
        return requested
    alternatives = [rule(kind) for kind in ("accumulation", "batch", "auto") if kind != cut]
    best = min(alternatives, key=lambda r: abs(r.relative_error))
    if abs(best.relative_error) >= abs(requested.relative_error):
        return requested  # Nothing does better: the rounding error is the least possible.
    what = {"accumulation": f"{accumulation_steps} accumulation step",
            "batch": f"micro-batch {micro_batch_size}"}.get(cut, "every pair")
    size = requested.accumulation_steps if cut == "accumulation" else requested.micro_batch_size
    unit = " step" if cut == "accumulation" else ""
    note = (f'cut="{cut}" cannot apply ({what} / packing factor {p:g} rounds to {size}{unit}: '
            f"{requested.sequences_per_update:g} sequences per update instead of {target:g}); "
            f'used cut="{best.cut}": {best.sequences_per_update:g} sequences per update')
    return dataclasses.replace(best, note=note)
