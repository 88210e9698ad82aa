"""The recurrences with resets equal keras-hub's own functions on each sequence alone.

Packs straddle keras-hub's chunk of 64 tokens (and chunks of 8), hold a
one-token sequence and sequences shorter than the convolution's kernel; the
reference is keras-hub's function run on every sequence alone. Outputs and
the gradients of a random projection of them must match, and a run without
the resets (one segment a row) must not: the comparison can fail.
"""

import pathlib

import numpy as np
import pytest
import tensorflow as tf

from jax_env import run_jax_check
from recurrence_inputs import (LENGTH, ROWS, delta_inputs, row_ids, rwkv_inputs,
                               sequence_spans)
from tfpack.layers import recurrence

gdn = pytest.importorskip(
    "keras_hub.src.models.qwen3_5.qwen3_5_gated_delta_net")
rwkv = pytest.importorskip("keras_hub.src.models.rwkv7.rwkv7_layer")

def _weights(shape):
    return np.random.default_rng(7).normal(size=shape).astype("float32")


def _alone(alone_fn, inputs, rows):
    """`alone_fn` on every sequence alone: `[(row, start, stop, output)]` and
    the gradients of the random projection `_weights` of the outputs."""
    variables = [tf.Variable(x) for x in inputs]
    results, loss = [], 0.0
    with tf.GradientTape() as tape:
        for r, start, stop in sequence_spans(rows):
            out = alone_fn(*(tf.identity(v[r:r + 1, start:stop])
                             for v in variables))
            weights = _weights((len(rows), inputs[0].shape[1])
                               + tuple(out.shape[2:]))
            loss += tf.reduce_sum(out * weights[r:r + 1, start:stop])
            results.append((r, start, stop, np.asarray(out)))
    return results, [np.asarray(g) for g in tape.gradient(loss, variables)]


_CHUNKED_ALONE = {}


def _compare(packed_fn, alone, inputs, segments, gradients=True,
             atol=1e-5):
    """Outputs (and input gradients) of `packed_fn(*inputs, segments)`
    against `alone` (`_alone`'s); returns the largest output error relative
    to each sequence's scale."""
    expected, expected_grads = alone
    variables = [tf.Variable(x) for x in inputs]
    with tf.GradientTape() as tape:
        packed = packed_fn(*(tf.identity(v) for v in variables), segments)
        real = (np.asarray(segments) > 0).reshape(
            segments.shape + (1,) * (len(packed.shape) - 2))
        loss = tf.reduce_sum(packed * _weights(packed.shape) * real)
    worst = 0.0
    for r, start, stop, out in expected:
        scale = max(1.0, float(np.abs(out).max()))
        got = np.asarray(packed[r:r + 1, start:stop])
        worst = max(worst, float(np.abs(got - out).max()) / scale)
    if gradients:
        for a, b in zip(tape.gradient(loss, variables), expected_grads):
            np.testing.assert_allclose(
                np.asarray(a), b, rtol=0,
                atol=atol * max(1.0, float(np.abs(b).max())))
    return worst


def _keras_hub_chunked(q, k, v, g, beta):
    return gdn._chunk_gated_delta_rule(q, k, v, g, beta)[0]


def _keras_hub_recurrent(q, k, v, g, beta):
    return gdn._recurrent_gated_delta_rule(q, k, v, g, beta)[0]


def _chunked_alone():
    if not _CHUNKED_ALONE:  # keras-hub's eager chunks are slow: once.
        _CHUNKED_ALONE["alone"] = _alone(_keras_hub_chunked, delta_inputs(),
                                         ROWS)
    return _CHUNKED_ALONE["alone"]


@pytest.mark.parametrize("chunk_size", [64, 8])
def test_chunked_gated_delta_rule_equals_keras_hub_on_each_sequence(
        chunk_size):
    worst = _compare(
        lambda *a: recurrence.chunked_gated_delta_rule(
            *a[:5], recurrence.segments_of(a[5]), chunk_size=chunk_size),
        _chunked_alone(), delta_inputs(), row_ids())
    assert worst < 1e-5


