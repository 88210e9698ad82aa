"""The planner's compiled kernels (`tfpack/packing/_kernels.c`), or one clear error when not built.

`tfpack.packing.algorithms._knapsack` (pricing, dominated lengths),
`tfpack.packing.algorithms._exact_fill` (full packs first),
`tfpack.packing.algorithms._fit_decreasing` (best fit decreasing) and
`tfpack.packing.algorithms._groups` (`real_packs`) and
`tfpack.packing.pairs._dot` (the dot-product fill), `._settle` and `.checks` (a plan's
strategies checked) and `tfpack.packing.algorithms._spread_settle` (the same settling on one
length) call it; nothing else
imports ``_kernels`` directly.
"""

from tfpack import _extension

kernels = _extension.load("tfpack.packing._kernels", "tfpack/packing/_kernels.c", "the planner kernels")

__all__ = ["kernels"]
