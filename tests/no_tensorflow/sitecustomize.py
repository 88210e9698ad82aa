"""Blocks TensorFlow in the tests' JAX subprocesses.

`tests/jax_env.py` puts this folder first on ``PYTHONPATH``; Python imports
``sitecustomize`` at start-up, before the check's own code, so there
``import tensorflow`` (and anything that imports it) raises ImportError. The
checks thereby prove that Keras on JAX needs no TensorFlow (an accelerator
machine may have none), and they skip its import (seconds of CPU each).

Python imports only the first ``sitecustomize`` on the path, so this one also
installs `tests/unused_imports.py`'s finder (Keras's scikit-learn wrappers and
image galleries, imported for nothing), as ``unused_imports_site`` does.
"""

import importlib.util
import pathlib
import sys

sys.modules["tensorflow"] = None

_spec = importlib.util.spec_from_file_location(
    "_tfpack_tests_unused_imports",
    pathlib.Path(__file__).resolve().parents[1] / "unused_imports.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
_module.install()
