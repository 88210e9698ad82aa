"""The suite's own scheduling list names files that exist (a renamed heavy file would
silently lose its place at the front of `make test`)."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def test_every_heavy_file_first_exists():
    tree = ast.parse((TESTS / "conftest.py").read_text())
    (names,) = [ast.literal_eval(node.value) for node in tree.body
                if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["HEAVY_FILES_FIRST"]]
    assert names and len(set(names)) == len(names)
    missing = [n for n in names if not (TESTS.parent / n).is_file()]
    assert not missing, f"HEAVY_FILES_FIRST names files that do not exist: {missing}"


def test_test_files_have_distinct_names():
    """pytest imports test files outside packages by their base name: two of one
    name are an "import file mismatch" that stops the whole run."""
    files = [p for p in TESTS.rglob("test_*.py") if not (p.parent / "__init__.py").exists()]
    names = sorted(p.name for p in files)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"test files of the same name in different folders: {twice}"
