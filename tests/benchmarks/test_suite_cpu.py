"""`benchmarks/suite_cpu.py` and the `tests/cpu_probe.py` plugin it loads.

One pytest run (one xdist worker) over a generated file of three tests: one
burning CPU in its own process, one waiting for a subprocess that burns CPU,
one idle. The probe must put each test's CPU on the side that spent it, and
the table must count the file's tests and CPU.
"""

import doctest
import pathlib
import re
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import suite_cpu  # noqa: E402

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
TESTS = f'''
import subprocess, sys

def test_burns_here():
{"".join("    " + line + chr(10) for line in BURN.splitlines())}
def test_burns_in_a_child():
    subprocess.run([sys.executable, "-c", {BURN!r}], check=True)

def test_idle():
    pass
'''


def test_the_probe_puts_cpu_on_the_side_that_spent_it(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_burn.py").write_text(TESTS)
    output = tmp_path / "suite_cpu.md"
    lines = suite_cpu.main(["tests", "--workers", "1", "--output", str(output)], root=tmp_path)
    by_name = {line["id"].split("::")[1]: line for line in lines}
    assert set(by_name) == {"test_burns_here", "test_burns_in_a_child", "test_idle"}
    assert by_name["test_burns_here"]["self"] >= 0.6
    assert by_name["test_burns_here"]["child"] < 0.1
    assert by_name["test_burns_in_a_child"]["child"] >= 0.6
    assert by_name["test_burns_in_a_child"]["self"] < 0.3
    assert by_name["test_idle"]["self"] + by_name["test_idle"]["child"] < 0.1
    text = output.read_text()
    assert "3 tests in" in text and "pytest exit status 0" in text
    cpu = float(re.search(r"\| `tests/test_burn.py` \| 3 \| ([0-9.]+) ", text).group(1))
    assert cpu >= 1.2


def test_examples():
    assert doctest.testmod(suite_cpu).failed == 0
