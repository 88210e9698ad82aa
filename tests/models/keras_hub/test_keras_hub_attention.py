"""`from_keras_hub(..., attention_implementation=...)`: segmented encoders."""

import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub
from tfpack.testing import assert_no_cross_contamination
from tfpack.testing import pack_examples

from keras_hub_helpers import MAX_LENGTH, examples, keras_hub_alone
from keras_hub_helpers import make_backbone

ENCODERS = ("bert", "electra", "roberta", "distil_bert", "xlm_roberta", "albert",
            "roformer_v2")


@pytest.mark.parametrize("family", ENCODERS)
def test_segmented_encoder_adapter_equals_keras_hub_and_dense(family):
    # The same keras-hub weights: segmented packed outputs equal keras-hub on
    # each sequence alone, and the dense adapter's gradients.
    backbone = make_backbone(family)
    dense = from_keras_hub(backbone, attention_implementation="dense")
    segmented = from_keras_hub(backbone, attention_implementation="segmented",
                               max_sequences_per_pack=3, segment_length=8)
    sequences = examples(family)
    packed = pack_examples(sequences, MAX_LENGTH, max_sequences_per_pack=3)
    real = packed["sequence_ids"] > 0
    results = []
    for adapter in (dense, segmented):
        with tf.GradientTape() as tape:
            out = adapter(packed)["sequence_output"]
            loss = tf.reduce_sum(tf.sin(out) * real[..., None])
        results.append((np.asarray(out),
                        tape.gradient(loss, backbone.trainable_variables)))
    (dense_out, dense_grads), (out, grads) = results
    np.testing.assert_allclose(out[real], dense_out[real], atol=1e-5)
    for a, b in zip(grads, dense_grads):
        if a is not None:
            np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(a)),
                                       np.asarray(tf.convert_to_tensor(b)),
                                       atol=1e-4, rtol=1e-4)
    row, ids = 0, packed["sequence_ids"][0]
    first = sequences[0]
    np.testing.assert_allclose(out[row][ids == 1],
                               np.asarray(keras_hub_alone(backbone, first)),
                               atol=1e-5)
    assert assert_no_cross_contamination(segmented, packed).sequences_checked


def test_adapter_config_keeps_the_implementation_and_checks_it():
    adapter = from_keras_hub(make_backbone("bert"),
                             attention_implementation="segmented",
                             max_sequences_per_pack=4, segment_length=8)
    config = adapter.get_config()
    assert (config["attention_implementation"], config["max_sequences_per_pack"],
            config["segment_length"]) == ("segmented", 4, 8)
    clone = type(adapter).from_config(config)
    assert clone.attention_implementation == "segmented"
    assert from_keras_hub(make_backbone("llama")).attention_implementation \
        == "auto"
    with pytest.raises(TfpackError, match=r"needs `max_sequences_per_pack`.*"
                                          r"Received: max_sequences_per_pack"
                                          r"=None"):
        from_keras_hub(make_backbone("llama"),
                       attention_implementation="segmented")
    with pytest.raises(TfpackError, match=r"Received: attention_implementation"
                                          r"='fused'"):
        from_keras_hub(make_backbone("bert"), attention_implementation="fused")
