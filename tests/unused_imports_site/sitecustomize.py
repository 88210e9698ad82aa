"""Installs `tests/unused_imports.py`'s finder in a test's subprocess.

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; the tests
put this folder there (``conftest.py`` for every subprocess that inherits the
environment, `unused_imports.with_site` where a test sets ``PYTHONPATH``).
The module is loaded from its file: ``tests/`` itself stays off the path.
"""

import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location(
    "_tfpack_tests_unused_imports",
    pathlib.Path(__file__).resolve().parents[1] / "unused_imports.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_module.install()
