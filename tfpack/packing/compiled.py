"""The planner's compiled kernels (`tfpack/packing/_kernels.c`), or one clear error when not built.

`tfpack.packing.algorithms._knapsack` (pricing, dominated lengths),
`tfpack.packing.algorithms._fit_decreasing` (best fit decreasing) and
`tfpack.packing.algorithms._groups` (`real_packs`) call it; nothing else
imports ``_kernels`` directly.
"""

from tfpack.errors import TfpackError

try:
    from tfpack.packing import _kernels as kernels
except ImportError as error:  # a source tree whose C extension was never built
    raise TfpackError("tfpack's compiled planner kernels (tfpack/packing/_kernels.c) are not "
                      "built: install tfpack with `pip install -e .` (or run `python setup.py "
                      f"build_ext --inplace`). Received: {error}") from None

__all__ = ["kernels"]
