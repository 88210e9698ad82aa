"""How the exactness checks compare: tolerances, gradients on each backend, refusals.

`tfpack.testing.exactness` (one-row probes) and `tfpack.testing.pair_exactness`
(encoder-decoder pairs) run a packed model and its reference, then compare here:
every layer output and weight gradient within `TOLERANCES` of the reference's
scale, the first that differs refused in one `PackingNotExactError`.

>>> import numpy as np
>>> difference_of(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
0.5
>>> difference_of(np.array([np.nan]), np.array([0.0]))
inf
"""

from __future__ import annotations

import keras
import numpy as np

from tfpack.testing.exactness_result import PackingNotExactError

__all__ = ["PADDED_BATCH_DIFFERS", "SEED", "TOLERANCES", "backend_function", "backend_gradients",
           "compare_gradients", "compare_outputs", "difference_of", "keras_hub_reference",
           "padded_batch_differs", "refuse"]

# The probes' random draws (projections of the outputs) start here.
SEED = 0
# Largest allowed difference, relative to the largest |value| of the
# reference (per layer output, per weight's gradient), by compute dtype.
# float32: tfpack's tests see ~1e-6 between packed and alone (a different
# summation order), so 1e-4 leaves room for deep models at long L while a
# leak moves untrained outputs by 1e-3 or more of their scale. bfloat16 and
# float16 round each product to 8 and 11 bits (relative 4e-3 and 5e-4), and
# packed and alone sum in different orders, so they get 5e-2 and 1e-2.
TOLERANCES = {"float64": 1e-4, "float32": 1e-4, "float16": 1e-2,
              "bfloat16": 5e-2}


# keras-hub classes (layers or backbones, matched along the MRO) under which
# a sequence padded in a batch is not the sequence alone, and why.
PADDED_BATCH_DIFFERS = {
    # Phi-3's LongRoPE ("su"): the long factor for rows over
    # `pretraining_sequence_length`, the short one for the others.
    "Phi3SuScaledRotaryEmbedding": "takes its rotary factor from the row's length",
    # keras-hub 0.32's `XLNetAttentionMaskLayer` reshapes the `[B, L]`
    # padding mask to `[L, B]` (not a transpose): right for one row only.
    "XLNetBackbone": "mixes up the padding masks of a batch's rows",
}


def padded_batch_differs(reference):
    """`reference`'s first class (of it or its layers, along the MRO) in
    `PADDED_BATCH_DIFFERS` and why, or None.

    >>> import keras
    >>> padded_batch_differs(keras.layers.Dense(2)) is None
    True
    """
    for layer in reference._flatten_layers():
        for cls in type(layer).__mro__:
            if cls.__name__ in PADDED_BATCH_DIFFERS:
                return f"{cls.__name__} {PADDED_BATCH_DIFFERS[cls.__name__]}"
    return None


def keras_hub_reference(backbone):
    """The keras-hub backbone an adapter wraps, or None (lazy: keras-hub is
    optional)."""
    inner = getattr(backbone, "backbone", None)
    if inner is None or type(inner).__module__.split(".")[0] != "keras_hub" \
            and not any(c.__module__.split(".")[0] == "keras_hub"
                        for c in type(inner).__mro__):
        return None
    return inner


