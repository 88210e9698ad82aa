"""Packing planners: lengths -> histogram -> `PackingPlan` -> `Assignment`.

numpy and scipy only: importing `tfpack.packing` never imports TensorFlow.

Example:

>>> import numpy as np
>>> from tfpack import packing
>>> lengths = np.array([8, 3, 5, 3, 5])
>>> plan = packing.plan(packing.histogram(lengths, 8), max_length=8,
...                     max_sequences_per_pack=2, algorithm="lpfhp")
>>> plan.metrics["packs"], plan.metrics["efficiency"]
(3, 1.0)
>>> assignment = plan.assign(lengths, seed=0)
>>> sorted(lengths[assignment.pack(p)].tolist() for p in range(assignment.num_packs))
[[5, 3], [5, 3], [8]]
"""

from tfpack.packing.algorithms import names as algorithm_names
from tfpack.packing.assignment import Assignment, assign
from tfpack.packing.histograms import histogram, read_histogram
from tfpack.packing.pairs import PairPackingPlan
from tfpack.packing.placement import Placement, length_ranks, placement
from tfpack.packing.plans import PackingPlan, plan

__all__ = [
    "Assignment",
    "PackingPlan",
    "PairPackingPlan",
    "Placement",
    "algorithm_names",
    "assign",
    "histogram",
    "length_ranks",
    "placement",
    "plan",
    "read_histogram",
]
