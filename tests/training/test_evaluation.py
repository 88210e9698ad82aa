"""Trainer.evaluate and periodic evaluation: packed evaluation equals unpacked, per example."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfpack.errors import TfpackError
from tfpack.evaluation import accuracy, macro_f1
from tfpack.models import BertClassifier, BertEncoder
from tfpack.testing import pack_examples
from tfpack.training import Trainer

LENGTHS = [5, 3, 7, 4, 6, 2, 5, 3]


def examples(seed=0):
    rng = np.random.default_rng(seed)
    return [{"input_ids": rng.integers(1, 30, n), "labels": int(rng.integers(0, 3))}
            for n in LENGTHS]


def dataset(features):
    return tf.data.Dataset.from_tensor_slices(features)


def make_trainer(**kwargs):
    keras.utils.set_random_seed(0)
    encoder = BertEncoder(vocabulary_size=30, num_layers=1, hidden_dim=8, num_heads=2,
                          intermediate_dim=16, max_sequence_length=16)
    return Trainer(BertClassifier(encoder, 3, dropout=0.0), keras.optimizers.Adam(1e-2),
                   micro_batch_size=2, jit_compile=False, progress=False, **kwargs)


def test_packed_evaluation_equals_unpacked_and_reference():
    data = examples()
    packed = pack_examples(data, 12, packs=[[7, 0], [3, 1, 5], [2], [6, 4]],
                           max_sequences_per_pack=4)
    unpacked = pack_examples(data, 12, packs=[[i] for i in range(len(data))],
                             max_sequences_per_pack=4)
    trainer = make_trainer()
    trainer.fit(dataset(packed).repeat(), num_steps=3)
    a = trainer.evaluate(dataset(packed), batch_size=3)  # a partial last batch
    b = trainer.evaluate(dataset(unpacked), batch_size=5)
    assert a.keys() == b.keys() == {"loss", "classification_loss",
                                    "classification_accuracy", "macro_f1"}
    for key in a:
        assert math.isclose(a[key], b[key], rel_tol=1e-5, abs_tol=1e-6), key
    logits = trainer.model(unpacked, training=False)["logits"].numpy()[:, 0]
    labels = [e["labels"] for e in data]
    assert math.isclose(a["macro_f1"], macro_f1(labels, logits.argmax(-1)), rel_tol=1e-5)
    assert math.isclose(a["classification_accuracy"], accuracy(labels, logits.argmax(-1)),
                        rel_tol=1e-6)


def test_periodic_evaluation_is_logged():
    data = examples()
    packed = dataset(pack_examples(data, 12, max_sequences_per_pack=3))
    trainer = make_trainer(eval_dataset=packed, eval_every=2, log_every=1)
    history = trainer.fit(packed.repeat(), num_steps=5).history
    evaluated = [r["step"] for r in history if "eval_macro_f1" in r]
    assert evaluated == [2, 4, 5]
    # The last record's evaluation is of the final weights.
    assert history[-1]["eval_loss"] == pytest.approx(trainer.evaluate(packed)["loss"], rel=1e-6)
    with pytest.raises(TfpackError, match="`eval_every` must be a positive integer"):
        make_trainer(eval_dataset=packed)
