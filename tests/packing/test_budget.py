"""The planner's budget counts the CPU time of its own thread, and the planner wakes no other."""

import gc
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tfpack import packing
from tfpack.packing import plans as packing_plans
from tfpack.packing.algorithms import _budget, _fit_decreasing, optimal
from tfpack.packing.pairs import algorithms as pair_algorithms
from tfpack.packing.pairs import plans as pair_plans


def _burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_other_threads_of_the_process_do_not_spend_a_plans_budget():
    # A tf.data pipeline or a training step beside the plan, or BLAS's threads spinning:
    # the process's clock counted their CPU as the plan's.
    budget = _budget.Budget(1.0)
    burner = threading.Thread(target=_burn, args=(0.3,))
    burner.start()
    burner.join()  # 0.3 s of CPU on another thread, none on this one
    assert budget.spent() < 0.05
    assert budget.left() > 0.95


def test_the_budget_counts_this_threads_work():
    budget = _budget.Budget(1.0)
    start = time.thread_time()
    while time.thread_time() - start < 0.1:  # 0.1 s of this thread's CPU
        pass
    assert 0.1 <= budget.spent() < 0.2
    assert budget.left() <= 0.9


_OTHER_THREADS = """
import time
import numpy as np
from tfpack.packing.algorithms import optimal

rng = np.random.default_rng(0)  # documents of about L / 3 at L=16,384: over 10,000 lengths present
lengths = np.clip(np.rint(16384 * 0.35 * np.exp(0.3 * rng.standard_normal(600_000))), 1, 16384)
histogram = np.bincount(lengths.astype(np.int64) - 1, minlength=16384).astype(np.int64)
assert np.count_nonzero(histogram) > 10_000
small = np.zeros(64, dtype=np.int64)
small[[9, 20, 40]] = [5, 7, 3]
optimal.pack(small, 64, 4, seed=0, time_limit=0.2)  # HiGHS starts its own threads once
time.sleep(0.3)  # whatever the imports left spinning stops
process, thread = time.process_time(), time.thread_time()
result = optimal.pack(histogram, 16384, 4, seed=0, time_limit=0.5)
assert result.lower_bound_packs <= result.counts.sum()
print((time.process_time() - process) - (time.thread_time() - thread))
"""


def test_a_long_context_plan_leaves_the_other_threads_idle():
    # A float dot product of over 10,000 terms runs on OpenBLAS's threads, which then spin
    # for ~0.1 s of CPU: up to 0.4 s of a 1 s plan burnt on another core (session 16). In a
    # fresh process: no thread an earlier test started (tf.data, JAX) runs beside it.
    others = subprocess.run([sys.executable, "-c", _OTHER_THREADS], check=True,
                            capture_output=True, text=True).stdout
    assert float(others) < 0.05


def test_the_collector_is_paused_inside_and_back_as_it_was_after():
    assert gc.isenabled()
    with _budget.collector_paused():
        assert not gc.isenabled()
        with _budget.collector_paused():  # nested: still off, and off after the inner one
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError):
        with _budget.collector_paused():
            1 / 0
    assert gc.isenabled()  # back after an error too
    gc.disable()
    try:
        with _budget.collector_paused():
            pass
        assert not gc.isenabled()  # the caller's choice stands
    finally:
        gc.enable()


def test_plans_run_with_the_collector_paused(monkeypatch):
    # A full collection scans every object of the process (with TensorFlow imported, 0.25 s
    # of a 1 s plan): the one-length and two-length planners, and the checks after them.
    seen = []
    _record(monkeypatch, _fit_decreasing, "packs", seen)
    histogram = np.zeros(64, dtype=np.int64)
    histogram[[9, 20, 40, 63]] = [30, 20, 10, 5]
    optimal.pack(histogram, 64, 4, seed=0, time_limit=1.0)
    _record(monkeypatch, packing_plans, "check_plan", seen)
    packing.plan(histogram, 64, 4, algorithm="optimal", time_limit=1.0)
    pairs = np.zeros((16, 8), dtype=np.int64)
    pairs[[3, 9, 15], [1, 5, 7]] = [20, 10, 5]
    _record(monkeypatch, pair_plans, "check_pair_plan", seen)
    _record(monkeypatch, pair_algorithms.bounds, "simple", seen)
    pair_algorithms.get("optimal")(pairs, (16, 8, 4), seed=0, time_limit=1.0)
    assert seen and not any(seen)
    seen.clear()
    packing.plan(pairs, (16, 8), 4, algorithm="optimal", time_limit=1.0)
    assert len(seen) >= 2 and not any(seen)
    assert gc.isenabled()


def _record(monkeypatch, module, name, seen):
    """``module.name`` appends whether the collector runs to ``seen`` at each call."""
    function = getattr(module, name)

    def call(*args, **kwargs):
        seen.append(gc.isenabled())
        return function(*args, **kwargs)
    monkeypatch.setattr(module, name, call)
