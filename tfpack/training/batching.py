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

and when no whole number of packs comes within 5% of the recipe, ``note``
says by how much it misses:

>>> for_packing(1, 1, packing_factor=2.0).note
'1 pack per update holds 2 sequences on average, not the 1 of the recipe (+100%): no whole number of packs per replica comes closer'

Packing keeps the sequences per update right on average only: an update of
``n`` packs whose depths vary with standard deviation ``s`` swings by about
``2 s sqrt(n)`` sequences (95% of updates). With a `PackingPlan` the rule knows
``s`` and says what to expect, and what balanced updates
(``tfpack.data.pack(..., balance=True, balance_size=rule.packs_per_update)``,
`tfpack.packing.balance`) give instead:

>>> import numpy as np
>>> from tfpack import packing
>>> lengths = np.array([8] * 50 + [6] * 50 + [2] * 50)  # packs (8,) and (6, 2)
>>> plan = packing.plan(packing.histogram(lengths, 8), 8, 2, algorithm="ffd")
>>> rule = for_packing(6, 1, packing_factor=plan, cut="batch")
>>> rule.micro_batch_size, rule.expected_spread(), rule.expected_spread(balanced=True)
(4, (4.0, 8.0), (5.0, 7.0))
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tfpack.errors import TfpackError
from tfpack.params import (Constraint, InstanceOf, Integer, Options, Real, declare_fields,
                           validate_params)

__all__ = ["BatchRule", "for_packing", "packing_factor_of", "pack_depth_std_of"]

_CUTS = ("accumulation", "batch", "auto")


class _Plan(Constraint):
    """A plan (anything with ``metrics``: `PackingPlan`, pair plans) or its metrics dict;
    the factor inside is checked by `packing_factor_of`."""

    description = "a PackingPlan or its metrics dict"

    def holds(self, value) -> bool:
        return isinstance(value, dict) or hasattr(value, "metrics")

    def bad_values(self) -> list:
        return [object(), "2.0", None]


# A packing factor as `for_packing` and `packing_factor_of` take it.
PLAN_OR_FACTOR = [Real(1), _Plan()]
# A rule further than this from the recipe always says so in its note.
NOTE_THRESHOLD = 0.05


