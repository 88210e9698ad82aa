"""Positions per sequence of preference packs, checked against the model's position table.

Positions belong to each of a pair's two sequences, not to the packed item:
the rejected sequence's positions restart where the chosen one's started
(`tfpack.models.preference.split_pairs`), so a position table of 8 rows
serves pairs of two 6-token sequences. `tfpack.predict` checks
`positions_per_sequence` against the model's table (the shared prompt is
checked by `tfpack.training.layouts`).

Example:

>>> import numpy as np
>>> batch = {"sequence_ids": np.array([[1, 1, 1, 1, 1, 1]]),
...          "branch_ids": np.array([[0, 1, 1, 2, 2, 2]]),
...          "position_ids": np.arange(6)[None], "example_ids": np.array([[7]])}
>>> positions_per_sequence(batch).tolist()
[[0, 1, 2, 1, 2, 3]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["positions_per_sequence"]


def positions_per_sequence(batch: dict) -> np.ndarray:
    """Each token's position inside its own sequence: the pair's chosen or rejected one."""
    from tfpack.models.preference import split_pairs

    num_pairs = batch["example_ids"].shape[-1]
    _, positions = split_pairs(batch["sequence_ids"], batch["branch_ids"],
                               batch["position_ids"], num_pairs)
    return np.asarray(positions)
