"""Blocks TensorFlow in the tests' JAX subprocesses.

`tests/jax_env.py` puts this folder first on ``PYTHONPATH``; Python imports
``sitecustomize`` at start-up, before the check's own code, so there
``import tensorflow`` (and anything that imports it) raises ImportError. The
checks thereby prove that Keras on JAX needs no TensorFlow (an accelerator
machine may have none), and they skip its import (seconds of CPU each).
"""

import sys

sys.modules["tensorflow"] = None
