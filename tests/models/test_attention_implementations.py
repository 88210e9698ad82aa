"""`attention_implementation` on the BERT encoder and the decoder backbone."""

import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.models import BertEncoder
from tfpack.models import BertPretrainer
from tfpack.models import CausalLM
from tfpack.models import DecoderBackbone
from tfpack.testing import assert_no_cross_contamination
from tfpack.testing import assert_packed_equals_unpacked
from tfpack.testing import pack_examples

from model_helpers import MAX_LENGTH, VOCAB, bert_examples, causal_examples

TINY = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=16, num_heads=2,
            intermediate_dim=32, max_sequence_length=16)


def _pair(cls, **kwargs):
    """A dense and a segmented backbone with the same weights."""
    models = [cls(**TINY, attention_implementation=name,
                  max_sequences_per_pack=3, **kwargs)
              for name in ("dense", "segmented")]
    return models


@pytest.mark.parametrize("cls,examples", [(BertEncoder, bert_examples),
                                          (DecoderBackbone, causal_examples)])
def test_segmented_backbone_equals_dense_with_gradients(cls, examples):
    packed = pack_examples(examples(), MAX_LENGTH, max_sequences_per_pack=3)
    dense, segmented = _pair(cls, dropout=0.0)
    dense(packed)
    segmented(packed)
    segmented.set_weights(dense.get_weights())
    real = packed["sequence_ids"] > 0
    results = []
    for model in (dense, segmented):
        with tf.GradientTape() as tape:
            out = model(packed)["sequence_output"]
            loss = tf.reduce_sum(tf.sin(out) * real[..., None])
        results.append((np.asarray(out)[real],
                        tape.gradient(loss, model.trainable_variables)))
    np.testing.assert_allclose(results[1][0], results[0][0], atol=1e-5)
    for a, b in zip(results[1][1], results[0][1]):
        np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(a)),
                                   np.asarray(tf.convert_to_tensor(b)),
                                   atol=1e-4, rtol=1e-4)


def test_segmented_tasks_pack_without_contamination():
    # Whole tasks (losses included) on the segmented path: packed equals
    # unpacked, and no sequence of a pack reaches another.
    bert = BertPretrainer(BertEncoder(**TINY, attention_implementation=
                                      "segmented", max_sequences_per_pack=3))
    assert_packed_equals_unpacked(bert, bert_examples(), max_length=MAX_LENGTH,
                                  max_sequences_per_pack=3,
                                  check_gradients=False)
    lm = CausalLM(**TINY, attention_implementation="segmented",
                  max_sequences_per_pack=3)
    assert_packed_equals_unpacked(lm, causal_examples(), max_length=MAX_LENGTH,
                                  max_sequences_per_pack=3,
                                  check_gradients=False)
    assert_no_cross_contamination(lm, pack_examples(
        causal_examples(), MAX_LENGTH, max_sequences_per_pack=3))


def test_config_carries_the_implementation():
    for cls in (BertEncoder, DecoderBackbone):
        model = cls(**TINY, attention_implementation="segmented",
                    max_sequences_per_pack=4, segment_length=8)
        config = model.get_config()
        assert (config["attention_implementation"],
                config["max_sequences_per_pack"],
                config["segment_length"]) == ("segmented", 4, 8)
        clone = cls.from_config(config)
        assert clone.get_config() == config
        attention = clone.transformer_layers[0].attention
        assert (attention.attention_implementation, attention.causal,
                attention.max_sequences_per_pack) == (
            "segmented", cls is DecoderBackbone, 4)
    lm = CausalLM(**TINY, attention_implementation="dense")
    assert lm.backbone.attention_implementation == "dense"


def test_auto_is_dense_for_the_ablation_and_segmented_refuses_it():
    ablation = BertEncoder(**TINY, block_diagonal_mask=False,
                           max_sequences_per_pack=2)
    assert ablation.transformer_layers[0].attention.attention_implementation \
        == "dense"
    with pytest.raises(TfpackError, match=r"Received: attention_implementation"
                                          r"='segmented', block_diagonal_mask"
                                          r"=False"):
        BertEncoder(**TINY, block_diagonal_mask=False,
                    attention_implementation="segmented",
                    max_sequences_per_pack=2)
    with pytest.raises(TfpackError, match=r"Received: attention_implementation"
                                          r"='sparse'"):
        DecoderBackbone(**TINY, attention_implementation="sparse")
