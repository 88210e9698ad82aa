"""The one door to keras-hub's private names (`tfpack.models.keras_hub.internals`).

A keras-hub release that renames, removes or reshapes a private name an
adapter reads must be refused in one line naming the family, the keras-hub
version and the tested one, when the adapter is built; the adapters read
no private keras-hub name except through the door; and the skeleton hands
out every layer's output.
"""

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from jax_env import jax_env
from keras_hub_helpers import make_backbone

keras_hub = pytest.importorskip("keras_hub")

from tfpack.errors import TfpackError  # noqa: E402
from tfpack.models import from_keras_hub  # noqa: E402
from tfpack.models.keras_hub import base, internals  # noqa: E402
from tfpack.models.keras_hub.declarations import FAMILIES  # noqa: E402

ADAPTERS = pathlib.Path(internals.__file__).parent
PACK = {"input_ids": np.array([[5, 6, 7, 8, 0]]),
        "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
        "position_ids": np.array([[0, 1, 0, 1, 0]])}


@pytest.fixture
def release(monkeypatch):
    """keras-hub reports 0.33.0, and no family has been checked yet."""
    monkeypatch.setattr(keras_hub, "__version__", "0.33.0")
    monkeypatch.setattr(internals, "_CHECKED", set())
    monkeypatch.setattr(base, "_warned_versions", set())
    return monkeypatch


def _refusal(backbone, label, problem):
    with pytest.raises(TfpackError) as error:
        from_keras_hub(backbone)
    message = str(error.value)
    assert "\n" not in message
    assert message == (f"tfpack's {label} adapter cannot read keras-hub "
                       f"0.33.0: {problem} (tested with keras-hub 0.32.0)")


def test_a_removed_method_is_refused_naming_the_family(release):
    from keras_hub.src.models.llama.llama_attention import LlamaAttention

    backbone = make_backbone("llama")
    release.delattr(LlamaAttention, "_compute_attention")
    with pytest.warns(UserWarning, match="0.33.0"):
        _refusal(backbone, "Llama-style decoder",
                 "LlamaAttention has no `_compute_attention`")


def test_a_method_whose_arguments_changed_is_refused(release):
    from keras_hub.src.models.deberta_v3.disentangled_self_attention import (
        DisentangledSelfAttention)

    def moved(self, relative_positions, bucket_size):
        return relative_positions

    backbone = make_backbone("deberta_v3")
    release.setattr(DisentangledSelfAttention, "_make_log_bucket_position",
                    moved)
    with pytest.warns(UserWarning):
        _refusal(backbone, "DeBERTa-v3",
                 "DisentangledSelfAttention._make_log_bucket_position(self, "
                 "relative_positions, bucket_size) no longer takes "
                 "(relative_positions)")


def test_a_renamed_sublayer_is_refused_on_the_built_layers(release):
    backbone = make_backbone("bloom")
    layer = backbone.transformer_layers[1]
    layer.mlp_intermediate_dense = layer._mlp_intermediate_dense
    del layer._mlp_intermediate_dense
    with pytest.warns(UserWarning):
        _refusal(backbone, "ALiBi (BLOOM, Falcon)",
                 "BloomDecoder has no `_mlp_intermediate_dense`")


def test_a_removed_module_function_is_refused(release):
    from keras_hub.src.models.xlnet import relative_attention

    backbone = make_backbone("xlnet")
    release.delattr(relative_attention, "_rel_shift")
    with pytest.warns(UserWarning):
        _refusal(backbone, "XLNet", "keras_hub.src.models.xlnet."
                 "relative_attention has no function `_rel_shift`")


def test_a_moved_module_is_refused(release):
    backbone = make_backbone("gpt_neo_x")
    release.setitem(sys.modules,
                    "keras_hub.src.models.gpt_neo_x.gpt_neo_x_attention", None)
    with pytest.warns(UserWarning):
        _refusal(backbone, "GPT-NeoX", "there is no module keras_hub.src."
                 "models.gpt_neo_x.gpt_neo_x_attention (of GPTNeoXAttention)")


def test_the_tested_release_passes_and_reads_only_declared_names(release):
    release.setattr(keras_hub, "__version__", "0.32.0")
    backbone = make_backbone("gemma")
    # The exactness check of every family: test_keras_hub_exactness.py.
    from_keras_hub(backbone, check_exact=False)(PACK)
    assert "gemma" in internals._CHECKED
    attention = backbone.transformer_layers[0].attention
    with pytest.raises(TfpackError, match=r"without declaring it .* "
                                          r"Received: name='_undeclared'"):
        internals.private(attention, "_undeclared", None)


def test_every_family_declares_a_label_and_importable_classes():
    for family in FAMILIES:
        assert internals._class_problems(family) is None, family


def _inline_private_names(source):
    """`obj._name` reads on anything but `self` / `cls`, and imports of
    `keras_hub.src`, in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name)
                         and node.value.id in ("self", "cls"))):
            found.append(f"{node.lineno}: .{node.attr}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ([node.module] if isinstance(node, ast.ImportFrom)
                     else [alias.name for alias in node.names])
            found += [f"{node.lineno}: import {name}" for name in names
                      if name and name.startswith("keras_hub.src")]
    return found


def test_the_check_of_inline_names_finds_them():
    assert sorted(_inline_private_names(
        "x = layer._query_dense(y)\nself._features(y)\n"
        "from keras_hub.src.utils import f\n")) == [
            "1: ._query_dense", "3: import keras_hub.src.utils"]


def test_adapters_read_private_keras_hub_names_only_through_the_door():
    # Every other module of the adapters reads them through `private` and
    # `function` (declared in declarations.py, checked by `check`).
    found = {path.name: _inline_private_names(path.read_text())
             for path in sorted(ADAPTERS.glob("*.py"))
             if path.name not in ("internals.py", "declarations.py")}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_importing_the_adapters_does_not_import_keras_hub():
    # Keras on JAX, TensorFlow blocked: the import needs neither, and the
    # process skips TensorFlow's start-up (test_keras_hub_stays_optional).
    code = ("import sys, tfpack.models.keras_hub; "
            "print('keras_hub' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, check=True, env=jax_env(),
                            cwd=ADAPTERS.parents[2])
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("family", ["bert", "llama", "albert"])
def test_layer_outputs_are_every_layers_output(family):
    backbone = make_backbone(family)
    adapter = from_keras_hub(backbone, attention_implementation="dense",
                             check_exact=False)
    outputs = adapter.layer_outputs(PACK)
    assert len(outputs) == len(adapter.layers()) >= 2
    final = adapter.final_norm(outputs[-1], None)
    np.testing.assert_array_equal(final, adapter(PACK)["sequence_output"])
    assert not np.array_equal(outputs[0], outputs[1])
