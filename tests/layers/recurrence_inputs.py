"""The packed inputs of `test_recurrence.py`, in numpy: its JAX check (run with
TensorFlow blocked, `tests/jax_env.py`) imports them too."""

import numpy as np

ROWS = [[70, 1, 2, 50], [64, 3, 60]]  # 130 and 127 tokens in rows of 130.
LENGTH = 130
HEADS, DK, DV = 2, 4, 3


def row_ids(rows=ROWS, length=LENGTH):
    """`[B, L]` sequence ids of rows of `rows`' lengths, padded with 0."""
    ids = np.zeros((len(rows), length), "int32")
    for r, lengths in enumerate(rows):
        ids[r, :sum(lengths)] = np.repeat(np.arange(1, len(lengths) + 1),
                                          lengths)
    return ids


def sequence_spans(rows=ROWS):
    """(row, start, stop) of every sequence."""
    return [(r, sum(lengths[:i]), sum(lengths[:i + 1]))
            for r, lengths in enumerate(rows) for i in range(len(lengths))]


def delta_inputs(seed=0, rows=ROWS, length=LENGTH):
    rng = np.random.default_rng(seed)
    batch = len(rows)
    return [
        rng.normal(size=(batch, length, HEADS, DK)).astype("float32"),
        rng.normal(size=(batch, length, HEADS, DK)).astype("float32"),
        rng.normal(size=(batch, length, HEADS, DV)).astype("float32"),
        -rng.uniform(0.0, 0.5, (batch, length, HEADS)).astype("float32"),
        rng.uniform(size=(batch, length, HEADS)).astype("float32"),
    ]


def rwkv_inputs(rows, length, seed=4):
    rng = np.random.default_rng(seed)
    shape = (len(rows), length, HEADS, DK)
    r, k, v = (rng.normal(size=shape).astype("float32") for _ in range(3))
    w = (-rng.uniform(0.5, 3.0, shape)).astype("float32")
    kk = rng.normal(size=shape).astype("float32")
    kk /= np.linalg.norm(kk, axis=-1, keepdims=True)
    a = rng.uniform(size=shape).astype("float32")
    return [r, w, k, v, -kk, kk * a]
