"""The environment of the tests' JAX subprocesses (Keras on JAX, CPU).

XLA's CPU backend runs LLVM at optimization level 0 there: these checks compile
many small programs (every op of an eager Keras call on JAX is compiled on its
own) and run each a few times on tiny models, so compiling is nearly all their
time. The level changes how fast XLA's code runs, not what it computes (no fast
math at any level); the flags are appended to any ``XLA_FLAGS`` already set.
The same flags set in the suite's own process (``fast_compile_xla_flags``)
make TensorFlow's ``jit_compile=True`` compile faster too.
"""

import os
import subprocess
import sys

FAST_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0 "
                          "--xla_llvm_disable_expensive_passes=true")


def fast_compile_xla_flags(flags=None) -> str:
    """``flags`` (an ``XLA_FLAGS`` value, or None) with the fast-compiling
    flags appended, each at most once (so an environment that has them
    already, e.g. set by the suite for TensorFlow's ``jit_compile``, passes
    them on unchanged).

    >>> fast_compile_xla_flags("--xla_dump_to=x").split()[0]
    '--xla_dump_to=x'
    >>> once = fast_compile_xla_flags()
    >>> fast_compile_xla_flags(once) == once == FAST_COMPILE_XLA_FLAGS
    True
    """
    words = (flags or "").split()
    return " ".join(words + [f for f in FAST_COMPILE_XLA_FLAGS.split()
                             if f not in words])


def jax_env(**extra) -> dict:
    """``os.environ`` with ``KERAS_BACKEND=jax``, fast-compiling XLA, and ``extra``."""
    env = dict(os.environ, KERAS_BACKEND="jax", **extra)
    env["XLA_FLAGS"] = fast_compile_xla_flags(os.environ.get("XLA_FLAGS"))
    return env


def count_flash_calls() -> list:
    """A list that grows by one at each call of the flash kernel's entry
    point (`tfpack.layers.flash_attention.flash_attention`), for the JAX
    subprocesses that check "flash" runs it, not a path giving the same
    numbers."""
    import tfpack.layers.flash_attention as kernel

    calls, original = [], kernel.flash_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    kernel.flash_attention = counted
    return calls


def run_jax_check(script, paths, timeout=600):
    """Runs `script` (Python source printing "ok" last) under Keras on JAX
    in a subprocess with `paths` on PYTHONPATH; asserts it passed."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True,
        env=jax_env(PYTHONPATH=os.pathsep.join(str(p) for p in paths)),
        timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok"), done.stdout
