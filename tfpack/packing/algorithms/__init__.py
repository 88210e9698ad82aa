"""Packing algorithms, one module each, registered by name in `base`.

Importing this package registers every algorithm: ``none``, ``greedy``,
``ffd``, ``bfd``, ``spfhp``, ``lpfhp``, ``nnlshp``, ``ennlshp``, ``optimal``.

Example:

>>> from tfpack.packing import algorithms
>>> "spfhp" in algorithms.names()
True
"""

from tfpack.packing.algorithms import (  # noqa: F401  (imported to register)
    bfd,
    ennlshp,
    ffd,
    greedy,
    lpfhp,
    nnlshp,
    none,
    optimal,
    spfhp,
)
from tfpack.packing.algorithms.base import AlgorithmResult, get, names, register

__all__ = ["AlgorithmResult", "get", "names", "register"]
