"""Stored `optimal` plans: the cases, a deterministic clock, and the file's reader and writer.

`test_optimal_plans.py` checks that `optimal` still returns, byte for byte, the
plans stored in ``optimal_plans.json`` (written by the 1,050-line `optimal.py`
of 6f424c4, before it was split into modules: issue 32). A plan is stored as
the SHA-256 of its strategies and counts (canonical JSON), with its packs, its
number of strategies, its bound and the bound's kind (readable in a diff); the
plans themselves come back by running this file on 6f424c4 (with
``PYTHONPATH=.``, so that it imports this tree's tfpack). Three were written
again on purpose when the rounded-down grouped LP started to run first where
best fit is over 1% above the simple bounds (issue 35, `Tuning.PROVE_ABOVE`,
with `Tuning.PROVE_SHARE` of the time): lognormal-2048-d16 274,980 packs as
before (another plan), zipf-2048-d32 224,848 -> 224,857, spikes-8192-d8
401,280 -> 401,290 (that LP proved nothing above the token bound there and took
time from the plan); the others are still 6f424c4's. Three more on 2026-11-30 (session
20), when the exact fill (full packs first) was compiled and asks the budget every 64
checks instead of at each: on the counting clock the budget then ends later, and
lognormal-2048-d16 274,980 -> 274,977 packs, zipf-2048-d32 224,857 -> 224,854,
windows-8192-d4-timed 92,069 as before (other strategies).

`optimal` is budget-driven by CPU time, so a plan under ``time_limit=1`` depends
on how fast the machine ran. Two kinds of case make it deterministic:

- ``time_limit=None``: no budget at all, so no clock is read for any decision
  (cases that converge in well under a second);
- ``time_limit`` with a *counting clock* (`CountingClock`): every reading of the
  CPU clock by the budget (`_budget.Budget`) returns ``ticks * tick`` and counts
  one tick, and HiGHS gets no wall-clock limit (`Budget.wall_left` is infinite).
  A plan is then a function of the sequence of budget checks, which is the same
  on any machine and under any load, and which a mechanical refactor keeps.
  These cases run the budget-driven paths (length groups, full packs first,
  refinement, repair, the budget running out mid column generation) as the
  suite does at ``time_limit=1``.

A plan also depends on the last bits of the LP's and NNLS's arithmetic, and
OpenBLAS picks its kernels by CPU: the same code gave other strategies (same
packs) for 4 cases on an AMD EPYC (OpenBLAS's Haswell kernels) than on the
Intel machine that wrote them (SkylakeX). So the plans are made and checked in
a subprocess with the kernels pinned (`PINNED`, ``OPENBLAS_CORETYPE=Haswell``:
any x86-64 CPU with AVX2 runs them); `run_pinned` skips elsewhere. The file
was written again that way on 2026-11-29 (those 4 cases changed strategies,
not packs; the rest are the same bytes).

Regenerate (only when a plan is meant to change, and say why in the commit):

    PYTHONPATH=. .venv/bin/python tests/packing/optimal_plans.py --write
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "optimal_plans.json"

# (name, family, L, depth, sequences, seed, time_limit, tick): tick None: no clock.
# Families as in benchmarks/planners_suite.py; each case chosen for a path of `optimal`.
CASES = [
    ("tiny", "tiny", 8, 3, 0, 0, None, None),
    ("one-a-pack", "lognormal", 512, 1, 10_000, 0, None, None),
    ("pairs", "lognormal", 2048, 2, 100_000, 1, None, None),
    ("lp-512-d4", "lognormal", 512, 4, 100_000, 0, None, None),
    ("lp-512-uniform-d3", "uniform", 512, 3, 10_000, 8, None, None),
    ("lp-512-zipf-d8", "zipf", 512, 8, 1_000_000, 2, None, None),
    ("lp-2048-bimodal-d6", "bimodal", 2048, 6, 30_000, 3, None, None),
    # Budget-driven, on the counting clock: ticks of 3 ms, so that a "second" (333 budget
    # checks) takes 0.3-0.5 s of CPU and the budget ends these runs as it does the suite's.
    ("lognormal-2048-d16", "lognormal", 2048, 16, 1_000_000, 1, 1.0, 3e-3),
    ("zipf-2048-d32", "zipf", 2048, 32, 1_000_000, 2, 1.0, 3e-3),
    ("lognormal-8192-d16", "lognormal", 8192, 16, 1_000_000, 4, 1.0, 3e-3),
    ("spikes-8192-d8", "spikes", 8192, 8, 1_000_000, 6, 1.0, 3e-3),
    ("bimodal-8192-d24", "bimodal", 8192, 24, 100_000, 9, 1.0, 3e-3),
    ("windows-8192-d4-timed", "windows", 8192, 4, 100_000, 5, 1.0, 3e-3),
    ("lognormal-32768-d16", "lognormal", 32768, 16, 1_000_000, 7, 1.0, 1e-2),
    ("lognormal-512-d4-short", "lognormal", 512, 4, 100_000, 0, 0.05, 1e-3),
]


def histogram_of(family: str, max_length: int, sequences: int, seed: int) -> np.ndarray:
    """The case's histogram (`benchmarks/planners_suite.generated`, or the tiny example)."""
    if family == "tiny":
        histogram = np.zeros(max_length, dtype=np.int64)
        histogram[[1, 2, 4, 5]] = [3, 1, 1, 2]
        return histogram
    sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))
    import planners_suite  # noqa: PLC0415

    return planners_suite.generated(family, max_length, sequences, np.random.default_rng(seed))


