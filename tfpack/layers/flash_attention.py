"""Fused attention that visits only the key blocks of each block's sequences.

`attention_implementation="flash"` on the JAX backend. A Pallas kernel in
the FlashAttention-2 form (online softmax over key blocks, no `L x L`
buffer): one program per batch row, query head and block of `block_q`
queries loops over the key blocks `[low, high)` of
`tfpack.layers.flash_blocks.block_bounds`, the blocks that hold keys of
the sequences its queries belong to, and masks inside the boundary blocks
(other sequences, causality, a sliding window). A pack of `K` sequences of
length `S` costs about `L * S` scores instead of `L^2`.

Why not a kernel library: JAX 0.10's Pallas GPU `mha` takes `segment_ids`
but loops over every key block (only causality shortens its loop) and
has no grouped-query heads; TPU splash attention skips only blocks of its
*static* mask (segment ids are masked inside every block); the cuDNN path of
`jax.nn.dot_product_attention` takes sequence lengths (padding), not packed
sequences. None skips boundaries known only at run time.

The backward is a second and third Pallas kernel recomputing the scores
block by block from the saved log-sum-exp (`custom_vjp`): one program per
query block accumulates `dq` over the same key blocks, one per key block
accumulates `dk`, `dv` over the query blocks that see it. Sink logits'
gradient is a sum over the saved log-sum-exp (no kernel).

On the CPU the kernels run in Pallas interpret mode (`interpret=True`, the
default there): the same kernel code, checked against dense attention in
CI. On a GPU they lower through Triton (named in `compiler_params`: JAX's
default GPU backend for Pallas, Mosaic GPU, does not take these kernels);
their lowering for CUDA is checked on the CPU in CI (`jax.export` to the
`cuda` platform, tests/layers). Operands stay in their dtype (bfloat16 on
the tensor cores) with float32 sums. TPU lowering is untested.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from tfpack.errors import TfpackError
from tfpack.layers.flash_blocks import block_bounds

__all__ = ["flash_attention", "block_sizes"]

# Default tokens per block (the Triton tile; smaller rows get one block).
DEFAULT_BLOCK = 128
_MASKED = -1e30


@dataclasses.dataclass(frozen=True)
class _Config:
    block_q: int
    block_k: int
    groups: int
    causal: bool
    window: tuple | None
    cap: float | None
    sinks: bool
    alibi: bool
    interpret: bool


def block_sizes(length, block_q=None, block_k=None):
    """`(block_q, block_k, padded_length)` for a row of `length` tokens.

    Example:

    >>> block_sizes(40)
    (16, 16, 48)
    >>> block_sizes(8192)
    (128, 128, 8192)
    >>> block_sizes(300, 128, 64)
    (128, 64, 384)
    """
    # At least 16 (Triton's smallest tile), at most DEFAULT_BLOCK, and a
    # quarter of a short row, so that even short rows have blocks to skip.
    default = min(DEFAULT_BLOCK, max(16, pl.next_power_of_2(length) // 4))
    block_q = default if block_q is None else block_q
    block_k = default if block_k is None else block_k
    for name, value in (("block_q", block_q), ("block_k", block_k)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TfpackError(f"`{name}` must be a positive integer. "
                              f"Received: {name}={value!r}")
    step = math.lcm(block_q, block_k)
    return block_q, block_k, -(-length // step) * step


_PLAIN = (((1,), (0,)), ((), ()))
_TRANSPOSE_A = (((0,), (0,)), ((), ()))
_TRANSPOSE_B = (((1,), (1,)), ((), ()))


def _dot(a, b, dimensions=_PLAIN):
    """`a @ b` (or with `a` or `b` transposed) on `b`'s dtype, summed in
    float32: bfloat16 operands stay bfloat16 for the tensor cores, as in
    FlashAttention-2 (probabilities and score gradients are rounded to it)."""
    return jax.lax.dot_general(a.astype(b.dtype), b, dimensions,
                               preferred_element_type=jnp.float32)


def _all(x, axis):
    return jnp.min(x.astype(jnp.float32), axis=axis) > 0


def _any(x, axis):
    return jnp.max(x.astype(jnp.float32), axis=axis)


def _scores(q, k, qb, kb, qids, kids, h, slopes_ref, config):
    """Capped, biased scores `[bq, bk]` in float32, their tanh (soft cap)
    and the mask of allowed pairs."""
    s = _dot(q, k, _TRANSPOSE_B)
    tanh = None
    if config.cap is not None:
        tanh = jnp.tanh(s / config.cap)
        s = tanh * config.cap
    qpos = qb * config.block_q + jnp.arange(config.block_q)[:, None]
    kpos = kb * config.block_k + jnp.arange(config.block_k)[None, :]
    if config.alibi:
        # ALiBi as slope * (key - query): the per-query shift of other
        # forms (slope * key position) cancels in the softmax.
        s = s + slopes_ref[h] * (kpos - qpos).astype(jnp.float32)
    mask = (qids[:, None] == kids[None, :]) & (qids[:, None] > 0)
    if config.causal:
        mask = mask & (kpos <= qpos)
    if config.window is not None:
        before, after = config.window
        mask = mask & (kpos >= qpos - before) & (kpos <= qpos + after)
    return jnp.where(mask, s, _MASKED), tanh, mask


def _forward_kernel(bounds_ref, qids_ref, kids_ref, q_ref, k_ref, v_ref,
                    sinks_ref, slopes_ref, o_ref, lse_ref, *, config):
    h, qb = pl.program_id(1), pl.program_id(2)
    q = q_ref[...]
    qids = qids_ref[...]
    bq, bk = config.block_q, config.block_k
    if config.sinks:
        m = jnp.full((bq,), sinks_ref[h], jnp.float32)
        l = jnp.ones((bq,), jnp.float32)
    else:
        m = jnp.full((bq,), _MASKED, jnp.float32)
        l = jnp.zeros((bq,), jnp.float32)
    acc = jnp.zeros(q.shape, jnp.float32)

    def body(kb, carry):
        acc, m, l, poisoned = carry
        keys = pl.ds(pl.multiple_of(kb * bk, bk), bk)
        k, v = k_ref[keys, :], v_ref[keys, :]
        s, _, mask = _scores(q, k, qb, kb, qids, kids_ref[keys], h,
                             slopes_ref, config)
        m_new = jnp.maximum(m, s.max(axis=1))
        p = jnp.where(mask, jnp.exp(s - m_new[:, None]), 0.0)
        alpha = jnp.exp(m - m_new)
        # A non-finite value reaches only the queries allowed to see it
        # (0 * NaN would reach every query of a boundary block).
        # (Reductions over floats: Triton lowers no boolean all/any.)
        finite = _all(jnp.isfinite(v), axis=1)
        poisoned = jnp.maximum(poisoned, _any(mask & ~finite[None, :], axis=1))
        v = jnp.where(finite[:, None], v, jnp.zeros_like(v))
        acc = alpha[:, None] * acc + _dot(p, v)
        return acc, m_new, alpha * l + p.sum(axis=1), poisoned

    acc, m, l, poisoned = jax.lax.fori_loop(
        bounds_ref[0], bounds_ref[1], body,
        (acc, m, l, jnp.zeros((bq,), jnp.float32)))
    seen = l > 0
    o = acc / jnp.where(seen, l, 1.0)[:, None]
    o_ref[...] = jnp.where(poisoned[:, None] > 0, jnp.nan, o).astype(o_ref.dtype)
    lse_ref[...] = jnp.where(seen, m + jnp.log(jnp.where(seen, l, 1.0)), 0.0)


def _probabilities(q, k, qb, kb, qids, kids, lse, h, slopes_ref, config):
    s, tanh, mask = _scores(q, k, qb, kb, qids, kids, h, slopes_ref, config)
    return jnp.where(mask, jnp.exp(s - lse[:, None]), 0.0), tanh


def _score_gradient(p, dp, delta, tanh):
    ds = p * (dp - delta[:, None])
    return ds if tanh is None else ds * (1.0 - tanh * tanh)


def _dq_kernel(bounds_ref, qids_ref, kids_ref, q_ref, k_ref, v_ref,
               slopes_ref, do_ref, lse_ref, delta_ref, dq_ref, *, config):
    h, qb = pl.program_id(1), pl.program_id(2)
    q, do = q_ref[...], do_ref[...]
    qids, lse, delta = qids_ref[...], lse_ref[...], delta_ref[...]
    bk = config.block_k

    def body(kb, dq):
        keys = pl.ds(pl.multiple_of(kb * bk, bk), bk)
        k, v = k_ref[keys, :], v_ref[keys, :]
        p, tanh = _probabilities(q, k, qb, kb, qids, kids_ref[keys], lse, h,
                                 slopes_ref, config)
        dp = _dot(do, v, _TRANSPOSE_B)
        return dq + _dot(_score_gradient(p, dp, delta, tanh), k)

    dq = jax.lax.fori_loop(bounds_ref[0], bounds_ref[1], body,
                           jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = dq


def _dkdv_kernel(bounds_ref, qids_ref, kids_ref, q_ref, k_ref, v_ref,
                 slopes_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, *,
                 config):
    h, kb = pl.program_id(1), pl.program_id(2)
    k, v = k_ref[...], v_ref[...]
    kids = kids_ref[...]
    bq = config.block_q

    def body(qb, carry):
        dk, dv = carry
        rows = pl.ds(pl.multiple_of(qb * bq, bq), bq)
        q, do = q_ref[rows, :], do_ref[rows, :]
        p, tanh = _probabilities(q, k, qb, kb, qids_ref[rows], kids,
                                 lse_ref[rows], h, slopes_ref, config)
        dp = _dot(do, v, _TRANSPOSE_B)
        ds = _score_gradient(p, dp, delta_ref[rows], tanh)
        return (dk + _dot(ds, q, _TRANSPOSE_A), dv + _dot(p, do, _TRANSPOSE_A))

    zeros = jnp.zeros(k.shape, jnp.float32)
    dk, dv = jax.lax.fori_loop(bounds_ref[0], bounds_ref[1], body,
                               (zeros, zeros))
    dk_ref[...], dv_ref[...] = dk, dv


def _compiler_params(config):
    """Triton on a GPU, named: JAX's default there is Mosaic GPU, whose
    `pallas_call` lowering these kernels do not meet (nor is it meant for
    `pallas_call` any more)."""
    if config.interpret:
        return None
    from jax.experimental.pallas import triton as pallas_triton
    return pallas_triton.CompilerParams(num_warps=4, num_stages=2)


def _specs(config, length, head_dim):
    """BlockSpecs over the grid `(batch, head, block)`."""
    bq, bk, g = config.block_q, config.block_k, config.groups
    return {
        "bounds": pl.BlockSpec((None, None, 2), lambda b, h, i: (b, i, 0)),
        "ids_q": pl.BlockSpec((None, bq), lambda b, h, i: (b, i)),
        "ids_k": pl.BlockSpec((None, bk), lambda b, h, i: (b, i)),
        "ids": pl.BlockSpec((None, length), lambda b, h, i: (b, 0)),
        "q": pl.BlockSpec((None, bq, None, head_dim), lambda b, h, i: (b, i, h, 0)),
        "q_all": pl.BlockSpec((None, length, None, head_dim),
                              lambda b, h, i: (b, 0, h, 0)),
        "k_all": pl.BlockSpec((None, length, None, head_dim),
                              lambda b, h, i: (b, 0, h // g, 0)),
        "k": pl.BlockSpec((None, bk, None, head_dim),
                          lambda b, h, i: (b, i, h // g, 0)),
        "k_head": pl.BlockSpec((None, bk, None, head_dim),
                               lambda b, h, i: (b, i, h, 0)),
        "rows_q": pl.BlockSpec((None, None, bq), lambda b, h, i: (b, h, i)),
        "rows_all": pl.BlockSpec((None, None, length), lambda b, h, i: (b, h, 0)),
    }


def _per_head(values, heads):
    """A per-head float32 vector the kernels read (zeros for None)."""
    if values is None:
        return jnp.zeros((heads,), jnp.float32)
    return jnp.asarray(values).astype(jnp.float32).reshape(heads)


def _forward(q, k, v, sinks, slopes, ids, key_ranges, config):
    batch, length, heads, head_dim = q.shape
    spec = _specs(config, length, head_dim)
    whole = pl.BlockSpec((heads,), lambda b, h, i: (0,))
    sinks, slopes = _per_head(sinks, heads), _per_head(slopes, heads)
    return pl.pallas_call(
        functools.partial(_forward_kernel, config=config),
        grid=(batch, heads, length // config.block_q),
        in_specs=[spec["bounds"], spec["ids_q"], spec["ids"], spec["q"],
                  spec["k_all"], spec["k_all"], whole, whole],
        out_specs=[spec["q"], spec["rows_q"]],
        out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype),
                   jax.ShapeDtypeStruct((batch, heads, length), jnp.float32)],
        interpret=config.interpret,
        compiler_params=_compiler_params(config), name="tfpack_flash_forward",
    )(key_ranges, ids, ids, q, k, v, sinks, slopes)


def _backward(q, k, v, slopes, ids, ranges, o, lse, do, config):
    batch, length, heads, head_dim = q.shape
    spec = _specs(config, length, head_dim)
    whole = pl.BlockSpec((heads,), lambda b, h, i: (0,))
    slopes = _per_head(slopes, heads)
    key_ranges, query_ranges = ranges
    delta = jnp.einsum("blhd,blhd->bhl", o.astype(jnp.float32),
                       do.astype(jnp.float32))
    f32 = jnp.float32
    dq = pl.pallas_call(
        functools.partial(_dq_kernel, config=config),
        grid=(batch, heads, length // config.block_q),
        in_specs=[spec["bounds"], spec["ids_q"], spec["ids"], spec["q"],
                  spec["k_all"], spec["k_all"], whole, spec["q"],
                  spec["rows_q"], spec["rows_q"]],
        out_specs=spec["q"],
        out_shape=jax.ShapeDtypeStruct(q.shape, f32),
        interpret=config.interpret,
        compiler_params=_compiler_params(config), name="tfpack_flash_dq",
    )(key_ranges, ids, ids, q, k, v, slopes, do, lse, delta)
    dk, dv = pl.pallas_call(
        functools.partial(_dkdv_kernel, config=config),
        grid=(batch, heads, length // config.block_k),
        in_specs=[spec["bounds"], spec["ids"], spec["ids_k"], spec["q_all"],
                  spec["k"], spec["k"], whole, spec["q_all"],
                  spec["rows_all"], spec["rows_all"]],
        out_specs=[spec["k_head"], spec["k_head"]],
        out_shape=[jax.ShapeDtypeStruct(q.shape, f32)] * 2,
        interpret=config.interpret,
        compiler_params=_compiler_params(config), name="tfpack_flash_dkdv",
    )(query_ranges, ids, ids, q, k, v, slopes, do, lse, delta)
    kv_heads = k.shape[2]
    # Per query head, summed over the heads that share a kv head.
    dk, dv = (x.reshape(batch, length, kv_heads, config.groups, head_dim)
              .sum(axis=3) for x in (dk, dv))
    return delta, dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(7,))
def _flash(q, k, v, sinks, slopes, ids, ranges, config):
    return _forward(q, k, v, sinks, slopes, ids, ranges[0], config)[0]


def _flash_forward(q, k, v, sinks, slopes, ids, ranges, config):
    o, lse = _forward(q, k, v, sinks, slopes, ids, ranges[0], config)
    return o, (q, k, v, sinks, slopes, ids, ranges, o, lse)


def _flash_backward(config, residuals, do):
    q, k, v, sinks, slopes, ids, ranges, o, lse = residuals
    delta, dq, dk, dv = _backward(q, k, v, slopes, ids, ranges, o, lse, do,
                                  config)
    dsinks = None
    if sinks is not None:
        # d/d sink_h = -sum_i p_sink(i) * delta_i, p_sink = exp(sink - lse).
        dsinks = -jnp.sum(jnp.exp(sinks.astype(jnp.float32)[None, :, None]
                                  - lse) * delta, axis=(0, 2))
        dsinks = dsinks.astype(sinks.dtype)
    # ALiBi slopes are constants of the families (no gradient).
    dslopes = None if slopes is None else jnp.zeros_like(slopes)
    return dq, dk, dv, dsinks, dslopes, None, None


_flash.defvjp(_flash_forward, _flash_backward)


def flash_attention(query, key, value, *, sequence_ids, causal=False,
                    window=None, logit_soft_cap=None, sinks=None,
                    alibi_slopes=None, block_q=None, block_k=None,
                    interpret=None):
    """Context `[B, L, heads, d]` of packed sequences, each attending alone.

    Example (equal to each sequence attending alone):

    >>> import numpy as np
    >>> q = np.random.default_rng(0).normal(size=(1, 6, 2, 4)).astype("float32")
    >>> ids = np.array([[1, 1, 1, 2, 2, 0]])
    >>> out = flash_attention(q, q, q, sequence_ids=ids, causal=True, block_q=2,
    ...                       block_k=2)
    >>> alone = flash_attention(q[:, 3:5], q[:, 3:5], q[:, 3:5],
    ...                         sequence_ids=np.ones((1, 2), int), causal=True)
    >>> bool(np.allclose(np.asarray(out)[0, 3:5], np.asarray(alone)[0], atol=1e-6))
    True

    Args:
        query: `[B, L, heads, d]`, already multiplied by the query scale.
        key, value: `[B, L, kv_heads, d]`; `heads` a multiple of `kv_heads`
            (grouped-query attention: head `h` reads kv head
            `h // (heads // kv_heads)`).
        sequence_ids: int `[B, L]`, 1..K, 0 = padding.
        causal: queries see earlier keys of their sequence only.
        window: `(before, after)` band of token offsets (`band_mask`).
        logit_soft_cap: `c` of the soft cap `c * tanh(s / c)`, or None.
        sinks: `[heads]` sink logits (probability mass, no value), or None.
        alibi_slopes: `[heads]` ALiBi slopes: bias `slope * (j - i)`
            (treated as constants: no gradient), or None.
        block_q, block_k: tokens per query and key block (default
            `block_sizes(L)`: 128, or a quarter of a short row, at least
            16); `L` is padded to a multiple of both.
        interpret: Pallas interpret mode; default: on the CPU only.

    Returns:
        `[B, L, heads, d]` in `query`'s dtype; zeros on padding tokens.
    """
    query, key, value = (jnp.asarray(x) for x in (query, key, value))
    batch, length, heads, _ = query.shape
    if heads % key.shape[2]:
        raise TfpackError("query heads must be a multiple of key heads. "
                          f"Received: heads={heads}, kv_heads={key.shape[2]}")
    if alibi_slopes is not None and jnp.size(alibi_slopes) != heads:
        raise TfpackError(f"`alibi_slopes` must have one slope per head "
                          f"({heads}). Received: {jnp.size(alibi_slopes)} slopes")
    block_q, block_k, padded = block_sizes(length, block_q, block_k)
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    config = _Config(
        block_q, block_k, heads // key.shape[2], bool(causal),
        None if window is None else tuple(int(w) for w in window),
        None if logit_soft_cap is None else float(logit_soft_cap),
        sinks is not None, alibi_slopes is not None, bool(interpret))
    ids = jnp.asarray(sequence_ids, jnp.int32)
    if padded != length:
        pad = [(0, 0), (0, padded - length), (0, 0), (0, 0)]
        query, key, value = (jnp.pad(x, pad) for x in (query, key, value))
        ids = jnp.pad(ids, [(0, 0), (0, padded - length)])
    ranges = block_bounds(ids, block_q, block_k, causal=config.causal,
                          window=config.window)
    sinks = None if sinks is None else jnp.asarray(sinks)
    slopes = None if alibi_slopes is None else jnp.asarray(alibi_slopes)
    return _flash(query, key, value, sinks, slopes, ids, ranges,
                  config)[:, :length]
