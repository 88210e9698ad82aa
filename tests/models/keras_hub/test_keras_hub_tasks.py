"""The tfpack tasks on keras-hub backbones: equivalence, fit, Trainer, .keras, SavedModel."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_hub_helpers import MAX_LENGTH, VOCAB, keras_hub_alone, make_backbone
from tfpack import models, training
from tfpack.testing import assert_no_cross_contamination
from tfpack.testing import assert_packed_equals_unpacked, next_token_labels
from tfpack.testing import pack_examples

LENGTHS = (5, 3, 7, 2, 6)


def _ids(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, n) for n in LENGTHS]


def classification_examples():
    rng = np.random.default_rng(1)
    return [{"input_ids": ids, "token_type_ids": (np.arange(len(ids)) > 1)
             .astype(int), "labels": int(rng.integers(0, 3))} for ids in _ids()]


def pretraining_examples():
    rng = np.random.default_rng(2)
    return [{"input_ids": ids, "masked_lm_positions": [1],
             "masked_lm_ids": rng.integers(1, VOCAB, 1),
             "next_sentence_labels": int(rng.integers(0, 2))} for ids in _ids()]


def causal_examples():
    return [{"input_ids": ids, "labels": next_token_labels(ids)}
            for ids in _ids()]


def dataset(examples, batch=2):
    packed = pack_examples(examples, MAX_LENGTH, max_sequences_per_pack=3)
    return tf.data.Dataset.from_tensor_slices(dict(packed)).batch(batch), packed


# `check_exact=False`: each task is compared packed with unpacked below,
# outputs and gradients (and the run-time check of every family:
# test_keras_hub_exactness.py).
TASKS = {
    "classifier": (lambda: models.BertClassifier(
        models.from_keras_hub(make_backbone("bert"), check_exact=False),
        num_classes=3),
        classification_examples),
    "pretrainer": (lambda: models.BertPretrainer(
        models.from_keras_hub(make_backbone("roberta"), check_exact=False)),
        pretraining_examples),
    "causal_lm": (lambda: models.CausalLM(
        models.from_keras_hub(make_backbone("qwen2"), check_exact=False)),
        causal_examples),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_on_keras_hub_backbone_packed_equals_unpacked(name):
    build, examples = TASKS[name]
    model = build()
    result = assert_packed_equals_unpacked(model, examples(),
                                           max_length=MAX_LENGTH)
    assert result.max_gradient_difference < 1e-5
    assert_no_cross_contamination(model, dataset(examples())[1])


@pytest.mark.parametrize("family", ["gemma", "llama"])
def test_causal_lm_logits_are_keras_hubs_on_each_sequence_alone(family):
    # Gemma's final logit soft cap and Llama's untied output kernel are the
    # backbone's own output projection (`token_embedding(x, reverse=True)`).
    backbone = make_backbone(family)
    model = models.CausalLM(models.from_keras_hub(backbone, check_exact=False))
    ids = _ids()
    packed = pack_examples(causal_examples(), MAX_LENGTH, packs=[[0, 1, 2],
                                                                 [3, 4]])
    logits = np.asarray(model(packed)["logits"])
    row, start = 0, 5 + 3  # The third sequence of the first pack.
    alone = backbone.token_embedding(
        keras_hub_alone(backbone, {"input_ids": ids[2]})[None], reverse=True)
    np.testing.assert_allclose(logits[row, start:start + 7],
                               np.asarray(alone)[0], rtol=0, atol=1e-5)


def test_causal_lm_trainer():
    # fit(jit_compile=True) and the SavedModel export: test_conformance.py.
    # The Trainer runs the exactness check itself, at the training shapes.
    model = models.CausalLM(models.from_keras_hub(make_backbone("gemma3"),
                                                  check_exact=False))
    data, packed = dataset(causal_examples())
    trainer = training.Trainer(model, keras.optimizers.Adam(1e-2),
                               micro_batch_size=2, log_every=2, progress=False,
                               jit_compile=False)
    result = trainer.fit(data.unbatch().repeat(), num_steps=4)
    assert result.step == 4 and np.isfinite(result.history[-1]["loss"])
