"""The flash kernel (Pallas interpret mode on the CPU) equals dense attention.

Forward and gradients, float32, to 1e-5: packs with sequences straddling
blocks, one-token sequences and padding. The wrapper takes any positive block
sizes (padding `L` to a multiple of both): a spread of them runs, from 1 to
the whole row, powers of two and not (5 x 3), dividing `L` and not.
Interpret mode compiles each configuration for a few seconds: the cases are
few and tiny, and each compiles without XLA's costly optimizations
(`jax_env.fast_compile_options`: they change how fast the code runs, not what it
computes; 1.3 -> 0.4 s of CPU a case).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_env import fast_compile_options
from tfpack.errors import TfpackError
from tfpack.layers.flash_attention import block_sizes, flash_attention

B, L, HEADS, KV_HEADS, D = 2, 40, 4, 2, 8


def dense_attention(q, k, v, ids, *, causal=False, window=None,
                    logit_soft_cap=None, sinks=None, alibi_slopes=None):
    """The `[L, L]` reference, written out."""
    groups = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, groups, 2), jnp.repeat(v, groups, 2)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision="highest")
    if logit_soft_cap is not None:
        s = logit_soft_cap * jnp.tanh(s / logit_soft_cap)
    index = jnp.arange(q.shape[1])
    if alibi_slopes is not None:
        # BLOOM's form, slope * key position inside the sequence.
        first = jnp.argmax(ids[:, None, :] == ids[:, :, None], axis=2)
        s = s + (jnp.asarray(alibi_slopes)[None, :, None, None]
                 * (index - first)[:, None, None, :])
    mask = (ids[:, :, None] == ids[:, None, :]) & (ids[:, :, None] > 0)
    if causal:
        mask &= index[:, None] >= index[None, :]
    if window is not None:
        mask &= ((index[None, :] >= index[:, None] - window[0])
                 & (index[None, :] <= index[:, None] + window[1]))
    s = jnp.where(mask[:, None], s, -1e30)
    if sinks is not None:
        sink = jnp.broadcast_to(sinks[None, :, None, None], s.shape[:3] + (1,))
        s = jnp.concatenate([s, sink], axis=-1)
    p = jax.nn.softmax(s, axis=-1)[..., :q.shape[1]]
    p = jnp.where(mask[:, None], p, 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v, precision="highest")


@pytest.fixture(scope="module")
def pack():
    rng = np.random.default_rng(0)
    ids = np.zeros((B, L), np.int32)
    # Row 0: 7 tokens, a one-token sequence, 22 tokens straddling blocks,
    # 7 tokens, 3 padding. Row 1: two sequences of 20, no padding.
    for row, lengths in enumerate([(7, 1, 22, 7), (20, 20)]):
        ids[row, :sum(lengths)] = np.repeat(np.arange(1, len(lengths) + 1),
                                            lengths)
    arrays = {name: jnp.asarray(rng.normal(size=shape), jnp.float32) for
              name, shape in (("q", (B, L, HEADS, D)), ("k", (B, L, KV_HEADS, D)),
                              ("v", (B, L, KV_HEADS, D)),
                              ("cotangent", (B, L, HEADS, D)),
                              ("sinks", (HEADS,)))}
    arrays["ids"] = jnp.asarray(ids)
    return arrays


def _loss(attend, pack, options):
    real = (pack["ids"] > 0)[:, :, None, None]

    def loss(q, k, v, sinks):
        extra = {"sinks": sinks} if "sinks" in options else {}
        out = attend(q, k, v, **{**options, **extra})
        return jnp.sum(jnp.where(real, out, 0.0) * pack["cotangent"]), out

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True),
                   compiler_options=fast_compile_options())


@pytest.fixture(scope="module")
def dense_reference(pack):
    """Dense attention's `((loss, out), gradients)` for `options`, computed
    once per options: the block sizes' cases share it (one compilation
    each instead of one a case)."""
    done = {}

    def dense(q, k, v, **kw):
        return dense_attention(q, k, v, pack["ids"], **kw)

    def reference(options):
        key = repr(sorted(options.items()))
        if key not in done:
            done[key] = _loss(dense, pack, options)(
                pack["q"], pack["k"], pack["v"], pack["sinks"])
        return done[key]

    return reference


def _check(pack, reference, options, block_q, block_k):
    def flash(q, k, v, **kw):
        return flash_attention(q, k, v, sequence_ids=pack["ids"],
                               block_q=block_q, block_k=block_k,
                               interpret=True, **kw)

    args = (pack["q"], pack["k"], pack["v"], pack["sinks"])
    (_, got), got_grads = _loss(flash, pack, options)(*args)
    (_, want), want_grads = reference(options)
    real = np.asarray(pack["ids"] > 0)
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real],
                               atol=1e-5, rtol=1e-5)
    assert not np.asarray(got)[~real].any()  # zeros on padding
    for got_grad, want_grad in zip(got_grads, want_grads):
        np.testing.assert_allclose(np.asarray(got_grad), np.asarray(want_grad),
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_equals_dense(pack, dense_reference, causal):
    _check(pack, dense_reference, {"causal": causal}, 8, 8)


@pytest.mark.slow
@pytest.mark.parametrize("block_q,block_k", [(1, 1), (4, 16), (16, 4), (8, 32),
                                             (64, 64), (5, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_every_block_size(pack, dense_reference, block_q, block_k, causal):
    _check(pack, dense_reference, {"causal": causal}, block_q, block_k)


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    {"causal": True, "window": (3, 0)},        # Mistral-style sliding window
    {"window": (2, 5)},                        # a bidirectional band
    {"causal": True, "logit_soft_cap": 2.0},   # Gemma
    {"causal": True, "sinks": None},           # GPT-OSS sink logits
    {"causal": True, "alibi_slopes": (0.5, 0.25, 0.125, 0.0625)},  # BLOOM
], ids=["window", "band", "soft_cap", "sinks", "alibi"])
def test_extras(pack, dense_reference, options):
    _check(pack, dense_reference, options, 8, 16)


def test_block_sizes_are_checked():
    assert block_sizes(40, 8, 16) == (8, 16, 48)
    with pytest.raises(TfpackError, match=r"Received: block_q=0"):
        block_sizes(40, 0, 16)
    with pytest.raises(TfpackError, match=r"Received: heads=3, kv_heads=2"):
        flash_attention(np.ones((1, 4, 3, 2), "float32"),
                        np.ones((1, 4, 2, 2), "float32"),
                        np.ones((1, 4, 2, 2), "float32"),
                        sequence_ids=np.ones((1, 4), int))


def test_bfloat16_operands_stay_close_to_float32(pack, dense_reference):
    """bfloat16 q, k, v (the GPU case): dots on bfloat16 with float32 sums,
    within bfloat16's rounding of the float32 reference."""
    def flash(q, k, v, **kw):
        return flash_attention(q.astype(jnp.bfloat16), k.astype(jnp.bfloat16),
                               v.astype(jnp.bfloat16), sequence_ids=pack["ids"],
                               block_q=8, block_k=8, interpret=True,
                               **kw).astype(jnp.float32)

    args = (pack["q"], pack["k"], pack["v"], pack["sinks"])
    (_, got), got_grads = _loss(flash, pack, {"causal": True})(*args)
    (_, want), want_grads = dense_reference({"causal": True})
    real = np.asarray(pack["ids"] > 0)
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real],
                               atol=3e-2, rtol=3e-2)
    for got_grad, want_grad in zip(got_grads[:3], want_grads[:3]):
        scale = float(np.abs(want_grad).max())
        np.testing.assert_allclose(np.asarray(got_grad), np.asarray(want_grad),
                                   atol=3e-2 * scale)


