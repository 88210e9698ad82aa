"""The `optimal` planner's time budget: a deadline every phase checks.

The clock is the CPU time of the calling thread (`time.thread_time`): on an
idle machine that is the wall time, and on a shared one the plan does not get
worse because other jobs took the cores (the Wikipedia-512 plan at depth 3
takes 0.4 s of CPU and 2 s of wall time at a load of 10 on 2 cores). Nor
because other threads of the same process are busy: a tf.data pipeline or a
training step beside the plan, or BLAS's threads spinning after a product
(`dot`), which the process's clock counted (up to 0.4 s of a 1 s plan at
L=16,384: session 16). Every phase of a plan runs on the calling thread
(HiGHS and the compiled kernels included). HiGHS gets the seconds left as
its own (wall) ``time_limit``, scaled by the wall time per CPU second seen
so far (`wall_left`).

Column generation, its LP solves (HiGHS's own ``time_limit``), dives and the
length-group path all ask the budget before each step; a phase that runs out
stops and hands back what it has (a plan, and a bound valid at any step), and
`OutOfTime` tells the caller that a solve was cut short::

    budget = Budget(1.0)          # one second from now; Budget(None): no limit
    phase = budget.share(0.5)     # half of what is left, for one phase
    while not phase.expired(): ...

A budget is never global: it is made per plan and passed down. Nor does
Python's cyclic garbage collector run inside one (`collector_paused`): its
full passes scan every object of the process, on the calling thread's clock.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time

import numpy as np


class OutOfTime(Exception):
    """An LP solve was stopped by the budget before it was optimal."""


class Budget:
    """A deadline ``seconds`` from now (``None``: none).

    Args:
        seconds: the CPU time allowed (of the calling thread), or ``None`` for no limit.
        clock: the clock (seconds); tests may pass their own.

    >>> Budget(None).left()
    inf
    >>> Budget(0.0).expired()
    True
    """

    def __init__(self, seconds: float | None, clock=time.thread_time):
        self._clock = clock
        self.end = math.inf if seconds is None else clock() + seconds
        self._started = clock(), time.perf_counter()

    @property
    def limited(self) -> bool:
        return self.end != math.inf

    def left(self) -> float:
        """Seconds left (``inf`` without a limit; never negative)."""
        return math.inf if not self.limited else max(0.0, self.end - self._clock())

    def wall_left(self) -> float:
        """`left` in wall seconds, at the wall time per CPU second seen so far (at least 1)."""
        cpu, wall = self._clock() - self._started[0], time.perf_counter() - self._started[1]
        return self.left() * max(1.0, wall / cpu if cpu > 0.05 else 1.0)

    def kernel_seconds(self) -> float:
        """`left` for a compiled kernel that reads the thread's CPU clock itself (at least 1 ns),
        or 0 (its "no limit") without a limit or on another clock (a counting clock of the
        tests, where the kernel ends by its own rules and the plan stays deterministic).

        >>> Budget(None).kernel_seconds(), Budget(1.0, clock=lambda: 0.0).kernel_seconds()
        (0.0, 0.0)
        """
        if not self.limited or self._clock is not time.thread_time:
            return 0.0
        return max(self.left(), 1e-9)

    def expired(self) -> bool:
        return self.limited and self._clock() >= self.end

    def spent(self) -> float:
        """Seconds since the first budget of this plan started (shares count from it too)."""
        return self._clock() - self._started[0]

    def past(self) -> float:
        """Seconds since this budget ended (0 while it runs, or without a limit)."""
        return 0.0 if not self.limited else max(0.0, self._clock() - self.end)

    def less(self, seconds: float) -> "Budget":
        """A budget ending ``seconds`` before this one, for work that must follow it.

        >>> Budget(1.0).less(1.0).expired()
        True
        """
        child = self.share(1.0)
        if child.limited:
            child.end = self.end - seconds
        return child

    def share(self, fraction: float) -> "Budget":
        """A budget ending after ``fraction`` of the time left (no limit stays none)."""
        child = Budget(None, self._clock)
        child._started = self._started
        if self.limited:
            child.end = self._clock() + fraction * self.left()
        return child


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off while a planner runs (as `timeit` does), then
    back as it was; usable as a decorator.

    A plan allocates hundreds of thousands of tuples and dicts (packs, plans), in no
    cycle, and every 700 allocations started a collection; a full one scans every
    object of the process. With TensorFlow imported (430,000 objects) one took 0.25 s
    of a 1 s plan (long-context 643/2, L=12,288 depth 6: 1.18 s of CPU), and 0.01-0.04 s
    in a process of numpy alone. Cycles made meanwhile (none of the planner's) are
    collected once it is back. Where the collector was off already, it stays off.

    >>> with collector_paused():
    ...     gc.isenabled()
    False
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def dot(a, b) -> float:
    """``a . b`` in float64, summed by numpy rather than BLAS.

    OpenBLAS runs a float dot product of more than 10,000 terms on its threads,
    which then spin for about 0.1 s of CPU waiting for more work. On long
    contexts (L and lengths past 10,000) the planner's dot products woke them
    several times a plan: CPU that no plan used, burnt on another core (at
    L=16,384 depth 4, the rounded-down LPs after a lift ran 1.7x slower on the
    process's clock). Integer products never reach BLAS: ``@`` stays for them.

    >>> dot(np.arange(4), np.full(4, 0.5))
    3.0
    """
    return float(np.multiply(a, b, dtype=np.float64).sum())
