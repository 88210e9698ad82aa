"""``ennlshp``: extended NNLS histogram packing, weighted by padding tokens (appendix S).

NNLS (``nnlshp``) treats a missing and a surplus sequence alike, though a
surplus (an unpacked sequence) costs far more padding. The extended problem
adds a slack ``r >= 0`` per length and a heavily weighted block forcing
``A x - b = r``, i.e. no sequence left out, while the residual of each length
``i`` weighs ``i`` (its padding tokens)::

    min || [ w A      0   ] [x]   [w b] ||
        || [ W A   -W I   ] [r] - [W b] ||     x, r >= 0,  w_i = i,  W = 1e6

``x`` is rounded up, so the mixture covers the histogram; any sequence still
left out gets a pack of its own. Much slower than ``nnlshp`` (a matrix twice
as tall) for a small gain; depth ``min(max_sequences_per_pack, 3)``.

Example:

>>> import numpy as np
>>> from tfpack.packing.algorithms.ennlshp import pack
>>> histogram = np.zeros(8, dtype=np.int64)
>>> histogram[[2, 4, 7]] = [2, 2, 1]
>>> result = pack(histogram, 8, 3, seed=0)
>>> sorted(zip(result.strategies, result.counts.tolist()))
[((5, 3), 2), ((8,), 1)]

References:
    M. M. Krell et al., "Efficient Sequence Packing without
    Cross-contamination", appendix S and listing 9.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from tfpack.packing.algorithms import base
from tfpack.packing.algorithms._nnls import MAX_DEPTH, problem, with_leftovers

COVER_WEIGHT = 1e6
# Mixture entries within this of an integer from above count as that integer.
ROUNDING_TOLERANCE = 1e-6


@base.register("ennlshp", depth_cap=MAX_DEPTH)
def pack(histogram: np.ndarray, max_length: int, max_sequences_per_pack: int | None, *, seed: int) -> base.AlgorithmResult:
    """Extended NNLS with padding-token weights, rounded up; deterministic."""
    strategies, matrix = problem(max_length, max_sequences_per_pack)
    weights = np.arange(1, max_length + 1, dtype=np.float64)
    identity = np.eye(max_length)
    system = np.block([
        [weights[:, None] * matrix, np.zeros((max_length, max_length))],
        [COVER_WEIGHT * matrix, -COVER_WEIGHT * identity],
    ])
    target = np.concatenate([weights * histogram, COVER_WEIGHT * histogram])
    solution, _ = scipy.optimize.nnls(system, target)
    mixture = solution[: len(strategies)]
    counts = np.ceil(mixture - ROUNDING_TOLERANCE).clip(min=0).astype(np.int64)
    strategies, counts = with_leftovers(histogram, strategies, matrix, counts)
    return base.AlgorithmResult(strategies, counts)
