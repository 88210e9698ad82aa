"""Keras on JAX without TensorFlow: the model side of tfpack imports and runs, and
what needs TensorFlow refuses with one `TfpackError` naming itself.

One subprocess (TensorFlow blocked by `tests/jax_env.py`, as in every JAX check
of the suite) imports the TensorFlow-free subpackages, runs the run-time
exactness check on a tiny packed model, and calls the TensorFlow-only entry
points.
"""

import pathlib

import pytest

from jax_env import run_jax_check

ROOT = pathlib.Path(__file__).resolve().parents[1]

_SCRIPT = r"""
import sys
assert sys.modules["tensorflow"] is None, "tests/jax_env.py did not block TensorFlow"
import keras
assert keras.backend.backend() == "jax"

import tfpack
import tfpack.evaluation, tfpack.layers, tfpack.models, tfpack.models.keras_hub
import tfpack.testing, tfpack.training
from tfpack._tensorflow import TensorFlowMissing
from tfpack.errors import TfpackError
from tfpack.models import BertEncoder
from tfpack.testing import check_packing_exact
from tfpack.training import Lamb, for_packing

keras.utils.set_random_seed(0)
encoder = BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
                      intermediate_dim=16)
result = check_packing_exact(encoder)
# Dense packing differs only by float rounding: at most a hundredth of the tolerance (1e-4 of
# the scale). On an AVX2-only CPU (session 19) XLA's summation order left 9.7e-4 of it.
assert result.differences and result.worst[1] < 1e-2, result
assert Lamb(learning_rate=1e-3).name and for_packing(micro_batch_size=4).micro_batch_size == 4

def refusal(call):
    try:
        call()
    except TensorFlowMissing as error:
        assert isinstance(error, TfpackError) and isinstance(error, ImportError)
        return str(error)
    raise AssertionError(f"{call} ran without TensorFlow")

import importlib
refusals = {
    "tfpack.data (tf.data pipelines) needs TensorFlow":
        lambda: importlib.import_module("tfpack.data"),
    "tfpack.formats (TFRecords) needs TensorFlow":
        lambda: importlib.import_module("tfpack.formats.records"),
    "tfpack.export (SavedModels) needs TensorFlow":
        lambda: importlib.import_module("tfpack.export"),
    "tfpack.inference (tfpack.predict": lambda: tfpack.predict,
    "tfpack.training.Trainer needs TensorFlow": lambda: tfpack.training.Trainer,
    "tfpack.training.packed_dataset_fn needs": lambda: tfpack.training.packed_dataset_fn,
    "tfpack.builders.classification_examples needs":
        lambda: tfpack.builders.classification_examples,
}
for expected, call in refusals.items():
    message = refusal(call)
    assert message.startswith(expected) and "pip install tensorflow" in message, message
assert sys.modules["tensorflow"] is None
print("ok")
"""


@pytest.mark.slow  # One JAX process: ~10 s of CPU (imports, one probe pack compiled).
def test_keras_on_jax_runs_tfpack_models_without_tensorflow():
    pytest.importorskip("jax")
    run_jax_check(_SCRIPT, [ROOT], timeout=300)
