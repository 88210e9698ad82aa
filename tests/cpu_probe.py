"""A pytest plugin recording each test's CPU seconds (`benchmarks/suite_cpu.py`).

Loaded with ``-p cpu_probe`` (``tests/`` on ``PYTHONPATH``) and
``TFPACK_CPU_PROBE`` set to a path prefix; each process (an xdist worker or
the single process) appends one JSON line a test to ``PREFIX_<worker>.jsonl``:
``{"id", "self", "child", "wall"}``, where ``self`` is the CPU time of the
test's process (every thread) and ``child`` that of the subprocesses it waited
for during the test. Module and session fixtures count in the first test that
uses them. Without ``TFPACK_CPU_PROBE`` the plugin records nothing.

The suite is CPU-bound on CI's 2 cores, so CPU seconds, not wall time, say
which tests to make cheaper; wall time on a shared machine moves 2-3x between
runs.
"""

import json
import os
import resource
import time

import pytest


def _cpu_seconds() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime,
            children.ru_utime + children.ru_stime)


class _Probe:
    def __init__(self, prefix: str):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.path = f"{prefix}_{worker}.jsonl"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        own, children = _cpu_seconds()
        started = time.perf_counter()
        yield
        own_after, children_after = _cpu_seconds()
        line = {"id": item.nodeid, "self": own_after - own,
                "child": children_after - children,
                "wall": time.perf_counter() - started}
        with open(self.path, "a") as out:
            out.write(json.dumps(line) + "\n")


def pytest_configure(config):
    prefix = os.environ.get("TFPACK_CPU_PROBE")
    if prefix:
        config.pluginmanager.register(_Probe(prefix), "tfpack_cpu_probe")
