"""Recurrences that restart at every packed sequence: the state resets inside them.

A linear-attention or recurrent layer carries a state along the row; in a
pack, the state a sequence starts from must be zero, not what its
predecessor left. These functions take the row's `segments` (`[B, L]` ints,
equal exactly for the tokens of one sequence: `segments_of(sequence_ids)`)
and compute, for every sequence of every row at once, what the layer
computes on that sequence alone:

- `shift_within`: token `t - s` of the same sequence, else zeros (RWKV's
  token shift is `s = 1`);
- `causal_conv1d`: keras-hub Qwen3.5's short depthwise causal convolution,
  no tap reading another sequence;
- `chunked_gated_delta_rule`: keras-hub Qwen3.5's gated delta rule in
  chunks (`_chunk_gated_delta_rule`), a sequence starting anywhere inside a
  chunk: the chunk's decays and its triangular solve only pair tokens of the
  same sequence, and the state carried into a chunk reaches only the
  sequence that continues there;
- `recurrent_gated_delta_rule`: the same rule one token at a time
  (keras-hub's `_recurrent_gated_delta_rule`), zeroing the state at starts;
- `generalized_delta_rule`: RWKV-7's time-mix recurrence (keras-hub's
  `rnn_generalized_delta_rule`), zeroing the state at starts.

Everything is `keras.ops` with static shapes (TensorFlow, JAX; XLA).
Contributions of other sequences are selected away with `where`, never
multiplied by zero, so they are exactly zero whatever their values, and a
reset costs only those selections: a pack runs the work of one row.

Worked example: `sequence_ids [1, 1, 2, 2, 2, 0]` give segments
`[1, 1, 2, 2, 2, 3]`; with chunks of 4, token 2 starts a sequence inside the
first chunk, and the state leaving that chunk (of sequence 2) is carried
into the second chunk to tokens 4 only.
"""

import math

import keras
from keras import ops

__all__ = [
    "causal_conv1d",
    "chunked_gated_delta_rule",
    "generalized_delta_rule",
    "isolate_in_sequences",
    "recurrent_gated_delta_rule",
    "segment_starts",
    "segments_of",
    "shift_within",
]


