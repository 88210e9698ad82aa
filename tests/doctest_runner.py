"""One runner for the docstring examples of every tfpack module.

Each `tests/<package>/test_<name>_doctests.py` runs the examples of the
modules of `tfpack.<package>` (its folder's mirror in the package), except
those of a deeper package that has a runner of its own;
`tests/test_top_level_doctests.py` runs the rest. So every module's examples
run in exactly one place, and a new module needs no list edited.
"""

import doctest
import importlib
import pathlib

from package_tree import TESTS, package_modules


def _package_of(runner):
    return ".".join(("tfpack",) + runner.parent.relative_to(TESTS).parts)


def _owner(module, packages):
    return max((p for p in packages if module == p or module.startswith(p + ".")),
               key=len)


def modules_for(runner):
    """The modules whose examples the runner file `runner` runs (every
    module but `__main__`s, which run a program when imported)."""
    runner = pathlib.Path(runner).resolve()
    packages = {_package_of(r) for r in TESTS.rglob("test_*doctests.py")}
    own = _package_of(runner)
    return [m for m in package_modules()
            if _owner(m, packages) == own and not m.endswith(".__main__")]


def run_examples(name):
    """Runs `name`'s docstring examples; fails naming the first that fails."""
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(module, name):
        report = []
        result = runner.run(test, out=report.append)
        assert result.failed == 0, "".join(report)
