"""Two-length packing: plans for (input, target) pairs of encoder-decoders.

`tfpack.packing.plan` dispatches here when ``max_length`` is a pair
``(Le, Ld)``; see `plans` for the plan object, `algorithms` for the planners
(``greedy``, ``ffd``, ``optimal``) and `bounds` for what proves a plan good.

>>> import numpy as np
>>> from tfpack.packing.pairs import plan_pairs
>>> counts = np.zeros((8, 4), dtype=np.int64); counts[5, 0] = 2; counts[1, 2] = 2
>>> plan_pairs(counts, (8, 4), 2, algorithm="ffd").metrics["packs"]
2
"""

from tfpack.packing.pairs.algorithms import names as algorithm_names
from tfpack.packing.pairs.plans import PairPackingPlan, plan_pairs

__all__ = ["PairPackingPlan", "algorithm_names", "plan_pairs"]
