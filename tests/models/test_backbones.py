"""Tasks wrap ANY object that follows the backbone protocol, not only tfpack's."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from tfpack import models
from tfpack.errors import TfpackError
from tfpack.testing import assert_packed_equals_unpacked
from tfpack.training.validation import target_counts

from model_helpers import MAX_LENGTH, VOCAB, bert_examples, causal_examples, tiny_encoder


class PlainBackbone(keras.Model):
    """A protocol-only backbone: no tfpack base class, no attention.

    Each token sees only itself (and its position), so packing cannot leak.
    """

    def __init__(self, vocabulary_size=VOCAB, hidden_dim=8, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.embed = keras.layers.Embedding(vocabulary_size, hidden_dim)
        self.position = keras.layers.Embedding(32, hidden_dim)
        self.dense = keras.layers.Dense(hidden_dim, activation="tanh")

    def call(self, features, training=None):
        x = self.embed(features["input_ids"]) + self.position(features["position_ids"])
        return {"sequence_output": self.dense(x)}


@pytest.mark.parametrize("make,examples", [
    (lambda b: models.BertPretrainer(b), bert_examples),
    (lambda b: models.BertClassifier(b, 3, dropout=0.0), bert_examples),
    (lambda b: models.CausalLM(b, tie_embeddings=False), causal_examples),
])
def test_tasks_train_a_plain_backbone(make, examples):
    model = make(PlainBackbone())
    # No `token_embedding`: the MLM head gets its own output kernel.
    result = assert_packed_equals_unpacked(model, examples(), max_length=MAX_LENGTH)
    assert result.max_gradient_difference < 1e-5
    assert model.input_features[:3] == ("input_ids", "sequence_ids", "position_ids")


def test_task_counts_come_from_the_task_not_from_term_names():
    class Renamed(models.BertClassifier):
        loss_terms = ("topic",)

        def loss_statistics(self, x, y_pred):
            stats = super().loss_statistics(x, y_pred)
            return {k.replace("classification", "topic"): v for k, v in stats.items()}

        def target_counts(self, x):
            return {"topic": ops.sum(ops.cast(x["sequence_mask"], "float32"))}

    from tfpack.testing import pack_examples

    features = pack_examples(bert_examples(), MAX_LENGTH, max_sequences_per_pack=3)
    counts = target_counts(Renamed(tiny_encoder(), 3), features)
    assert float(counts["topic"]) == len(bert_examples())


def test_models_without_target_counts_count_with_one_forward_pass():
    class NoCounts(keras.Model):
        loss_terms = ("lm",)

        def __init__(self):
            super().__init__()
            self.inner = models.CausalLM(PlainBackbone(), tie_embeddings=False)

        def call(self, x, training=None):
            return self.inner(x, training=training)

        def loss_statistics(self, x, y_pred):
            return self.inner.loss_statistics(x, y_pred)

    from tfpack.testing import pack_examples

    features = {k: tf.constant(v) for k, v in pack_examples(
        causal_examples(), MAX_LENGTH).items()}
    counts = target_counts(NoCounts(), features)
    assert float(counts["lm"]) == float(np.sum(features["labels"].numpy() != -100))


def test_backbone_protocol_errors():
    with pytest.raises(TfpackError, match=r"BertClassifier's backbone must be callable .* "
                                          r"without \['__call__', 'hidden_dim'\]"):
        models.BertClassifier(object(), 2)
    backbone = PlainBackbone()
    del backbone.vocabulary_size
    with pytest.raises(TfpackError, match=r"CausalLM's backbone .* without \['vocabulary_size'\]"):
        models.CausalLM(backbone)
    with pytest.raises(TfpackError, match=r"`tie_embeddings=True` needs a backbone with a "
                                          r"`token_embedding`"):
        models.CausalLM(PlainBackbone())
    with pytest.raises(TfpackError, match=r"pass `DecoderBackbone` arguments as keywords. "
                                          r"Received: backbone=40"):
        models.CausalLM(40)


def test_decoder_backbone_and_flat_causal_lm_are_the_same_model():
    keras.utils.set_random_seed(1)
    flat = models.CausalLM(vocabulary_size=VOCAB, num_layers=1, hidden_dim=8, num_heads=2,
                           intermediate_dim=16, position_embedding="learned",
                           max_sequence_length=16)
    assert isinstance(flat.backbone, models.DecoderBackbone)
    assert flat.backbone.position_embedding == "learned"
    assert flat.get_config()["backbone"]["class_name"] == "DecoderBackbone"
    clone = models.CausalLM.from_config(flat.get_config())
    assert clone.backbone.get_config() == flat.backbone.get_config()
    assert not isinstance(tiny_encoder(), models.Task)
    assert not hasattr(tiny_encoder(), "loss_statistics")
