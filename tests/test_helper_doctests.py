"""The docstring examples of the suite's own helper modules run as written
(`tests/doctest_runner.py` runs the package's): a helper's example is the
first thing a reader of a test trusts."""

import pathlib

import pytest

from doctest_runner import run_examples

TESTS = pathlib.Path(__file__).resolve().parent
# Helpers (not test files, not the package) whose docstrings hold examples.
HELPERS = sorted(
    ".".join(path.relative_to(TESTS).with_suffix("").parts)
    for path in TESTS.rglob("*.py")
    if not path.name.startswith(("test_", "conftest")) and ">>>" in path.read_text()
    and "__pycache__" not in path.parts and path.name != "doctest_runner.py")


def test_the_helpers_with_examples_are_found():
    assert {"jax_env", "open_trace", "faults.campaign"} <= set(HELPERS)


@pytest.mark.parametrize("name", HELPERS)
def test_docstring_examples(name):
    run_examples(name)
