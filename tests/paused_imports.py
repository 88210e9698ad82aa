"""The heavy packages imported with Python's cyclic garbage collector paused, then frozen.

Importing TensorFlow, Keras, keras-hub or JAX creates hundreds of thousands to a
million objects that live as long as the process, none of them garbage; the
collector scanned them over and over while they were made, and at every full
collection after. `tfpack.cli` pauses and freezes around its own TensorFlow
import. Here one `sys.meta_path` finder does the same for every process of the
tests (``conftest.py``, and the ``sitecustomize`` of `tests/unused_imports_site`
and `tests/no_tensorflow` in their subprocesses): the first import of a package
in `HEAVY` runs with the collector paused, and when the outermost such import
returns, collection resumes as it was and what the process holds is frozen out
of its scans (`gc.freeze`). Nothing is computed differently: a collection only
frees what is unreachable. With the sites' thresholds, ``import tensorflow,
keras_hub, tfpack.models``: 2.30-2.52 -> 2.05-2.40 CPU s (3 rounds, interleaved,
2026-11-29).

The finder only wraps the module's loader for that one import; it finds no
module itself, and it goes after `tests/unused_imports.py`'s refusals, which look
at the importing frame.
"""

import gc
import sys

HEAVY = frozenset({"tensorflow", "keras", "keras_hub", "jax", "apache_beam", "distributed",
                   "tfpack"})


class PauseCollector:
    """A `sys.meta_path` finder pausing the collector while a `HEAVY` package is imported.

    >>> import gc
    >>> pause = PauseCollector()
    >>> pause.enter(); gc.isenabled()
    False
    >>> pause.enter(); pause.leave(); gc.isenabled()
    False
    >>> pause.leave(); gc.isenabled()
    True
    """

    def __init__(self):
        self.depth = 0
        self.was_enabled = True

    def enter(self) -> None:
        if self.depth == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
        self.depth += 1

    def leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            if self.was_enabled:
                gc.enable()
            gc.freeze()

    def find_spec(self, name, path=None, target=None):
        if name not in HEAVY:
            return None
        spec = self._spec_from_the_rest(name, path, target)
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None or not hasattr(loader, "__dict__"):
            return spec

        def paused(module):
            del loader.exec_module  # the loader is as it was before this import
            self.enter()
            try:
                exec_module(module)
            finally:
                self.leave()

        loader.exec_module = paused
        return spec

    def _spec_from_the_rest(self, name, path, target):
        """The spec the finders after this one on `sys.meta_path` give, or None."""
        rest = sys.meta_path[sys.meta_path.index(self) + 1:]
        for finder in rest:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(name, path, target) if find_spec is not None else None
            if spec is not None:
                return spec
        return None


def install() -> None:
    """Puts `PauseCollector` on `sys.meta_path` (once), after the tests' refusals if present."""
    # By name: a ``sitecustomize`` loads this file as a module of another name.
    if any(type(f).__name__ == "PauseCollector" for f in sys.meta_path):
        return
    refusals = [i for i, f in enumerate(sys.meta_path) if type(f).__name__ == "RefuseUnused"]
    sys.meta_path.insert(refusals[0] + 1 if refusals else 0, PauseCollector())
