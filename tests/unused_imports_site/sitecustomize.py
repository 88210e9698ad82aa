"""Installs `tests/unused_imports.py`'s finder in a test's subprocess.

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; the tests
put this folder there (``conftest.py`` for every subprocess that inherits the
environment, `unused_imports.with_site` where a test sets ``PYTHONPATH``).
The module is loaded from its file: ``tests/`` itself stays off the path.

It also makes the cyclic garbage collector run a young collection every
20,000 new container objects instead of 700 (and the older generations in
proportion), as the JAX subprocesses' ``no_tensorflow`` site does: importing
TensorFlow and tracing models allocate millions of objects that live on, and
each collection scanned them again. Nothing is computed differently. Four
subprocess-heavy files (export serving, Beam runners and pipeline): 54.9,
56.0, 57.4, 55.0 -> 50.5, 54.2, 56.1, 52.2 CPU s, interleaved, the same peak
memory (2026-11-29).

At exit it freezes what is left before Python's last collections, so the
interpreter's shutdown does not trace (and tear down object by object) the
millions of objects TensorFlow and the test's models hold: registered first,
the freeze runs after every other ``atexit`` handler (the last in, first out),
and only cyclic garbage is left to the operating system. `import tfpack.models,
keras_hub` and exit: 2.52-2.63 -> 1.77-1.83 user CPU s, interleaved (2026-11-29).

And the heavy packages are imported with the collector paused, then frozen
(`tests/paused_imports.py`).
"""

import atexit
import gc
import importlib.util
import pathlib

gc.set_threshold(20_000, 20, 50)
atexit.register(gc.freeze)



def _load(stem: str):
    """``tests/<stem>.py`` as a module of another name (``tests/`` stays off the path)."""
    spec = importlib.util.spec_from_file_location(
        f"_tfpack_tests_{stem}", pathlib.Path(__file__).resolve().parents[1] / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_load("unused_imports").install()
_load("paused_imports").install()
