"""``nnlshp``: non-negative least squares histogram packing (section 3.1.2, F.4).

Lists every strategy of at most 3 sequences that fills a pack exactly (22,102
for ``max_length`` 512), solves the weighted problem
``min ||w (A x - b)||  s.t.  x >= 0`` with `scipy.optimize.nnls`, rounds ``x``
to the nearest integers and gives each sequence the rounded mixture leaves
out a pack of its own. Residuals on lengths up to 8 weigh 0.09, the others 1
(F.4.5): a deficit of short sequences costs little padding. Reaches 99.746%
efficiency on Wikipedia-512. The depth is ``min(max_sequences_per_pack, 3)``: depth 4
already has ~940K strategies at length 512.

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms.nnlshp import pack
>>> histogram = np.zeros(8, dtype=np.int64)
>>> histogram[[2, 4, 7]] = [2, 2, 1]  # two 3s, two 5s, one 8
>>> result = pack(histogram, 8, 3, seed=0)
>>> sorted(zip(result.strategies, result.counts.tolist()))
[((5, 3), 2), ((8,), 1)]

References:
    M. M. Krell et al., "Efficient Sequence Packing without
    Cross-contamination", section 3.1.2, appendix F.4 and listing 2.
    C. L. Lawson, R. J. Hanson, "Solving Least Squares Problems" (1974).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from tfpack.packing.algorithms import base
from tfpack.packing.algorithms._nnls import MAX_DEPTH, problem, with_leftovers

WEIGHT_OFFSET = 8  # lengths up to this ...
SHORT_WEIGHT = 0.09  # ... weigh this much in the residual


@base.register("nnlshp", depth_cap=MAX_DEPTH)
def pack(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, seed: int) -> base.AlgorithmResult:
    """Weighted NNLS mixture of exact-fill strategies, rounded; deterministic."""
    strategies, matrix = problem(max_length, max_sequences_per_pack)
    weights = np.ones(max_length)
    weights[:WEIGHT_OFFSET] = SHORT_WEIGHT
    mixture, _ = scipy.optimize.nnls(weights[:, None] * matrix, weights * histogram)
    counts = np.rint(mixture).astype(np.int64)
    strategies, counts = with_leftovers(histogram, strategies, matrix, counts)
    return base.AlgorithmResult(strategies, counts)
