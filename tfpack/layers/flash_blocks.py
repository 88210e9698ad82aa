"""Which blocks the flash kernel visits: block bounds from the packs.

The flash kernel (`tfpack.layers.flash_attention`) cuts a pack of `L` tokens
into query blocks of `block_q` tokens and key blocks of `block_k` tokens.
Query `i` may see key `j` when both belong to the same sequence (ids equal,
not 0), `j <= i` if causal, and `i - before <= j <= i + after` inside a
window `(before, after)`. For each query block the kernel loops over the key
blocks `[low, high)` computed here, and masks inside the boundary blocks;
the backward's key-block pass loops over the query blocks `[low, high)`
computed the same way from the keys' side.

The bounds come from each token's own range of keys (its sequence's first
and last token, narrowed by causality and the window), so they cover every
allowed pair for any `sequence_ids`. For packs as tfpack builds them
(each sequence's tokens contiguous, padding at the end) the allowed keys of
a query block form one contiguous range, so every block in `[low, high)`
holds an allowed pair: the loop visits the fewest blocks the boundaries
allow (`tests/layers/test_flash_blocks.py` checks it against the block-level
mask by brute force).

Worked example, `L=8`, blocks of 4, bidirectional:

    sequence_ids  [1, 1, 1, 2, 2, 2, 2, 0]
    query block 0 (tokens 0-3, sequences 1, 2): keys 0-6 -> key blocks [0, 2)
    query block 1 (tokens 4-7, sequence 2):     keys 3-6 -> key blocks [0, 2)

and with one sequence per block (`[1, 1, 1, 1, 2, 2, 0, 0]`) each query
block visits its own key block only.
"""

import functools

import jax
import jax.numpy as jnp

__all__ = ["block_bounds", "key_blocks_visited", "token_key_ranges"]


def token_key_ranges(sequence_ids, *, causal=False, window=None):
    """`(first, last, real)`: the keys `[first, last]` each token may see.

    `real` is False on padding (id 0), whose range is never read. Used from the
    queries' side as is; from the keys' side the same ranges with the
    window mirrored (`(after, before)`) and causality turned around are the
    queries that may see each key (see `block_bounds`).

    Example:

    >>> import numpy as np
    >>> first, last, real = token_key_ranges(np.array([[1, 1, 2, 2, 2, 0]]),
    ...                                      causal=True)
    >>> np.asarray(first).tolist(), np.asarray(last).tolist()
    ([[0, 0, 2, 2, 2, 5]], [[0, 1, 2, 3, 4, 5]])
    """
    ids = jnp.asarray(sequence_ids, jnp.int32)
    length = ids.shape[1]
    ids = jnp.clip(ids, 0, length)
    index = jnp.arange(length, dtype=jnp.int32)

    def per_row(row):
        first = jax.ops.segment_min(index, row, num_segments=length + 1)
        last = jax.ops.segment_max(index, row, num_segments=length + 1)
        return first[row], last[row]

    first, last = jax.vmap(per_row)(ids)
    if causal:
        last = jnp.minimum(last, index)
    if window is not None:
        before, after = window
        first = jnp.maximum(first, index - before)
        last = jnp.minimum(last, index + after)
    return first, last, ids > 0


def _blocks(first, last, real, block_tokens, block_other):
    """`[B, n, 2]` block ranges `[low, high)` over blocks of `block_other`
    for the blocks of `block_tokens` tokens (empty where no token is real)."""
    batch, length = first.shape
    low = jnp.where(real, first // block_other, length)
    high = jnp.where(real, last // block_other + 1, 0)
    low = low.reshape(batch, -1, block_tokens).min(axis=2)
    high = high.reshape(batch, -1, block_tokens).max(axis=2)
    empty = high <= low
    return jnp.stack([jnp.where(empty, 0, low), jnp.where(empty, 0, high)],
                     axis=-1).astype(jnp.int32)


def block_bounds(sequence_ids, block_q, block_k, *, causal=False,
                 window=None):
    """`(key_ranges, query_ranges)`: the block loops of the flash kernel.

    Example:

    >>> import numpy as np
    >>> keys, queries = block_bounds(np.array([[1, 1, 1, 1, 2, 2, 0, 0]]), 4, 4)
    >>> np.asarray(keys).tolist(), np.asarray(queries).tolist()
    ([[[0, 1], [1, 2]]], [[[0, 1], [1, 2]]])

    Args:
        sequence_ids: int `[B, L]`, 1..K per sequence, 0 = padding; `L` a
            multiple of `block_q` and `block_k`.
        block_q, block_k: tokens per query and key block.
        causal: decoder attention.
        window: `(before, after)` band (`band_mask`), or None.

    Returns:
        `key_ranges` int `[B, L // block_q, 2]`: key blocks `[low, high)`
        each query block visits; `query_ranges` int `[B, L // block_k, 2]`:
        query blocks `[low, high)` that visit each key block.
    """
    window = None if window is None else tuple(int(w) for w in window)
    return _block_bounds(jnp.asarray(sequence_ids, jnp.int32),
                         None if window is None else jnp.asarray(window),
                         block_q=block_q, block_k=block_k, causal=causal)


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "causal"))
def _block_bounds(sequence_ids, window, *, block_q, block_k, causal):
    first, last, real = token_key_ranges(sequence_ids, causal=causal,
                                         window=window)
    keys = _blocks(first, last, real, block_q, block_k)
    # Key j is seen by the queries [first_j, last_j] of its sequence, from
    # j on if causal, within (after, before) of j inside a window.
    mirrored = None if window is None else (window[1], window[0])
    q_first, q_last, _ = token_key_ranges(sequence_ids, window=mirrored)
    if causal:
        index = jnp.arange(first.shape[1], dtype=jnp.int32)
        q_first = jnp.maximum(q_first, index)
    queries = _blocks(q_first, q_last, real, block_k, block_q)
    return keys, queries


def key_blocks_visited(sequence_ids, block_q, block_k, *, causal=False,
                       window=None):
    """Key blocks the flash kernel visits for each query block, `[B, L // block_q]`.

    Example:

    >>> import numpy as np
    >>> ids = np.array([[1] * 4 + [2] * 4 + [3] * 8])
    >>> np.asarray(key_blocks_visited(ids, 4, 4)).tolist()
    [[1, 1, 2, 2]]
    >>> np.asarray(key_blocks_visited(ids, 4, 4, causal=True)).tolist()
    [[1, 1, 1, 2]]
    """
    keys, _ = block_bounds(sequence_ids, block_q, block_k, causal=causal,
                           window=window)
    return keys[..., 1] - keys[..., 0]
