"""Realized speed-up of packed over unpacked training, measured so that it can be trusted.

One timing of each run is noise on a shared machine (a demo once showed 1.92x
against an upper bound of 1.65x). `measure_speedup` takes two trainers that
have already run (so tracing and XLA compilation are behind them: the
warm-up), then alternates short timed rounds of each, ``rounds`` times, and
reports the median ratio of real tokens per second with its spread. A median
above the plan's upper bound cannot be a real effect: `SpeedupResult.value`
is then `None` and ``label`` says it is noise.

Example:

>>> from tfpack.training.speed import SpeedupResult
>>> result = SpeedupResult(ratios=(1.31, 1.36, 1.34), upper_bound=1.65)
>>> result.median, result.value, result.label
(1.34, 1.34, 'realized speed-up 1.340x (median of 3 interleaved rounds, spread 1.310-1.360; upper bound 1.650x)')
>>> SpeedupResult(ratios=(1.9, 1.7, 2.0), upper_bound=1.65).value is None
True
"""

from __future__ import annotations

import dataclasses
import statistics

from tfpack.errors import TfpackError

__all__ = ["SpeedupResult", "measure_speedup"]


@dataclasses.dataclass(frozen=True)
class SpeedupResult:
    """Packed / unpacked real tokens per second over interleaved rounds.

    Attributes:
        ratios: one ratio per round.
        upper_bound: the plan's ``speedup_upper_bound`` (or `None`).
    """

    ratios: tuple
    upper_bound: float | None = None

    @property
    def median(self) -> float:
        return float(statistics.median(self.ratios))

    @property
    def spread(self) -> tuple:
        """``(min, max)`` of the rounds."""
        return (float(min(self.ratios)), float(max(self.ratios)))

    @property
    def is_noise(self) -> bool:
        """The median exceeds the upper bound: no packing gain can explain it."""
        return self.upper_bound is not None and self.median > self.upper_bound

    @property
    def value(self) -> float | None:
        """The median, or `None` when it is noise."""
        return None if self.is_noise else self.median

    @property
    def label(self) -> str:
        low, high = self.spread
        bound = "" if self.upper_bound is None else f"; upper bound {self.upper_bound:.3f}x"
        text = (f"{self.median:.3f}x (median of {len(self.ratios)} interleaved rounds, "
                f"spread {low:.3f}-{high:.3f}{bound})")
        if self.is_noise:
            return f"timing noise, not a result: {text} is above the upper bound"
        return f"realized speed-up {text}"


def _tokens_per_second(trainer, dataset, steps: int) -> float:
    start = int(trainer.step.numpy())
    history = trainer.fit(dataset, start + steps).history
    seconds = sum(r["seconds"] for r in history)
    return sum(r["real_tokens"] for r in history) / max(seconds, 1e-9)


def measure_speedup(packed, unpacked, datasets: dict, *, rounds: int = 5,
                    steps_per_round: int = 2, upper_bound: float | None = None
                    ) -> SpeedupResult:
    """Interleave timed rounds of two warmed-up `Trainer`s (they keep training).

    Args:
        packed, unpacked: `tfpack.training.Trainer`s that have run ``fit``
            at least once (compiled).
        datasets: ``{"packed": ..., "unpacked": ...}``, the datasets their
            first ``fit`` used (their streams continue).
        rounds: timed rounds of each (odd, so the median is one round).
        steps_per_round: updates per round and trainer.
        upper_bound: the plan's ``speedup_upper_bound``.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise TfpackError(f"`rounds` must be a positive integer. Received: rounds={rounds!r}")
    ratios = []
    for _ in range(rounds):
        slow = _tokens_per_second(unpacked, datasets["unpacked"], steps_per_round)
        fast = _tokens_per_second(packed, datasets["packed"], steps_per_round)
        ratios.append(fast / slow)
    return SpeedupResult(tuple(ratios), upper_bound)