def backend_gradients(fn, variables):
    """``(aux, gradients)`` of ``fn() -> (loss, aux)`` on the backend (numpy;
    gradients None where the backend has no gradients here)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss, aux = fn()
        grads = tape.gradient(loss, variables)
        return _as_numpy(aux), [None if g is None else np.asarray(
            tf.convert_to_tensor(g)) for g in grads]
    if backend == "jax":
        import jax

        names = []

        def stateless(values):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                loss, aux = fn()
            names[:] = [name for name, _ in aux]
            return loss, [value for _, value in aux]

        # One compiled program: eager JAX compiles every op on its own.
        values = [v.value for v in variables]
        (_, values), grads = _compiled(jax.value_and_grad(stateless, has_aux=True),
                                       values)(values)
        return _as_numpy(list(zip(names, values))), [np.asarray(g) for g in grads]
    return _as_numpy(fn()[1]), None


def backend_function(fn, variables):
    """``fn(inputs) -> {name: tensor}`` as a function of ``inputs`` that
    returns numpy: on JAX one compiled program with ``variables`` as
    arguments, compiled once per input shape (eager JAX compiles every op on
    its own: a one-layer model's first call took ~30 s of compiles, one
    program ~2 s), elsewhere ``fn`` itself."""
    if keras.backend.backend() != "jax":
        return lambda inputs: _to_numpy(fn(inputs))
    import jax

    def stateless(values, inputs):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return fn(inputs)

    programs = {}

    def run(inputs):
        values = [v.value for v in variables]
        key = tuple((name, np.shape(x), str(np.asarray(x).dtype))
                    for name, x in sorted(inputs.items()))
        if key not in programs:
            programs[key] = _compiled(stateless, values, inputs)
        return _to_numpy(programs[key](values, inputs))

    return run


# XLA's optimizations cost most of a check's time on JAX (a two-layer Llama's
# probe: 11 s at the defaults, 5 s without them) and buy nothing on a probe of
# a dozen tokens; the packed run and its reference compile alike. On the CPU,
# XLA's elemental emitters compile the fused loops in about half the time of
# its MLIR fusion emitters (same arithmetic, no fast math).
_FAST_COMPILE = {"xla_backend_optimization_level": 0,
                 "xla_llvm_disable_expensive_passes": True}
_FAST_COMPILE_CPU = dict(_FAST_COMPILE, xla_cpu_use_fusion_emitters=False)


def _compiled(fn, *arguments):
    """``fn`` compiled by XLA for ``arguments``' shapes, without its costly
    optimizations."""
    import jax

    options = _FAST_COMPILE_CPU if jax.default_backend() == "cpu" else _FAST_COMPILE
    return jax.jit(fn).lower(*arguments).compile(compiler_options=options)


def _to_numpy(tree):
    return {name: np.asarray(keras.ops.convert_to_numpy(value)) for name, value in tree.items()}


def _as_numpy(aux):
    return [(name, np.asarray(keras.ops.convert_to_numpy(
        keras.ops.cast(value, "float32")))) for name, value in aux]


def difference_of(a, b):
    if a.shape != b.shape:
        return np.inf
    difference = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return float(np.nan_to_num(difference, nan=np.inf).max(initial=0.0))


def refuse(location, difference, tolerance, context, where=""):
    raise PackingNotExactError(
        "A packed model must compute every sequence as it computes alone "
        "(tfpack's exactness check, docs/model.md; check_exact=False skips "
        f"it). Received: {location}{where} differs by {difference:.3g}, "
        f"tolerance {tolerance:.3g} ({context})", location, difference, tolerance)


def compare_outputs(packed, alone, lengths, rtol, context, differences):
    """Layer outputs (where both sides have the same ones) then the output."""
    if len(packed) == len(alone):  # Both list their layers in call order.
        names = [b or a or f"layer {i}" for i, ((a, _), (b, _)) in
                 enumerate(zip(packed, alone))]
        packed = [(n, value) for n, (_, value) in zip(names, packed)]
        alone = [(n, value) for n, (_, value) in zip(names, alone)]
    else:  # The layers do not correspond: the output only.
        packed, alone = packed[-1:], alone[-1:]
    offsets = np.cumsum((0,) + tuple(lengths))
    for (location, a), (_, b) in zip(packed, alone):
        tolerance = rtol * float(np.abs(b).max(initial=0.0))
        difference = difference_of(a, b)
        differences[location] = (difference, tolerance)
        if not difference <= tolerance:
            worst = max(range(len(lengths)), key=lambda i: difference_of(
                a[offsets[i]:offsets[i + 1]], b[offsets[i]:offsets[i + 1]]))
            tokens = f"{lengths[worst]} token{'s' if lengths[worst] > 1 else ''}"
            refuse(location, difference, tolerance, context,
                    f" (probe sequence {worst + 1} of {len(lengths)}, {tokens})")


def compare_gradients(variables, packed, alone, rtol, context, differences,
                       floor=1e-3):
    if packed is None or alone is None:
        return
    zeros = [np.zeros(v.shape, "float32") for v in variables]
    packed = [z if g is None else g for z, g in zip(zeros, packed)]
    alone = [z if g is None else g for z, g in zip(zeros, alone)]
    largest = max((float(np.abs(g).max(initial=0.0)) for g in alone), default=0.0)
    for variable, a, b in zip(variables, packed, alone):
        if not a.any() and not b.any():
            continue
        # Relative to the weight's own gradient, floored at `floor` of the
        # largest one so that a near-zero gradient does not demand 0.
        tolerance = rtol * max(float(np.abs(b).max()), floor * largest)
        difference = difference_of(a, b)
        location = f"gradient of {variable.path!r}"
        differences[location] = (difference, tolerance)
        if not difference <= tolerance:
            refuse(location, difference, tolerance, context)