def test_without_resets_the_comparison_fails():
    one_segment = np.ones((len(ROWS), LENGTH), "int32")
    worst = _compare(
        lambda *a: recurrence.chunked_gated_delta_rule(*a[:5], one_segment),
        _chunked_alone(), delta_inputs(), row_ids(), gradients=False)
    assert worst > 1e-2


def test_recurrent_gated_delta_rule_equals_keras_hub_on_each_sequence():
    rows = [[9, 1, 2, 4]]
    segments = row_ids(rows, 18)
    worst = _compare(
        lambda *a: recurrence.recurrent_gated_delta_rule(
            *a[:5], recurrence.segments_of(a[5])),
        _alone(_keras_hub_recurrent, delta_inputs(1, rows, 18), rows),
        delta_inputs(1, rows, 18), segments)
    assert worst < 1e-5


def test_causal_conv1d_reads_no_other_sequence():
    rows = [[5, 1, 2, 3, 4], [3, 12]]
    segments = row_ids(rows, 16)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 16, 6)).astype("float32")
    kernel = rng.normal(size=(6, 4)).astype("float32")

    def alone(x):
        out = gdn._causal_conv1d(tf.transpose(x, (0, 2, 1)), kernel)
        return tf.transpose(out, (0, 2, 1))

    worst = _compare(
        lambda x, s: recurrence.causal_conv1d(x, kernel,
                                              recurrence.segments_of(s)),
        _alone(alone, [x], rows), [x], segments)
    assert worst < 1e-6


def test_token_shift_is_rwkvs_on_each_sequence():
    rows = [[1, 4, 2]]
    segments = row_ids(rows, 8)
    x = np.random.default_rng(3).normal(size=(1, 8, 3)).astype("float32")
    shift = rwkv.TimeShift()
    worst = _compare(
        lambda x, s: recurrence.shift_within(x, recurrence.segments_of(s)),
        _alone(shift, [x], rows), [x], segments)
    assert worst == 0.0


def test_generalized_delta_rule_equals_rwkvs_on_each_sequence():
    rows = [[7, 1, 2, 5], [3, 12]]
    segments = row_ids(rows, 16)

    def alone(*inputs):
        return rwkv.rnn_generalized_delta_rule(*inputs)[0]

    worst = _compare(
        lambda *a: recurrence.generalized_delta_rule(
            *a[:6], recurrence.segments_of(a[6])),
        _alone(alone, rwkv_inputs(rows, 16), rows), rwkv_inputs(rows, 16),
        segments)
    assert worst < 1e-5


def test_other_sequences_do_not_move_a_sequences_outputs():
    # Bit for bit: another sequence's inputs never enter a sum.
    segments = recurrence.segments_of(row_ids())
    inputs = delta_inputs()
    changed = delta_inputs(seed=9)
    mixed = [np.where((row_ids() == 2)[..., None, None]
                      if x.ndim == 4 else (row_ids() == 2)[..., None], c, x)
             for x, c in zip(inputs, changed)]
    for fn in (lambda *a: recurrence.chunked_gated_delta_rule(*a, 64),
               lambda *a: recurrence.chunked_gated_delta_rule(*a, 8)):
        before = np.asarray(fn(*inputs, segments))
        after = np.asarray(fn(*mixed, segments))
        others = row_ids() != 2
        np.testing.assert_array_equal(before[others], after[others])
        assert not np.array_equal(before[~others], after[~others])


def test_segments_restart_at_every_change_of_sequence_id():
    ids = np.array([[1, 1, 2, 3, 3, 0, 0], [1, 2, 2, 2, 2, 2, 2]])
    np.testing.assert_array_equal(
        recurrence.segments_of(ids), [[1, 1, 2, 3, 3, 4, 4],
                                      [1, 2, 2, 2, 2, 2, 2]])


