"""PreferenceModel on keras-hub families through `from_keras_hub` (Llama 3, Qwen3, Gemma,
mixtures of experts), dense and segmented attention: every pair equals its two sequences
run alone through keras-hub's own backbone; gradients equal the unpacked ones.

Each family's backbone is built once, and its keras-hub scores of the pairs are
computed once: the dense and segmented adapters (and the gradient tests) run on
that one backbone's variables. The adapters skip `from_keras_hub`'s own
exactness probe (``check_exact=False``): these tests check exactness
themselves, against keras-hub on each sequence alone."""

import functools
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfpack import models
from tfpack.models import PreferenceModel
from tfpack.testing import assert_packed_equals_unpacked
from tfpack.testing.exactness import padded_batch_reason

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "keras_hub"))
from keras_hub_helpers import keras_hub_alone_in_one_batch, make_backbone  # noqa: E402

from preference_helpers import (LOSS_OPTIONS, MAX_LENGTH, close, items, make_pairs,  # noqa: E402
                                numpy_losses, pack, per_pair, reference_scores,
                                with_reference)

FAMILIES = ("llama3", "qwen3", "gemma", "mixtral", "qwen3_moe")
PACKS = [[4, 1, 6], [2, 0], [5], [3]]


@functools.cache
def _backbone(family):
    return make_backbone(family)


@functools.cache
def _policy(family, implementation):
    """The family's one backbone as a packed causal LM; no test trains it."""
    backbone = _backbone(family)
    adapter = models.from_keras_hub(backbone, attention_implementation=implementation,
                                    max_sequences_per_pack=6,  # 3 pairs: 6 sequences
                                    check_exact=False)
    return backbone, models.CausalLM(adapter)


@functools.cache
def _alone(family):
    """`_keras_hub_scores` of the pairs, once a family (the same backbone and output
    layer under either attention implementation)."""
    backbone, policy = _policy(family, "dense")
    return _keras_hub_scores(backbone, policy, make_pairs(seed=1))


def _keras_hub_scores(backbone, policy, pairs):
    """Per pair ``(chosen, rejected, |chosen|, |rejected|)`` from keras-hub's own backbone
    on each sequence alone (the adapter's output layer: tied embedding, Gemma's soft cap):
    every sequence its own right-padded row of one call, where `padded_batch_reason`
    finds nothing against it (one eager call instead of 14)."""
    assert padded_batch_reason(backbone) is None
    responses = [(p["prompt"], r) for p in pairs for r in (p["chosen"], p["rejected"])]
    hidden = keras_hub_alone_in_one_batch(backbone, [{"input_ids": prompt + r}
                                                     for prompt, r in responses])
    longest = max(h.shape[0] for h in hidden)
    padded = tf.stack([tf.pad(h, [[0, longest - h.shape[0]], [0, 0]]) for h in hidden])
    log_probs = np.asarray(tf.nn.log_softmax(tf.cast(policy.backbone.logits(padded),
                                                     tf.float32)))
    scores = [float(np.sum(log_probs[row, np.arange(len(prompt) - 1, len(prompt) + len(r) - 1),
                                     r], dtype=np.float32))
              for row, (prompt, r) in enumerate(responses)]
    return np.array([(scores[2 * i], scores[2 * i + 1], len(p["chosen"]), len(p["rejected"]))
                     for i, p in enumerate(pairs)], np.float64)


@pytest.mark.parametrize("implementation", ["dense", "segmented"])
@pytest.mark.parametrize("family", FAMILIES)
def test_every_pair_equals_keras_hub_on_each_sequence_alone(family, implementation):
    _, policy = _policy(family, implementation)
    pairs = make_pairs(seed=1)
    reference = reference_scores()
    examples = pack(with_reference(items(pairs), reference), PACKS, max_pairs=3)
    alone = _alone(family)
    ref = np.array([reference["chosen"], reference["rejected"]]).T
    for loss in ("sigmoid", "orpo"):
        model = PreferenceModel(policy, "precomputed", loss=loss, **LOSS_OPTIONS)
        got = per_pair(model(examples), PACKS, len(pairs))
        want_loss, want_margin = numpy_losses(loss, alone, ref, **LOSS_OPTIONS)
        assert close(got["chosen_log_likelihood"], alone[:, 0]), loss
        assert close(got["rejected_log_likelihood"], alone[:, 1]), loss
        assert close(got["loss"], want_loss), loss
        assert close(got["reward_margin"], want_margin), loss


@pytest.mark.parametrize("family, implementation", [
    ("llama3", "dense"), ("llama3", "segmented"), ("gemma", "segmented"), ("qwen3", "dense")])
def test_packed_gradients_equal_unpacked(family, implementation):
    # Mixtures of experts are left out here: their router loss is a statistic of
    # the whole batch (tests/models/keras_hub/test_keras_hub_subclasses_and_moe.py).
    _, policy = _policy(family, implementation)
    model = PreferenceModel(policy, "precomputed", loss="sigmoid", **LOSS_OPTIONS)
    examples = with_reference(items(make_pairs(seed=1)), reference_scores())
    result = assert_packed_equals_unpacked(model, examples, max_length=MAX_LENGTH, packs=PACKS,
                                           max_sequences_per_pack=3, atol=1e-6)
    assert result.max_gradient_difference < 1e-6