@pytest.mark.parametrize("options", [
    {"causal": True},
    {"causal": True, "window": (64, 0), "logit_soft_cap": 30.0},
    {"causal": True, "sinks": True},
    {"causal": True, "alibi_slopes": True},
], ids=["causal", "window_soft_cap", "sinks", "alibi"])
def test_kernels_lower_for_cuda(options):
    """Forward and backward lower to Triton for a CUDA GPU, checked here on
    the CPU (`jax.export` to the `cuda` platform): JAX's default Pallas GPU
    backend (Mosaic GPU) and boolean reductions do not lower, which only a
    GPU run would otherwise show."""
    from jax import export

    heads = 12  # not a power of two: the per-head vectors' block
    q = jnp.zeros((1, 256, heads, 64), jnp.bfloat16)
    k = jnp.zeros((1, 256, 4, 64), jnp.bfloat16)
    ids = jnp.ones((1, 256), jnp.int32)
    extra = {name: jnp.zeros((heads,), jnp.float32)
             for name in ("sinks", "alibi_slopes") if options.get(name)}
    options = {**{k: v for k, v in options.items() if k not in extra}, **extra}

    def loss(q, k, v):
        return flash_attention(q, k, v, sequence_ids=ids, interpret=False,
                               **options).astype(jnp.float32).sum()

    triton = export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")
    exported = export.export(
        jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))),
        platforms=["cuda"], disabled_checks=[triton])(q, k, k)
    # Three kernels: forward, dq, dk and dv.
    assert exported.mlir_module().count("__gpu$xla.gpu.triton") == 3