_JAX_CHECK = """
import jax, numpy as np, keras
assert keras.backend.backend() == "jax"
from keras_hub.src.models.qwen3_5 import qwen3_5_gated_delta_net as gdn
from keras_hub.src.models.rwkv7 import rwkv7_layer as rwkv
from tfpack.layers import recurrence
from recurrence_inputs import delta_inputs, row_ids, rwkv_inputs, sequence_spans


def chunked(*a):
    return recurrence.chunked_gated_delta_rule(*a[:5], a[5], 8)


def one(fn):  # `fn` on a sequence alone: one segment.
    return lambda *a: fn(*a, np.ones(a[0].shape[:2], "int32"))


rows = [[66, 1, 3]]
rwkv_rows = [[7, 1, 2, 5]]
# (inputs, ids, packed, alone output, alone gradient): keras-hub's gated
# delta rule compiles for minutes under jax.grad (its 63-step loop a chunk),
# so its gradient reference is the rule on each sequence alone, which
# test_recurrence's TensorFlow tests hold equal to keras-hub's.
cases = [
    (delta_inputs(0, rows, 70), row_ids(rows, 70), chunked,
     lambda *a: gdn._chunk_gated_delta_rule(*a)[0], one(chunked), rows),
    (rwkv_inputs(rwkv_rows, 16), row_ids(rwkv_rows, 16),
     lambda *a: recurrence.generalized_delta_rule(*a[:6], a[6]),
     lambda *a: rwkv.rnn_generalized_delta_rule(*a)[0],
     lambda *a: rwkv.rnn_generalized_delta_rule(*a)[0], rwkv_rows),
]
for inputs, ids, packed_fn, alone_fn, alone_grad_fn, rows in cases:
    segments = recurrence.segments_of(ids)
    out = np.asarray(jax.jit(packed_fn)(*inputs, segments))
    weights = np.random.default_rng(7).normal(size=out.shape).astype("float32")
    real = (ids > 0).reshape(ids.shape + (1,) * (out.ndim - 2))

    def packed_loss(inputs):
        return (packed_fn(*inputs, segments) * weights * real).sum()

    def alone_loss(inputs):
        return sum((alone_grad_fn(*(x[r:r + 1, a:b] for x in inputs))
                    * weights[r:r + 1, a:b]).sum() for r, a, b in sequence_spans(rows))

    grads = jax.jit(jax.grad(packed_loss))(inputs)
    expected = jax.jit(jax.grad(alone_loss))(inputs)
    # keras-hub's function on every sequence alone, each its own row right
    # padded, in one batch (causal: padding after a sequence never reaches
    # it): one copy of its loops to compile, not one a sequence.
    spans = sequence_spans(rows)
    longest = max(b - a for _, a, b in spans)
    alone_all = np.asarray(jax.jit(alone_fn)(*(
        np.stack([np.pad(x[r, a:b], [(0, longest - (b - a))] + [(0, 0)] * (x.ndim - 2))
                  for r, a, b in spans]) for x in inputs)))
    for i, (r, a, b) in enumerate(spans):
        alone = alone_all[i:i + 1, :b - a]
        np.testing.assert_allclose(out[r:r + 1, a:b], alone, rtol=0,
                                   atol=1e-5 * max(1, np.abs(alone).max()))
    for g, e in zip(grads, expected):
        e = np.asarray(e)
        np.testing.assert_allclose(np.asarray(g), e, rtol=0,
                                   atol=1e-5 * max(1, np.abs(e).max()))
print("ok")
"""


@pytest.mark.slow  # XLA compiles keras-hub's chunk loop: ~30 s of CPU.
def test_recurrences_equal_keras_hubs_on_jax_under_jit():
    pytest.importorskip("jax")
    here = pathlib.Path(__file__).parent
    run_jax_check(_JAX_CHECK, [here, here.parent, here.parents[1]])
