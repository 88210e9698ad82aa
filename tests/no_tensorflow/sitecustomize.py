"""Blocks TensorFlow, and optional packages nothing there uses, in the tests' JAX subprocesses.

`tests/jax_env.py` puts this folder first on ``PYTHONPATH`` and names the
modules in ``TFPACK_TESTS_BLOCKED`` (space-separated; TensorFlow alone where
it is unset). Python imports ``sitecustomize`` at start-up, before the check's
own code, so there ``import tensorflow`` (and anything that imports it) raises
ImportError. The checks thereby prove that Keras on JAX needs no TensorFlow
(an accelerator machine may have none), and they skip its import (seconds of
CPU each).

The optional packages (`jax_env.OPTIONAL_UNUSED`) are ones Keras and
keras-hub import at start-up inside ``try: ... except ImportError`` and use
only in features no check calls (Keras's scikit-learn wrappers and image
plots, keras-hub's preset downloads): blocked, they cost nothing (about
1.3 of 3.1 CPU s of ``import jax, keras, keras_hub`` here).

The cyclic garbage collector runs a young collection every 20,000 new
container objects instead of 700 (and the older generations in proportion):
tracing keras-hub models under JAX allocates millions of objects that live
until the family is done, and each of ~1,000 collections scanned the
survivors again (4 flash families: 1.0 of 11 CPU s in the collector, 0.3
with this; the peak memory was the same, 495 MB). Nothing is computed
differently: a collection only frees what is unreachable.

At exit it freezes what is left, as `tests/unused_imports_site` does: the
shutdown then skips tracing and tearing down what JAX, Keras and the check's
models hold (about 0.8 CPU s a process; the freeze runs after every other
``atexit`` handler, registered first). Its heavy packages are imported with the
collector paused, then frozen (`tests/paused_imports.py`).
"""

import atexit
import gc
import importlib.util
import os
import pathlib
import sys

gc.set_threshold(20_000, 20, 50)
atexit.register(gc.freeze)

for _name in os.environ.get("TFPACK_TESTS_BLOCKED", "tensorflow").split():
    sys.modules[_name] = None

_spec = importlib.util.spec_from_file_location(
    "_tfpack_tests_paused_imports", pathlib.Path(__file__).resolve().parents[1] / "paused_imports.py")
_paused = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_paused)
_paused.install()
