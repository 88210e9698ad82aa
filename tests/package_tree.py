"""The package's modules, read from its files (nothing imported)."""

import pathlib

TESTS = pathlib.Path(__file__).resolve().parent
ROOT = TESTS.parent


def package_modules():
    """`{"tfpack.x.y": path}` of every module of the package."""
    modules = {}
    for path in sorted((ROOT / "tfpack").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules
