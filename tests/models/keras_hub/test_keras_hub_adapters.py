"""from_keras_hub beyond the conformance suite: shared variables, protocol,
config, refusals, mixed precision.

The run-time exactness check of every family (float32, dense and segmented):
test_keras_hub_exactness.py; here adapters are built with `check_exact=False`
except under mixed precision, the only float16 run of the check.
"""

import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from jax_env import jax_env
from keras_hub_helpers import MAX_LENGTH, VOCAB, examples
from keras_hub_helpers import keras_hub, keras_hub_alone, make_backbone
from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub
from tfpack.models.keras_hub import KerasHubBackbone, supported_backbones
from tfpack.testing import pack_examples

PACKS = [[0, 1, 2], [3, 4]]  # 15 and 8 tokens in rows of 16.


def _where(packed):
    """(row, token indices) of every example, in example order."""
    return [(row, np.flatnonzero(packed["sequence_ids"][row] == slot + 1))
            for row, pack in enumerate(PACKS) for slot, _ in enumerate(pack)]


def test_adapter_shares_the_backbones_variables():
    backbone = make_backbone("gemma3")
    adapter = from_keras_hub(backbone, check_exact=False)
    assert [id(v) for v in adapter.weights] == [id(v) for v in
                                                backbone.weights]
    packed = pack_examples(examples("gemma3"), MAX_LENGTH, packs=PACKS)
    before = np.asarray(keras_hub_alone(backbone, examples("gemma3")[0]))
    # A training step on the adapter moves the keras-hub backbone.
    optimizer = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(adapter(packed)["sequence_output"] ** 2)
    optimizer.apply(tape.gradient(loss, adapter.trainable_variables),
                    adapter.trainable_variables)
    after = np.asarray(keras_hub_alone(backbone, examples("gemma3")[0]))
    assert np.max(np.abs(after - before)) > 1e-4


def test_backbone_protocol():
    adapter = from_keras_hub(make_backbone("electra"), check_exact=False)
    assert adapter.vocabulary_size == VOCAB and adapter.hidden_dim == 8
    assert adapter.token_embedding is adapter.backbone.token_embedding
    assert adapter.input_features[-1] == "token_type_ids"
    decoder = from_keras_hub(make_backbone("qwen2"), check_exact=False)
    assert "token_type_ids" not in decoder.input_features
    assert decoder.packed_outputs == {"sequence_output": "token"}
    # The backbone's own untied output projection.
    sequence_output = np.ones((1, 2, 16), "float32")
    np.testing.assert_allclose(
        decoder.logits(sequence_output),
        sequence_output @ np.asarray(
            decoder.token_embedding.reverse_embeddings), rtol=1e-6)


@pytest.mark.parametrize("family", ["roberta", "gemma"])
def test_config_round_trip(family):
    adapter = from_keras_hub(make_backbone(family), check_exact=False)
    clone = type(adapter).from_config(adapter.get_config())
    assert isinstance(clone, KerasHubBackbone)
    assert type(clone.backbone) is type(adapter.backbone)
    clone.set_weights(adapter.get_weights())
    packed = pack_examples(examples(family), MAX_LENGTH, packs=PACKS)
    np.testing.assert_array_equal(clone(packed)["sequence_output"],
                                  adapter(packed)["sequence_output"])


def test_keras_hub_stays_optional():
    # `import tfpack.models` registers the adapters without importing
    # keras-hub, so `.keras` files load and tfpack works without it.
    # On Keras's JAX backend with TensorFlow blocked (tests/jax_env.py): the
    # same tfpack modules import as on TensorFlow (102 `tfpack.*` modules,
    # none apart), keras-hub imports there too (a guarded import of it would
    # still show), and the process skips TensorFlow's start-up (4.7 -> 2.7 CPU s).
    code = ("import sys, tfpack.models; "
            "assert 'keras_hub' not in sys.modules; "
            "assert 'KerasHubDecoder' in str(keras.saving.get_registered_object("
            "'tfpack>KerasHubDecoder'))")
    subprocess.run([sys.executable, "-c", "import keras; " + code], check=True,
                   env=jax_env())


class _UnknownBackbone(keras_hub.models.Backbone):
    """A keras-hub backbone of a class tfpack has never heard of."""

    def __init__(self, **kwargs):
        ids = keras.Input((None,), dtype="int32", name="token_ids")
        super().__init__(inputs=ids,
                         outputs=keras.layers.Embedding(VOCAB, 4)(ids),
                         **kwargs)


def test_unsupported_backbone_names_the_supported_ones():
    unknown = _UnknownBackbone()
    with pytest.raises(TfpackError, match=r"supports the keras-hub backbones "
                       r"AlbertBackbone, .*DebertaV3Backbone, .*Qwen2Backbone"
                       r".*XLNetBackbone. "
                       r"Received: backbone of type _UnknownBackbone"):
        from_keras_hub(unknown)
    assert "Gemma3Backbone" in supported_backbones()
    with pytest.raises(TfpackError, match="KerasHubDecoder` wraps"):
        type(from_keras_hub(make_backbone("llama"), check_exact=False))(unknown)


def test_missing_features_are_named():
    adapter = from_keras_hub(make_backbone("bert"), check_exact=False)
    with pytest.raises(TfpackError, match=r"missing \['position_ids'\]"):
        adapter({"input_ids": np.ones((1, 4), "int32"),
                 "sequence_ids": np.ones((1, 4), "int32")})


@pytest.mark.parametrize("family", ["bert", "gemma3", "bloom", "deberta_v3"])
def test_mixed_precision_follows_the_backbone(family):
    float32 = make_backbone(family)
    config = float32.get_config()
    config["dtype"] = "mixed_float16"
    backbone = type(float32).from_config(config)
    # The run-time check in float16 (its tolerance): kept.
    adapter = from_keras_hub(backbone)
    assert adapter.dtype_policy.name == "mixed_float16"
    data = examples(family)
    packed = pack_examples(data, MAX_LENGTH, packs=PACKS)
    output = adapter(packed, training=False)["sequence_output"]
    assert keras.backend.standardize_dtype(output.dtype) == "float16"
    row, tokens = _where(packed)[1]
    alone = np.asarray(keras_hub_alone(backbone, data[1]), "float32")
    np.testing.assert_allclose(np.asarray(output, "float32")[row, tokens], alone,
                               rtol=0, atol=2e-2 * max(1.0, np.abs(alone).max()))
