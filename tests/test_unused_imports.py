"""The tests' processes skip JAX, scikit-learn and matplotlib where TensorFlow and
Keras import them for nothing (`unused_imports.py`), and nowhere else; they import
the heavy packages with the garbage collector paused, then frozen
(`paused_imports.py`)."""

import os
import pathlib
import subprocess
import sys

import unused_imports

ROOT = pathlib.Path(__file__).resolve().parents[1]

_CHILD = """
import gc, sys
import tensorflow, keras, keras_hub
skipped = [m for m in ("jax", "sklearn", "matplotlib", "kagglehub") if m in sys.modules]
paused = (gc.isenabled() and gc.get_freeze_count() > 100_000
          and "exec_module" not in vars(tensorflow.__spec__.loader))
import jax.numpy, sklearn.base, matplotlib.pyplot  # asked for: imported
print("skipped", not skipped, "imported", all(m in sys.modules for m in ("jax", "sklearn")),
      "paused", paused)
"""


def test_a_subprocess_skips_them_for_tensorflow_and_keras_only():
    """A subprocess with the inherited ``PYTHONPATH`` (``conftest.py``): the refusals,
    and the collector on again after the imports with their objects frozen, the
    loader left as it was."""
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(unused_imports.SITE)
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-6:] == ["skipped", "True", "imported", "True",
                                        "paused", "True"], done.stdout


def test_the_finder_refuses_only_its_pairs():
    finder = unused_imports.RefuseUnused()
    assert finder.refuses("jax", "tensorflow.lite.python.util")
    assert finder.refuses("sklearn.base", "keras.src.wrappers.sklearn_wrapper")
    assert finder.refuses("matplotlib.pyplot", "keras.src.visualization.plot_image_gallery")
    assert not finder.refuses("jax", "keras.src.backend.jax.core")  # Keras on JAX
    assert not finder.refuses("matplotlib.pyplot", "tfpack.plots")
    assert not finder.refuses("jaxtyping", "tensorflow.lite.python.util")
