"""Test-suite settings shared by every test module."""

import gc
import os

import paused_imports
import unused_imports

# Quiet TensorFlow's C++ logging before any test imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Neither this process nor the subprocesses that inherit its environment import
# JAX, scikit-learn or matplotlib for TensorFlow's and Keras's optional
# features the tests never use (about 2 CPU s a process): tests/unused_imports.py.
unused_imports.install()
# TensorFlow, Keras, JAX, ... imported with the garbage collector paused, then frozen
# (tests/paused_imports.py), here and in every subprocess through the site.
paused_imports.install()
# The young collections every 20,000 new container objects instead of 700 (the older
# generations in proportion), as the subprocess sites do: the tests' models and traces
# allocate millions of objects that live on, and each collection scanned them again.
# tests/test_readme.py + tests/models/test_model_docs.py + tests/test_demo.py: 1.61 CPU s
# in 1,992 collections -> 0.62 s in 69 (`gc.callbacks` timing, 2026-11-29).
gc.set_threshold(20_000, 20, 50)
os.environ["PYTHONPATH"] = unused_imports.with_site(os.environ.get("PYTHONPATH"))

# TensorFlow's `jit_compile=True` here and in every subprocess compiles with the
# fast XLA settings of the JAX subprocesses (tests/jax_env.py): the tests check
# what the compiled programs compute, which the LLVM level does not change, and
# they compile far more than they run. tests/test_readme.py and
# tests/models/test_model_docs.py: 53.1, 52.7 -> 48.2, 47.0 CPU s;
# tests/layers/test_segmented_attention.py and tests/training/test_loop.py:
# 36.6, 34.5 -> 30.3, 31.1 (interleaved, -n 0, 2026-11-29). (261ae9d backed
# this out on two loaded wall-clock runs; CPU seconds, interleaved, show the gain.)
from jax_env import fast_compile_xla_flags  # noqa: E402

os.environ["XLA_FLAGS"] = fast_compile_xla_flags(os.environ.get("XLA_FLAGS"))

from hypothesis import HealthCheck, settings  # noqa: E402

# CI machines are shared and noisy: property tests are judged on correctness,
# never on per-example timing.
settings.register_profile(
    "tfpack",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("tfpack")

# The heaviest test files, heaviest first (seconds of tests plus module fixtures,
# from `--durations` runs of each directory). `make test` runs them first (with
# `--no-loadscope-reorder`, xdist hands out files in collection order, and
# tests/training comes last): a long file started last would leave the other
# worker idle at the end. Every other file keeps its place after these.
HEAVY_FILES_FIRST = (
    "tests/training/test_host_training.py",
    "tests/models/keras_hub/test_keras_hub_flash.py",
    "tests/test_readme.py",
    "tests/models/keras_hub/test_keras_hub_recurrent.py",
    "tests/models/keras_hub/test_keras_hub_seq2seq.py",
    "tests/layers/test_flash_blocks.py",
    "tests/models/test_preference_training.py",
    "tests/cli/test_train.py",
    "tests/models/test_preference_example.py",
    "tests/faults/test_carried.py",
    "tests/models/keras_hub/test_keras_hub_seq2seq_segmented.py",
    "tests/export/test_minilm_serving.py",
    "tests/training/test_multihost_jax.py",
    "tests/training/test_distributed_packed.py",
    "tests/models/test_packed_models.py",
    "tests/export/test_saved_model.py",
    "tests/models/keras_hub/test_conformance.py",
    "tests/training/test_worker_inputs.py",
    "tests/training/test_distributed.py",
    "tests/export/test_export_paths.py",
    "tests/training/test_resume.py",
    "tests/data/test_host_packing.py",
    "tests/faults/test_cli.py",
    "tests/faults/test_reading.py",
    "tests/faults/test_kill.py",
    "tests/models/keras_hub/test_keras_hub_tasks.py",
    "tests/engines/test_beam_pipeline.py",
    "tests/data/test_packing_pipeline.py",
    "tests/engines/test_pack_kill.py",
    "tests/training/test_loop.py",
    "tests/test_demo.py",
    "tests/models/test_preference.py",
    "tests/export/test_serving_values.py",
    "tests/layers/test_segmented_attention.py",
    "tests/models/test_model_docs.py",
    "tests/training/test_kill.py",
    "tests/export/test_export_kill.py",
    "tests/models/keras_hub/test_keras_hub_decoder_attention.py",
    "tests/faults/test_pack_compiled.py",
    "tests/faults/test_compiled_checks.py",
    "tests/training/test_accumulation.py",
)


def pytest_collection_modifyitems(config, items):
    """Moves the heavy files first; order within each file is kept."""
    rank = {path: i for i, path in enumerate(HEAVY_FILES_FIRST)}
    position = {id(item): i for i, item in enumerate(items)}

    def key(item):
        path = item.nodeid.split("::", 1)[0]
        return rank.get(path, len(rank)), position[id(item)]

    items.sort(key=key)


def pytest_collection_finish(session):
    """Freezes what collection imported (TensorFlow, Keras, keras-hub, the test
    modules) out of the cyclic garbage collector's scans in this worker.

    None of it is garbage, and every full collection scanned all of it again:
    on four TensorFlow-heavy files in one process, 5.8-6.1 of 68-72 CPU s were
    the collector's, 3.7-3.9 with this (2026-11-29, `gc.callbacks` timing).
    """
    gc.collect()
    gc.freeze()
