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
    """

    micro_batch_size: int
    accumulation_steps: int
    num_replicas: int
    packing_factor: float
    target_sequences_per_update: float

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


def for_packing(
    micro_batch_size: int,
    accumulation_steps: int = 1,
    packing_factor: Any = 1.0,
    *,
    num_replicas: int = 1,
    cut: str = "accumulation",
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

    Returns:
        A `BatchRule`; `relative_error` says how far rounding moved it.
    """
    micro_batch_size = _positive_int("micro_batch_size", micro_batch_size)
    accumulation_steps = _positive_int("accumulation_steps", accumulation_steps)
    num_replicas = _positive_int("num_replicas", num_replicas)
    p = packing_factor_of(packing_factor)
    if cut not in _CUTS:
        raise TfpackError(f"`cut` must be one of {_CUTS}. Received: cut={cut!r}")
    target = float(micro_batch_size * accumulation_steps * num_replicas)
    packs_per_replica = micro_batch_size * accumulation_steps / p
    if cut == "accumulation":
        micro, steps = micro_batch_size, max(1, round(accumulation_steps / p))
    elif cut == "batch":
        micro, steps = max(1, round(micro_batch_size / p)), accumulation_steps
    else:
        candidates = [
            (abs(m * s - packs_per_replica), -m, m, s)
            for m in range(1, micro_batch_size + 1)
            for s in range(1, accumulation_steps + 1)]
        _, _, micro, steps = min(candidates)
    return BatchRule(micro, steps, num_replicas, p, target)