def segment_starts(sequence_ids):
    """`[B, L]` booleans: True where a token starts a run of equal ids.

    Every sequence of a pack is a run, and so is the padding after them.

    >>> import numpy as np
    >>> ops.convert_to_numpy(segment_starts(np.array([[1, 1, 2, 0, 0]]))
    ...                      ).astype(int).tolist()
    [[1, 0, 1, 1, 0]]
    """
    ids = ops.cast(sequence_ids, "int32")
    previous = ops.pad(ids[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
    return ops.not_equal(ids, previous)


def segments_of(sequence_ids):
    """`[B, L]` int32 run numbers 1, 2, ...: equal exactly inside a sequence.

    >>> import numpy as np
    >>> ops.convert_to_numpy(segments_of(np.array([[1, 1, 2, 0, 0]]))
    ...                      ).tolist()
    [[1, 1, 2, 3, 3]]
    """
    return ops.cumsum(ops.cast(segment_starts(sequence_ids), "int32"), axis=1)


def shift_within(x, segments, steps=1):
    """`x` `[B, L, ...]` moved `steps` tokens later inside each sequence:
    token `t` gets token `t - steps` of its own sequence, or zeros.

    >>> import numpy as np
    >>> x = np.arange(1, 6, dtype="float32")[None, :, None]
    >>> ops.convert_to_numpy(shift_within(x, np.array([[1, 1, 1, 2, 2]])
    ...                      ))[0, :, 0].tolist()
    [0.0, 1.0, 2.0, 0.0, 4.0]
    """
    length = x.shape[1]
    if steps >= length:
        return ops.zeros_like(x)
    widths = [[0, 0], [steps, 0]] + [[0, 0]] * (len(x.shape) - 2)
    moved = ops.pad(x[:, :length - steps], widths)
    source = ops.pad(segments[:, :length - steps], [[0, 0], [steps, 0]],
                     constant_values=-1)
    same = ops.equal(source, segments)
    for _ in range(len(x.shape) - 2):
        same = ops.expand_dims(same, -1)
    return ops.where(same, moved, ops.zeros_like(moved))


def isolate_in_sequences(x, segments):
    """`(clean_x, show)`: a non-finite token kept inside its own sequence, for
    a causal block that mixes tokens only inside sequences (the recurrences
    here, per-token layers), in `O(L)`.

    The recurrences select other sequences away, but their matmuls still
    multiply a zero weight by the other sequences' values, and `0 * NaN` is
    NaN: one NaN would reach every later sequence of the row. The block runs
    on `clean_x` (non-finite tokens zeroed) and `show(output)` makes NaN
    exactly the outputs of the tokens at or after a non-finite one of their
    own sequence, what the block computes on that sequence alone. Finite
    inputs pass through unchanged. (`tfpack.layers.attention_mask.
    isolate_tokens` does the same under an `[L, L]` mask.)

    >>> import numpy as np
    >>> x = np.array([[[1.0], [np.nan], [2.0], [3.0]]], "float32")
    >>> clean, show = isolate_in_sequences(x, np.array([[1, 1, 1, 2]]))
    >>> ops.convert_to_numpy(clean).ravel().tolist()
    [1.0, 0.0, 2.0, 3.0]
    >>> ops.convert_to_numpy(show(clean)).ravel().tolist()
    [1.0, nan, nan, 3.0]

    Args:
        x: `[B, L, ...]`.
        segments: `[B, L]` ints, equal exactly inside one sequence.

    Returns:
        `clean_x` (as `x`) and `show`, mapping a `[B, L, ...]` output of the
        block to the same with NaN at the reached tokens.
    """
    axes = tuple(range(2, len(x.shape)))
    bad = ops.logical_not(ops.all(ops.isfinite(x), axis=axes)) if axes \
        else ops.logical_not(ops.isfinite(x))
    index = ops.broadcast_to(ops.arange(x.shape[1], dtype="int32")[None],
                             ops.shape(bad))
    # The last non-finite token so far, and the start of the sequence.
    last_bad = ops.associative_scan(ops.maximum, ops.where(bad, index, -1),
                                    axis=1)
    start = ops.associative_scan(ops.maximum, ops.where(
        segment_starts(segments), index, -1), axis=1)
    reached = ops.greater_equal(last_bad, start)
    keep = ops.reshape(bad, ops.shape(bad) + (1,) * len(axes))
    clean = ops.where(keep, ops.zeros_like(x), x)

    def show(output):
        where = ops.reshape(reached, ops.shape(reached)
                            + (1,) * (len(output.shape) - 2))
        return ops.where(where, ops.cast(float("nan"), output.dtype), output)

    return clean, show


def causal_conv1d(x, kernel, segments):
    """keras-hub Qwen3.5's depthwise causal convolution, per sequence.

    `x` is `[B, L, C]`, `kernel` `[C, K]` (keras-hub's `conv1d_weight`: tap
    `K - 1` multiplies the token itself, tap `K - 1 - s` the token `s`
    before it). A tap that would read another sequence reads zeros, as the
    convolution's left padding of that sequence alone would.

    >>> import numpy as np
    >>> x = np.ones((1, 4, 1), "float32")
    >>> kernel = np.array([[1.0, 10.0, 100.0]], "float32")
    >>> ops.convert_to_numpy(causal_conv1d(x, kernel, np.array([[1, 1, 2, 2]]))
    ...                      )[0, :, 0].tolist()
    [100.0, 110.0, 100.0, 110.0]
    """
    taps = kernel.shape[-1]
    kernel = ops.cast(kernel, x.dtype)
    out = x * kernel[:, taps - 1]
    for steps in range(1, min(taps, x.shape[1])):
        out = out + shift_within(x, segments, steps) * kernel[:, taps - 1 - steps]
    return out


def _l2_normalize(x):
    # keras-hub's `_l2norm` (epsilon 1e-6 under the square root).
    return x * ops.rsqrt(ops.sum(x * x, axis=-1, keepdims=True) + 1e-6)


def _heads_first(*tensors):
    """`[B, L, H, ...]` -> `[B, H, L, ...]` float32."""
    result = []
    for t in tensors:
        axes = (0, 2, 1) + tuple(range(3, len(t.shape)))
        result.append(ops.cast(ops.transpose(t, axes), "float32"))
    return result


def _chunk_masks(segments, chunk_size):
    """Per chunk `[B, 1, N, C(, C)]`: pairs of one sequence at or before the
    query (`lower`), and the tokens the carried state reaches (`carried`)."""
    chunks = segments.shape[1] // chunk_size
    seg = ops.reshape(segments, (-1, 1, chunks, chunk_size))
    same = ops.equal(seg[..., :, None], seg[..., None, :])
    index = ops.arange(chunk_size)
    lower = ops.logical_and(same, index[:, None] >= index[None, :])
    # A chunk continues the sequence of the previous chunk's last token.
    before = ops.pad(segments[:, chunk_size - 1:-1:chunk_size],
                     [[0, 0], [1, 0]], constant_values=-1)
    carried = ops.equal(seg, ops.reshape(before, (-1, 1, chunks, 1)))
    return lower, carried, seg


def chunked_gated_delta_rule(query, key, value, g, beta, segments,
                             chunk_size=64):
    """keras-hub's `_chunk_gated_delta_rule` with the state reset at every
    sequence start (zero initial state, no final state).

    Args:
        query: `[B, L, H, dk]`; l2-normalized and scaled by `dk ** -0.5`
            here, as keras-hub does.
        key: `[B, L, H, dk]`, l2-normalized here.
        value: `[B, L, H, dv]`.
        g: `[B, L, H]` log decays (<= 0).
        beta: `[B, L, H]` write strengths.
        segments: `[B, L]` ints, equal exactly inside one sequence
            (`segments_of`).
        chunk_size: tokens per chunk; any size computes the same, keras-hub
            uses 64.

    Returns:
        `[B, L, H, dv]` in `query`'s dtype (computed in float32).

    Example (two sequences of 3 and 2 tokens equal each alone):

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.normal(size=(1, 5, 1, 2)).astype("float32")
    ...            for _ in range(3))
    >>> g = -rng.uniform(size=(1, 5, 1)).astype("float32")
    >>> beta = rng.uniform(size=(1, 5, 1)).astype("float32")
    >>> packed = chunked_gated_delta_rule(q, k, v, g, beta,
    ...                                   np.array([[1, 1, 1, 2, 2]]), 4)
    >>> alone = chunked_gated_delta_rule(q[:, 3:], k[:, 3:], v[:, 3:],
    ...                                  g[:, 3:], beta[:, 3:],
    ...                                  np.array([[1, 1]]), 4)
    >>> bool(np.allclose(packed[:, 3:], alone, atol=1e-6))
    True
    """
    dtype = query.dtype
    length = query.shape[1]
    query, key = _l2_normalize(query), _l2_normalize(key)
    query, key, value, g, beta = _heads_first(query, key, value, g, beta)
    segments = ops.cast(segments, "int32")
    pad = -length % chunk_size
    if pad:
        query, key, value = (ops.pad(t, [[0, 0], [0, 0], [0, pad], [0, 0]])
                             for t in (query, key, value))
        g, beta = (ops.pad(t, [[0, 0], [0, 0], [0, pad]]) for t in (g, beta))
        segments = ops.pad(segments, [[0, 0], [0, pad]], constant_values=-1)
    _, heads, total, dk = key.shape
    batch = ops.shape(key)[0]
    dv = value.shape[-1]
    chunks = total // chunk_size
    lower, carried, seg = _chunk_masks(segments, chunk_size)

    def split(t):
        return ops.reshape(t, (-1, heads, chunks, chunk_size) + tuple(t.shape[3:]))

    query = split(query * (1.0 / math.sqrt(dk)))
    k_beta = split(key * beta[..., None])
    v_beta = split(value * beta[..., None])
    key, g = split(key), split(g)
    zero = ops.zeros((), "float32")
    # Log decay from the sequence's first token in the chunk to each token.
    cum = ops.sum(ops.where(lower, g[..., None, :], zero), axis=-1)
    decay = ops.where(lower, ops.exp(ops.where(
        lower, cum[..., :, None] - cum[..., None, :], zero)), zero)
    strict = ops.logical_and(lower, ops.logical_not(ops.eye(chunk_size) > 0))
    attn = ops.where(strict, -ops.einsum("bhcid,bhcjd->bhcij", k_beta, key)
                     * decay, zero)
    # (I - attn)^-1: keras-hub's row-by-row loop as one triangular solve.
    eye = ops.eye(chunk_size, dtype="float32")
    solved = ops.solve_triangular(eye - attn, ops.broadcast_to(
        eye, ops.shape(attn)), lower=True)
    value = ops.matmul(solved, v_beta)
    reach = ops.where(carried, ops.exp(cum), zero)  # carried state's decay
    k_cumdecay = ops.matmul(solved, k_beta * reach[..., None])
    query_reach = query * reach[..., None]
    intra = ops.where(lower, ops.einsum("bhcid,bhcjd->bhcij", query, key)
                      * decay, zero)
    last = ops.equal(seg, seg[..., -1:])  # Tokens of the chunk's last sequence.
    to_end = ops.where(last, ops.exp(ops.where(
        last, cum[..., -1:] - cum, zero)), zero)
    keep = ops.where(carried[..., -1], ops.exp(cum[..., -1]), zero)
    state = ops.zeros((batch, heads, dk, dv), "float32")
    outputs = []
    for c in range(chunks):  # Static, as keras-hub's loop.
        v_new = value[:, :, c] - ops.matmul(k_cumdecay[:, :, c], state)
        outputs.append(ops.matmul(query_reach[:, :, c], state)
                       + ops.matmul(intra[:, :, c], v_new))
        state = (state * keep[:, :, c][..., None, None]
                 + ops.einsum("bhid,bhiv->bhdv",
                              key[:, :, c] * to_end[:, :, c][..., None], v_new))
    output = ops.reshape(ops.stack(outputs, axis=2),
                         (-1, heads, total, dv))[:, :, :length]
    return ops.cast(ops.transpose(output, (0, 2, 1, 3)), dtype)


def _scan(step, state, inputs):
    """`ops.scan` over axis 1 of `inputs` (`[B, L, ...]` tensors) with
    outputs shaped unlike the state: `[B, L, ...]`.

    Keras's TensorFlow `scan` requires outputs shaped as the carried state,
    so there it is a `tf.while_loop` writing a `TensorArray` (gradients and
    XLA as `ops.scan`'s).
    """
    inputs = [ops.moveaxis(t, 1, 0) for t in inputs]
    if keras.backend.backend() != "tensorflow":
        _, outputs = ops.scan(step, state, inputs)
        return ops.moveaxis(outputs, 0, 1)
    import tensorflow as tf

    length = inputs[0].shape[0]
    written = tf.TensorArray(state.dtype, size=length)

    def body(t, state, written):
        state, output = step(state, [x[t] for x in inputs])
        return t + 1, state, written.write(t, output)

    # XLA needs the loop's bound to size the TensorArray.
    _, _, written = tf.while_loop(lambda t, *_: t < length, body,
                                  (0, state, written),
                                  maximum_iterations=length)
    return ops.moveaxis(written.stack(), 0, 1)


def recurrent_gated_delta_rule(query, key, value, g, beta, segments):
    """keras-hub's `_recurrent_gated_delta_rule` (one token at a time) with
    the state zeroed at every sequence start; arguments and result as
    `chunked_gated_delta_rule`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.normal(size=(1, 5, 1, 2)).astype("float32")
    ...            for _ in range(3))
    >>> g = -rng.uniform(size=(1, 5, 1)).astype("float32")
    >>> beta = rng.uniform(size=(1, 5, 1)).astype("float32")
    >>> segments = np.array([[1, 1, 1, 2, 2]])
    >>> bool(np.allclose(
    ...     recurrent_gated_delta_rule(q, k, v, g, beta, segments),
    ...     chunked_gated_delta_rule(q, k, v, g, beta, segments, 2),
    ...     atol=1e-6))
    True
    """
    dtype = query.dtype
    query, key = _l2_normalize(query), _l2_normalize(key)
    query = query * (1.0 / math.sqrt(query.shape[-1]))
    query, key, value, g, beta = (ops.cast(t, "float32") for t in
                                  (query, key, value, g, beta))
    starts = segment_starts(segments)
    _, _, heads, dk = key.shape
    state = ops.zeros((ops.shape(key)[0], heads, dk, value.shape[-1]), "float32")

    def step(state, inputs):
        q, k, v, decay, b, start = inputs
        state = ops.where(start[:, None, None, None], ops.zeros_like(state),
                          state * ops.exp(decay)[..., None, None])
        remembered = ops.sum(state * k[..., None], axis=-2)
        state = state + k[..., None] * ((v - remembered) * b[..., None])[
            ..., None, :]
        return state, ops.sum(state * q[..., None], axis=-2)

    outputs = _scan(step, state, [query, key, value, g, beta, starts])
    return ops.cast(outputs, dtype)


def generalized_delta_rule(r, w, k, v, a, b, segments):
    """RWKV-7's time-mix recurrence (keras-hub's `rnn_generalized_delta_rule`)
    with the state zeroed at every sequence start.

    Per head, with state `S` `[N, N]` and `w` turned into `exp(-exp(w))`:
    `S = S * w_t + S a_t b_t^T + v_t k_t^T`, output `S r_t`.

    Args:
        r, w, k, v, a, b: `[B, L, H, N]`.
        segments: `[B, L]` ints, equal exactly inside one sequence.

    Returns:
        `[B, L, H, N]` in `r`'s dtype (computed in float32).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> r, w, k, v, a, b = (rng.normal(size=(1, 4, 1, 2)).astype("float32")
    ...                     for _ in range(6))
    >>> packed = generalized_delta_rule(r, w, k, v, a, b, np.array([[1, 1, 2, 2]]))
    >>> alone = generalized_delta_rule(*(t[:, 2:] for t in (r, w, k, v, a, b)),
    ...                                np.array([[1, 1]]))
    >>> bool(np.allclose(packed[:, 2:], alone, atol=1e-6))
    True
    """
    dtype = r.dtype
    r, w, k, v, a, b = (ops.cast(t, "float32") for t in (r, w, k, v, a, b))
    w = ops.exp(-ops.exp(w))
    starts = segment_starts(segments)
    _, _, heads, size = r.shape
    state = ops.zeros((ops.shape(r)[0], heads, size, size), "float32")

    def step(state, inputs):
        r, w, k, v, a, b, start = inputs
        state = ops.where(start[:, None, None, None], ops.zeros_like(state),
                          state)
        state = (state * w[:, :, None, :]
                 + ops.matmul(ops.matmul(state, a[..., None]), b[..., None, :])
                 + v[..., None] * k[..., None, :])
        return state, ops.matmul(state, r[..., None])[..., 0]

    outputs = _scan(step, state, [r, w, k, v, a, b, starts])
    return ops.cast(outputs, dtype)
