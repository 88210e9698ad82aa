"""Where the test suite's CPU goes (issue 32: `make test` under 600 s on 2 cores).

Runs pytest as `make test` does, with the `tests/cpu_probe.py` plugin, and
writes the CPU seconds of every test file: the test process's own ("self",
every thread) and those of the subprocesses it waited for ("child"), with the
whole run's wall time and CPU seconds (this process's waited-for children:
pytest, its workers and everything they started). On CI's 2 cores the suite
is CPU-bound, so the total CPU over 2 is the floor of its wall time; per-test
wall times on a shared machine move 2-3x between runs, CPU seconds much less.

Run (about 25 minutes on an idle 2-core machine):

    .venv/bin/python benchmarks/suite_cpu.py                      # the whole suite, 3 workers (as make test)
    .venv/bin/python benchmarks/suite_cpu.py tests/models --workers 2 --output /tmp/models.md

Writes ``benchmarks/results/suite_cpu.md`` (or ``--output``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from results_file import write_results  # noqa: E402


def per_file(lines: list[dict]) -> dict[str, list[float]]:
    """``{file: [self, child, wall, tests]}`` summed over the probe's lines.

    >>> per_file([{"id": "tests/a.py::t1", "self": 1.0, "child": 2.0, "wall": 4.0},
    ...           {"id": "tests/a.py::t2", "self": 0.5, "child": 0.0, "wall": 1.0}])
    {'tests/a.py': [1.5, 2.0, 5.0, 2]}
    """
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for line in lines:
        row = files[line["id"].split("::", 1)[0]]
        row[0] += line["self"]
        row[1] += line["child"]
        row[2] += line["wall"]
        row[3] += 1
    return dict(files)


def table(files: dict[str, list[float]], top: int) -> str:
    rows = sorted(files.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    total = sum(v[0] + v[1] for v in files.values())
    out = ["| file | tests | CPU s (self + child) | share | wall s (summed) |",
           "|---|---|---|---|---|"]
    for name, (own, child, wall, tests) in rows[:top]:
        out.append(f"| `{name}` | {tests} | {own + child:.1f} ({own:.1f} + {child:.1f}) "
                   f"| {100 * (own + child) / total:.1f}% | {wall:.0f} |")
    rest = rows[top:]
    if rest:
        cpu = sum(v[0] + v[1] for _, v in rest)
        out.append(f"| {len(rest)} other files | {sum(v[3] for _, v in rest)} | {cpu:.1f} "
                   f"| {100 * cpu / total:.1f}% | {sum(v[2] for _, v in rest):.0f} |")
    return "\n".join(out)


def run(paths: list[str], workers: int, prefix: str, root=ROOT) -> tuple[int, float, float]:
    """Runs the tests from ``root``; ``(pytest's exit status, wall s, CPU s of
    everything it ran)``."""
    env = dict(os.environ, TFPACK_CPU_PROBE=prefix, CI=os.environ.get("CI", "true"),
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="",  # as `make test`
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests"),  # cpu_probe
                                                        os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "cpu_probe", "--dist", "loadfile",
               "--no-loadscope-reorder", "--durations=15", "-n", str(workers), *paths]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    status = subprocess.call(command, cwd=root, env=env)  # its report on our stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return status, wall, cpu


def main(argv=None, root=ROOT) -> list[dict]:
    """Runs and writes the table; returns the probe's lines (one a test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["tests"])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--output", default=str(HERE / "results" / "suite_cpu.md"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "cpu")
        status, wall, cpu = run(args.paths, args.workers, prefix, root)
        lines = [json.loads(line) for path in sorted(pathlib.Path(folder).glob("cpu_*.jsonl"))
                 for line in path.read_text().splitlines()]
    files = per_file(lines)
    tests = sum(v[0] + v[1] for v in files.values())
    command = " ".join(["python benchmarks/suite_cpu.py", *sys.argv[1:]])
    text = "\n".join([
        "# Where the test suite's CPU goes (`benchmarks/suite_cpu.py`)", "",
        f"`{command}` on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{time.strftime('%Y-%m-%d')}; pytest exit status {status}.", "",
        f"{len(lines)} tests in {wall:.0f} s wall; {cpu:.0f} CPU s in all "
        f"({cpu / max(wall, 1e-9):.2f} cores busy on average), {tests:.0f} of them inside "
        f"tests (the rest: start-up and collection in each worker). On 2 cores the "
        f"floor of the wall time is {cpu / 2:.0f} s.", "",
        table(files, args.top), ""])
    write_results(args.output, text)
    print(text)
    return lines


if __name__ == "__main__":
    main()
