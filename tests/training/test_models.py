"""The Trainer with the real tfpack models: their counts match the features' counts
(global denominators are right) and the loss goes down."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack import models
from tfpack.training import Lamb, Trainer
from tinymodels import L, V, packed_examples


def _encoder():
    return models.BertEncoder(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                              intermediate_dim=16, max_sequence_length=L, dropout=0.0,
                              attention_dropout=0.0)


def _causal_features(n):
    f = packed_examples(n)
    ids, seq = f["input_ids"], f["sequence_ids"]
    labels = np.full_like(ids, -100)
    same = (seq[:, 1:] == seq[:, :-1]) & (seq[:, 1:] > 0)
    labels[:, :-1] = np.where(same, ids[:, 1:], -100)
    return {"input_ids": ids, "sequence_ids": seq, "position_ids": f["position_ids"],
            "labels": labels}


def _classifier_features(n):
    f = packed_examples(n)
    f["labels"] = f.pop("next_sentence_labels")
    return f


@pytest.mark.parametrize("name", ["pretrainer_sequence_averaging", "classifier", "causal_lm"])
def test_trains_real_models(name):
    keras.utils.set_random_seed(0)
    if name == "pretrainer_sequence_averaging":
        model, features = models.BertPretrainer(_encoder(), mlm_averaging="sequence"), \
            packed_examples(64)
    elif name == "classifier":
        model, features = models.BertClassifier(_encoder(), 2, dropout=0.0), \
            _classifier_features(64)
    else:
        model = models.CausalLM(vocabulary_size=V, num_layers=1, hidden_dim=8, num_heads=2,
                                intermediate_dim=16, max_sequence_length=L)
        features = _causal_features(64)
    # XLA for one model: compiling costs seconds, and the counts do not depend on it.
    trainer = Trainer(model, Lamb(learning_rate=0.02), micro_batch_size=4,
                      accumulation_steps=2, log_every=3, progress=False,
                      jit_compile=name == "causal_lm")
    # Any disagreement between the feature counts (the denominators) and the
    # model's own counts raises inside `fit`.
    history = trainer.fit(tf.data.Dataset.from_tensor_slices(features).repeat(), 12).history
    assert history[-1]["loss"] < history[0]["loss"]
