"""``none``: no packing, one sequence per pack (the padded baseline).

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms.none import pack
>>> pack(np.array([2, 0, 1]), 3, None, seed=0).strategies
[(1,), (3,)]
"""

from __future__ import annotations

import numpy as np

from tfpack.packing.algorithms import base


@base.register("none")
def pack(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, seed: int) -> base.AlgorithmResult:
    """Each sequence alone in its pack."""
    lengths = np.flatnonzero(histogram) + 1
    return base.AlgorithmResult([(int(n),) for n in lengths], histogram[lengths - 1])
