"""A shared prompt in preference packs, checked against the model that reads them.

A pair is one packed item (`tfpack.tasks.preference`); a shared prompt
(``preference_examples(share_prompt=True)``) is stored as real tokens of
``branch_ids`` 0, and only a ``PreferenceModel(share_prompt=True)`` lets both
responses see them (another model scores each response without its prompt:
wrong log-likelihoods, without a word). A pair whose prompt is one token has
no such tokens and reads the same either way.

`tfpack.predict` calls `check_pair_layout` on every batch of packs before the
model runs, and a `PreferenceModel` called eagerly calls it too (in graphs the
same rule is the named assertion of `tfpack.training.validation`).

Example:

>>> import numpy as np
>>> batch = {"sequence_ids": np.array([[1, 1, 1, 1, 1, 1]]),
...          "branch_ids": np.array([[0, 1, 1, 2, 2, 2]]),
...          "position_ids": np.arange(6)[None], "example_ids": np.array([[7]])}
>>> check_pair_layout(batch, share_prompt=False)
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `model` must be a PreferenceModel(share_prompt=True) to read pairs that share their prompt (preference_examples(share_prompt=True): prompt tokens of branch_ids 0, seen by both responses; `reference_log_likelihoods(..., share_prompt=True)`); another model scores each response without its prompt. Received: share_prompt=False and a shared prompt in example 7
"""

from __future__ import annotations

import numpy as np

from tfpack.errors import TfpackError

__all__ = ["check_pair_layout", "shared_prompt_tokens"]


def shared_prompt_tokens(sequence_ids, branch_ids):
    """Where a pack holds shared-prompt tokens: real tokens of ``branch_ids`` 0
    (array operators only: numpy arrays and TensorFlow tensors alike)."""
    return (sequence_ids > 0) & (branch_ids == 0)


def check_pair_layout(batch: dict, *, share_prompt: bool) -> None:
    """Refuse packs whose pairs share their prompt when the model does not read one."""
    if share_prompt:
        return  # Pairs without a shared prompt read the same through it.
    shared = shared_prompt_tokens(batch["sequence_ids"], batch["branch_ids"])
    if not shared.any():
        return
    row, column = (int(i) for i in np.argwhere(shared)[0])
    pair = int(batch["sequence_ids"][row, column])
    if "example_ids" in batch:
        where = f"example {int(batch['example_ids'][row, pair - 1])}"
    else:  # A model called on packs without example ids.
        where = f"pair {pair} of pack {row}"
    raise TfpackError(
        "`model` must be a PreferenceModel(share_prompt=True) to read pairs that share their "
        "prompt (preference_examples(share_prompt=True): prompt tokens of branch_ids 0, seen "
        "by both responses; `reference_log_likelihoods(..., share_prompt=True)`); another "
        "model scores each response without its prompt. "
        f"Received: share_prompt=False and a shared prompt in {where}")
