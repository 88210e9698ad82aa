"""Gathering rows of a pack by index (shared by the heads)."""

from keras import ops


def gather_positions(sequence_output, positions):
    """Rows `positions` [B, N] of `sequence_output` [B, L, D] -> [B, N, D]."""
    index = ops.expand_dims(ops.cast(positions, "int32"), -1)
    return ops.take_along_axis(sequence_output, index, axis=1)
