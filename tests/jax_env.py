"""The environment of the tests' JAX subprocesses (Keras on JAX, CPU).

XLA's CPU backend runs LLVM at optimization level 0 there: these checks compile
many small programs (every op of an eager Keras call on JAX is compiled on its
own) and run each a few times on tiny models, so compiling is nearly all their
time. The level changes how fast XLA's code runs, not what it computes (no fast
math at any level). XLA's older elemental emitters for the CPU's fused loops
(``xla_cpu_use_fusion_emitters=false``) compile in about half the time of its
MLIR fusion emitters (a two-layer Llama's program with its gradient: 2.9 ->
1.4 s of CPU); the flags are appended to any ``XLA_FLAGS`` already set
(``fast_compile_xla_flags``). The suite's own processes set them too, for
TensorFlow's ``jit_compile=True`` (``conftest.py``, with the figures).

The subprocesses also compile each program as one LLVM module
(``--xla_cpu_parallel_codegen_split_count=1``, `SERIAL_CODEGEN_FLAG`): XLA
splits a module to compile the parts on parallel threads, which costs more
CPU in all (the parts repeat work), and the suite's workers already fill the
cores (a flash family's program: 1.06-1.29 -> 0.83-0.87 s of CPU to
compile). Unlike the flags above it can change the order of a float32 sum:
Llama's flash-and-dense program gave 6 of its 46 outputs 1 ulp apart
(1.5e-5 on 396); every check compares programs built with the same flags.

TensorFlow is blocked there (``tests/no_tensorflow/sitecustomize.py``): Keras
on JAX must run without it (an accelerator machine may have none), and a
subprocess that imported it for nothing paid seconds of CPU. A check that
reads TFRecords or tf.data asks for it (``jax_env(tensorflow=True)``, with
the reason beside the call). Blocked as well, in every one of them: the
optional packages Keras and keras-hub import at start-up for features no
check uses (`OPTIONAL_UNUSED`: about 1.3 of 3.1 CPU s of ``import jax,
keras, keras_hub``, 1.0 of 5.2 with TensorFlow).
"""

import os
import pathlib
import subprocess
import sys

# A folder whose ``sitecustomize`` blocks the modules ``TFPACK_TESTS_BLOCKED`` names
# (TensorFlow where it is unset: Keras on JAX needs none).
NO_TENSORFLOW = pathlib.Path(__file__).resolve().parent / "no_tensorflow"

# Imported by Keras (scikit-learn wrappers, image plots) and keras-hub
# (preset downloads) inside ``try: ... except ImportError``, used by no check.
OPTIONAL_UNUSED = ("sklearn", "matplotlib", "kagglehub", "huggingface_hub")

FAST_COMPILE_XLA_FLAGS = ("--xla_backend_optimization_level=0 "
                          "--xla_llvm_disable_expensive_passes=true "
                          "--xla_cpu_use_fusion_emitters=false")


# One LLVM module a program in the subprocesses (see the module's docstring).
SERIAL_CODEGEN_FLAG = "--xla_cpu_parallel_codegen_split_count=1"


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


def fast_compile_options() -> dict:
    """``FAST_COMPILE_XLA_FLAGS`` as ``jax.jit``'s ``compiler_options``, for
    the programs a test compiles in the suite's own process (whose
    ``XLA_FLAGS`` stay as they are).

    >>> fast_compile_options()["xla_cpu_use_fusion_emitters"]
    False
    """
    values = {"true": True, "false": False}
    options = (flag[2:].split("=", 1) for flag in FAST_COMPILE_XLA_FLAGS.split())
    return {name: values.get(value, value) for name, value in options}


def jax_env(*, tensorflow: bool = False, **extra) -> dict:
    """``os.environ`` with ``KERAS_BACKEND=jax``, fast-compiling XLA, and ``extra``;
    TensorFlow blocked (`NO_TENSORFLOW` first on ``PYTHONPATH``, its
    ``sitecustomize`` blocking what ``TFPACK_TESTS_BLOCKED`` names) unless
    ``tensorflow`` (a check that reads TFRecords with tf.data, or imports a
    module that imports TensorFlow, says so at its call, with the reason);
    `OPTIONAL_UNUSED` blocked in either case; `SERIAL_CODEGEN_FLAG` unless
    ``XLA_FLAGS`` sets the split already.

    >>> env = jax_env(PYTHONPATH="src")
    >>> env["PYTHONPATH"].split(os.pathsep) == [str(NO_TENSORFLOW), "src"]
    True
    >>> env["TFPACK_TESTS_BLOCKED"].split() == ["tensorflow", *OPTIONAL_UNUSED]
    True
    >>> jax_env(tensorflow=True)["TFPACK_TESTS_BLOCKED"].split() == list(OPTIONAL_UNUSED)
    True
    >>> env["XLA_FLAGS"].split()[-1] == SERIAL_CODEGEN_FLAG
    True
    """
    env = dict(os.environ, KERAS_BACKEND="jax", **extra)
    flags = fast_compile_xla_flags(os.environ.get("XLA_FLAGS"))
    if "--xla_cpu_parallel_codegen_split_count" not in flags:
        flags += " " + SERIAL_CODEGEN_FLAG
    env["XLA_FLAGS"] = flags
    env["TFPACK_TESTS_BLOCKED"] = " ".join(
        (() if tensorflow else ("tensorflow",)) + OPTIONAL_UNUSED)
    paths = env.get("PYTHONPATH")  # kept as it is: an empty entry is the folder run in
    env["PYTHONPATH"] = str(NO_TENSORFLOW) + (os.pathsep + paths if paths else "")
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