class CountingClock:
    """A CPU clock that advances ``tick`` seconds each time it is read."""

    def __init__(self, tick: float) -> None:
        self.tick, self.ticks = tick, 0

    def __call__(self) -> float:
        self.ticks += 1
        return self.ticks * self.tick


@contextlib.contextmanager
def counting_clock(tick: float | None):
    """Every new `_budget.Budget` reads a `CountingClock`; HiGHS gets no wall limit."""
    from tfpack.packing.algorithms import _budget  # noqa: PLC0415

    if tick is None:
        yield None
        return
    clock = CountingClock(tick)
    defaults, wall_left = _budget.Budget.__init__.__defaults__, _budget.Budget.wall_left
    _budget.Budget.__init__.__defaults__ = (clock,)
    _budget.Budget.wall_left = lambda self: math.inf
    try:
        yield clock
    finally:
        _budget.Budget.__init__.__defaults__ = defaults
        _budget.Budget.wall_left = wall_left


def run(case) -> dict:
    """`optimal.pack` on ``case``: strategies, counts, bound and its kind (JSON-ready)."""
    from tfpack.packing.algorithms import optimal  # noqa: PLC0415

    name, family, max_length, depth, sequences, seed, time_limit, tick = case
    histogram = histogram_of(family, max_length, sequences, seed)
    with counting_clock(tick):
        result = optimal.pack(histogram, max_length, depth, seed=0, time_limit=time_limit)
    plan = json.dumps([[list(s) for s in result.strategies], result.counts.tolist()],
                      separators=(",", ":"))
    return dict(name=name, sha256=hashlib.sha256(plan.encode()).hexdigest(),
                packs=int(result.counts.sum()), strategies=len(result.strategies),
                lower_bound_packs=int(result.lower_bound_packs),
                lower_bound_kind=result.lower_bound_kind)


def load() -> dict[str, dict]:
    return {plan["name"]: plan for plan in json.loads(DATA.read_text())}


# OpenBLAS's kernels for every plan made or checked here (see the module docstring).
PINNED = {"OPENBLAS_CORETYPE": "Haswell"}


def pinning_skip_reason() -> str | None:
    """Why `PINNED` cannot run on this machine, or None where it can."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"OpenBLAS's Haswell kernels need x86-64, not {platform.machine()}"
    try:
        flags = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return "no /proc/cpuinfo to tell whether the CPU has AVX2"
    return None if " avx2" in flags else "the CPU has no AVX2 for OpenBLAS's Haswell kernels"


def run_pinned(cases) -> list[dict]:
    """`run` on each of ``cases`` in a subprocess with `PINNED` kernels."""
    root = HERE.parents[1]
    env = dict(os.environ, **PINNED,
               PYTHONPATH=os.pathsep.join([str(root)] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    done = subprocess.run([sys.executable, __file__, "--run"], input=json.dumps(cases), env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"pinned run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def main(argv) -> None:
    if argv == ["--run"]:  # the subprocess of `run_pinned`
        if os.environ.get("OPENBLAS_CORETYPE") != PINNED["OPENBLAS_CORETYPE"]:
            sys.exit(f"OPENBLAS_CORETYPE is {os.environ.get('OPENBLAS_CORETYPE')!r}, not pinned")
        print(json.dumps([run(case) for case in json.loads(sys.stdin.read())]))
    elif argv == ["--write"]:
        reason = pinning_skip_reason()
        if reason:
            sys.exit(f"cannot write the stored plans here: {reason}")
        plans = run_pinned(CASES)
        DATA.write_text("[\n" + ",\n".join(json.dumps(plan) for plan in plans) + "\n]\n")
    else:
        sys.exit("usage: optimal_plans.py --write")


if __name__ == "__main__":
    main(sys.argv[1:])
