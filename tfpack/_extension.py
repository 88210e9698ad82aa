"""tfpack's C extensions, each loaded by name, or one clear error when it is not built.

`tfpack.formats.compiled` (``_wire``) and `tfpack.packing.compiled`
(``_kernels``) load theirs here, so a source tree that was never built says
how to build it in one line instead of an ImportError traceback.

Example:

>>> from tfpack import _extension
>>> _extension.load("tfpack.formats._wire", "tfpack/formats/_wire.c", "record formats").__name__
'tfpack.formats._wire'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from tfpack.errors import TfpackError

__all__ = ["load"]


def load(module: str, source: str, what: str) -> ModuleType:
    """Import the extension ``module`` built from ``source`` (serving ``what``)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise TfpackError(
            f"tfpack's C extension {source} ({what}) is not built: install tfpack with "
            f"`pip install -e .` (or run `python setup.py build_ext --inplace`). "
            f"Received: {error}"
        ) from None