@declare_fields({
    "micro_batch_size": Integer(1), "accumulation_steps": Integer(1), "num_replicas": Integer(1),
    "packing_factor": Real(1), "target_sequences_per_update": Real(0, closed="neither"),
    "cut": Options(*_CUTS), "note": InstanceOf(str), "pack_depth_std": [None, Real(0)],
})
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
        note: why it is not the requested cut, or by how much it misses the
            recipe; never empty when the expected sequences per update differ
            from the recipe by more than 5%.
        pack_depth_std: standard deviation of the sequences per pack (known
            from a `PackingPlan`; ``None`` from a bare number).
    """

    micro_batch_size: int
    accumulation_steps: int
    num_replicas: int
    packing_factor: float
    target_sequences_per_update: float
    cut: str = "accumulation"
    note: str = ""
    pack_depth_std: float | None = None

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

    def expected_spread(self, balanced: bool = False) -> tuple[float, float] | None:
        """The sequences per update to expect: ``(low, high)``.

        ``balanced=False``: packs in random order; about 95% of updates fall
        in ``mean +- 2 * pack_depth_std * sqrt(packs_per_update)`` (``None``
        when the depth spread is unknown). ``balanced=True``: packs
        balanced in groups of ``packs_per_update`` (``tfpack.data.pack(...,
        balance=True, balance_size=rule.packs_per_update)``, ``tfpack pack
        --balance --batch-size`` that many) give every update one of the
        whole numbers next to the mean, ``ceil(mean) - 1`` to ``floor(mean) +
        1``: what balancing reaches on real lengths (a spread of at most 1;
        `tfpack.packing.balance` checks a tolerance of ``max(1, 2%)`` and
        reports a miss).
        """
        mean = self.sequences_per_update
        if balanced:
            return (float(math.ceil(mean) - 1), float(math.floor(mean) + 1))
        if self.pack_depth_std is None:
            return None
        slack = 2.0 * self.pack_depth_std * math.sqrt(self.packs_per_update)
        return (max(mean - slack, 0.0), mean + slack)

    def describe(self) -> str:
        """One line: packs and sequences per update, and the spread with and without balance.

        >>> for_packing(8, 2, packing_factor=2.0).describe()
        '8 packs x 1 step x 1 replica = 8 packs per update, 16 sequences on average (recipe 16); balanced batches: 15-17'
        """
        step = "step" if self.accumulation_steps == 1 else "steps"
        replica = "replica" if self.num_replicas == 1 else "replicas"
        def packs(n):
            return f"{n} pack" + ("" if n == 1 else "s")

        line = (f"{packs(self.micro_batch_size)} x {self.accumulation_steps} {step} x "
                f"{self.num_replicas} {replica} = {packs(self.packs_per_update)} per update, "
                f"{self.sequences_per_update:g} sequences on average "
                f"(recipe {self.target_sequences_per_update:g})")
        unbalanced = self.expected_spread()
        if unbalanced is not None:
            line += f"; unbalanced: {unbalanced[0]:.0f}-{unbalanced[1]:.0f} (95% of updates)"
        low, high = self.expected_spread(balanced=True)
        return line + f"; balanced batches: {low:.0f}-{high:.0f}"


def pack_depth_std_of(plan_or_factor: Any) -> float | None:
    """Standard deviation of the sequences per pack of a `PackingPlan` (else ``None``).

    >>> pack_depth_std_of(2.0) is None
    True
    """
    counts = getattr(plan_or_factor, "counts", None)
    strategies = getattr(plan_or_factor, "strategies", None)
    if counts is None or strategies is None or not sum(counts):
        return None
    depths = [len(s) for s in strategies]
    total = float(sum(counts))
    mean = sum(d * c for d, c in zip(depths, counts)) / total
    return math.sqrt(sum(c * (d - mean) ** 2 for d, c in zip(depths, counts)) / total)


@validate_params({"plan_or_factor": PLAN_OR_FACTOR})
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


@validate_params({
    "micro_batch_size": Integer(1), "accumulation_steps": Integer(1),
    "packing_factor": PLAN_OR_FACTOR,
    "num_replicas": Integer(1), "cut": Options(*_CUTS), "tolerance": Real(0),
})
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
            better, that cut is used and `BatchRule.note` says so. Whatever
            the cut, a rule more than 5% off the recipe says so in ``note``.

    Returns:
        A `BatchRule`; `relative_error` says how far rounding moved it,
        ``cut`` which cut was applied and ``note`` why, if not the requested one.
    """
    micro_batch_size, accumulation_steps = int(micro_batch_size), int(accumulation_steps)
    num_replicas = int(num_replicas)
    p = packing_factor_of(packing_factor)
    target = float(micro_batch_size * accumulation_steps * num_replicas)
    depth_std = pack_depth_std_of(packing_factor)

    def rule(kind, note=""):
        micro, steps = _cut(kind, micro_batch_size, accumulation_steps, p)
        return BatchRule(micro, steps, num_replicas, p, target, kind, note, depth_std)

    requested = rule(cut)
    if abs(requested.relative_error) <= tolerance:
        return _say_if_off(requested)
    alternatives = [rule(kind) for kind in ("accumulation", "batch", "auto") if kind != cut]
    best = min(alternatives, key=lambda r: abs(r.relative_error))
    if abs(best.relative_error) >= abs(requested.relative_error):
        # Nothing does better: the rounding error is the least possible.
        return _say_if_off(requested)
    what = {"accumulation": f"{accumulation_steps} accumulation step",
            "batch": f"micro-batch {micro_batch_size}"}.get(cut, "every pair")
    size = requested.accumulation_steps if cut == "accumulation" else requested.micro_batch_size
    unit = " step" if cut == "accumulation" else ""
    note = (f'cut="{cut}" cannot apply ({what} / packing factor {p:g} rounds to {size}{unit}: '
            f"{requested.sequences_per_update:g} sequences per update instead of {target:g}); "
            f'used cut="{best.cut}": {best.sequences_per_update:g} sequences per update')
    return dataclasses.replace(best, note=note)


def _say_if_off(rule: BatchRule) -> BatchRule:
    """``rule``, with a note when it is more than 5% off the recipe."""
    if abs(rule.relative_error) <= NOTE_THRESHOLD:
        return rule
    packs = rule.packs_per_update
    note = (f"{packs} pack{'s' if packs != 1 else ''} per update hold"
            f"{'s' if packs == 1 else ''} {rule.sequences_per_update:g} sequences on average, "
            f"not the {rule.target_sequences_per_update:g} of the recipe "
            f"({100 * rule.relative_error:+.0f}%): no whole number of packs per replica comes "
            "closer")
    return dataclasses.replace(rule, note=note)
