"""Helpers shared by the export tests."""

import numpy as np


def unpacked(rows, max_length, max_sequences_per_pack, *, max_predictions=None, labels=None):
    """Each sequence alone in its pack (the unpacked reference), as numpy features.

    ``max_predictions`` adds empty ``masked_lm_positions``; ``labels`` adds one
    per-sequence label per row.
    """
    n = len(rows)
    f = {k: np.zeros((n, max_length), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    for i, row in enumerate(rows):
        f["input_ids"][i, :len(row)] = row
        f["sequence_ids"][i, :len(row)] = 1
        f["position_ids"][i, :len(row)] = np.arange(len(row))
    f["cls_positions"] = np.zeros((n, max_sequences_per_pack), np.int32)
    f["sequence_mask"] = np.zeros((n, max_sequences_per_pack), np.float32)
    f["sequence_mask"][:, 0] = 1.0
    if max_predictions is not None:
        f["masked_lm_positions"] = np.zeros((n, max_predictions), np.int32)
    if labels is not None:
        f["labels"] = np.zeros((n, max_sequences_per_pack), np.int32)
        f["labels"][:, 0] = labels
    return f
