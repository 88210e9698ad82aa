"""Imports the tests' processes refuse because nothing in them uses what they load.

A process that imports TensorFlow also imports JAX, scikit-learn and
matplotlib's pyplot whenever they are installed, as the test extras install
them: TensorFlow Lite's converter imports ``jax``, Keras's Orbax callback
imports ``jax`` (a JAX-only patch), Keras's scikit-learn wrappers import
``sklearn``, its image galleries ``matplotlib``, and keras-hub's presets
``kagglehub`` (``kaggle://`` handles; the tests load presets from folders).
Each catches the ImportError of a machine without them. The JAX subprocesses
block these outright (``jax_env.OPTIONAL_UNUSED``). Refusing the first four cut
``import tensorflow, tfpack.models, keras_hub`` from 5.0-5.7 to 3.3-3.5 CPU s
(3 runs each, 2 shared cores, 2026-11-29); the suite starts dozens of such
processes.

Only those importers are refused: a test or a script that imports ``jax``,
``sklearn`` or ``matplotlib`` itself gets it, and a module already imported
is never looked up again. tfpack's own code (``tfpack.plots``, Keras on JAX)
is unaffected. `install` puts the finder in this process (``conftest.py``);
`SITE` is a folder whose ``sitecustomize`` installs it in a subprocess that
has it on ``PYTHONPATH`` (`with_site`).
"""

import os
import pathlib
import sys

SITE = pathlib.Path(__file__).resolve().parent / "unused_imports_site"

# Importing module (prefix) -> the top-level package it imports for nothing here.
UNUSED = (
    ("tensorflow.lite.", "jax"),
    ("keras.src.callbacks.orbax_checkpoint", "jax"),
    ("keras.src.wrappers.", "sklearn"),
    ("keras.src.visualization.", "matplotlib"),
    ("keras_hub.src.utils.preset_utils", "kagglehub"),  # Kaggle preset handles
)


def _importer(frame) -> str:
    """The ``__name__`` of the first frame outside importlib's machinery."""
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


class RefuseUnused:
    """A `sys.meta_path` finder raising ModuleNotFoundError for `UNUSED`'s pairs.

    >>> finder = RefuseUnused()
    >>> finder.refuses("jax", "tensorflow.lite.python.util")
    True
    >>> finder.refuses("jax.numpy", "tfpack.layers.flash_attention")
    False
    """

    def refuses(self, name: str, importer: str) -> bool:
        root = name.partition(".")[0]
        return any(importer.startswith(prefix) and root == package
                   for prefix, package in UNUSED)

    def find_spec(self, name, path=None, target=None):
        importer = _importer(sys._getframe(1))
        if self.refuses(name, importer):
            raise ModuleNotFoundError(
                f"{name} is not imported for {importer} in tfpack's tests "
                f"(tests/unused_imports.py)", name=name)
        return None


def install() -> None:
    """Puts `RefuseUnused` first on `sys.meta_path` (once)."""
    # By name: the ``sitecustomize`` loads this file as a module of another name.
    if not any(type(f).__name__ == "RefuseUnused" for f in sys.meta_path):
        sys.meta_path.insert(0, RefuseUnused())


def with_site(paths: str | None) -> str:
    """A ``PYTHONPATH`` value: `SITE` first (once), then ``paths`` (kept as given).

    >>> with_site("src").split(os.pathsep) == [str(SITE), "src"]
    True
    >>> with_site(with_site(None)) == with_site(None) == str(SITE)
    True
    """
    rest = [p for p in (paths or "").split(os.pathsep) if p != str(SITE)] if paths else []
    return os.pathsep.join([str(SITE), *rest])
