"""Causal-LM scoring on packed batches: the log-likelihood of every sequence."""

import keras
from keras import ops

from tfpack.features import IGNORE_LABEL
from tfpack.layers.losses import sequence_log_likelihoods
from tfpack.params import Anything, validate_params


def next_token_targets(input_ids, sequence_ids):
    """int32 ``[B, L]``: the next token of the same sequence, ``IGNORE_LABEL`` elsewhere.

    In-graph twin of the packer's derived causal-LM ``labels``.

    >>> import numpy as np
    >>> np.asarray(next_token_targets(np.array([[5, 6, 7, 8, 0]]),
    ...                               np.array([[1, 1, 2, 2, 0]]))).tolist()
    [[6, -100, 8, -100, -100]]
    """
    ids = ops.cast(input_ids, "int32")
    sequences = ops.cast(sequence_ids, "int32")
    following = ops.concatenate([ids[:, 1:], ops.zeros_like(ids[:, :1])], axis=1)
    following_sequence = ops.concatenate(
        [sequences[:, 1:], ops.zeros_like(sequences[:, :1])], axis=1)
    same = (following_sequence == sequences) & (sequences > 0)
    return ops.where(same, following, IGNORE_LABEL)


@keras.saving.register_keras_serializable(package="tfpack")
class CausalLMScorer(keras.Model):
    """Scores every sequence of a pack with a `CausalLM`: per-example log-likelihoods.

    The log-likelihood of a sequence is the sum of ``log p(token | previous
    tokens of the same sequence)`` over its next-token targets, each weighted
    by ``loss_weights`` when the packs carry them: with
    `tfpack.builders.sft_examples` (``(prompt, continuation)`` pairs: 0.0 on the
    prompt's targets) it is the log-likelihood of the continuation given the
    prompt. ``targets`` is the (weighted) number of targets, so
    ``exp(-log_likelihood / targets)`` is the sequence's perplexity. A
    sequence scores the same packed or alone (the causal mask is
    block-diagonal); `tfpack.predict` and the ``serve_sequences`` signature
    (whole sequences, no weights) return the scores per example.

    Example:

    >>> import numpy as np
    >>> from tfpack.models import CausalLM, DecoderBackbone
    >>> lm = CausalLM(DecoderBackbone(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                               num_heads=2, intermediate_dim=16))
    >>> scorer = CausalLMScorer(lm)
    >>> features = {
    ...     "input_ids": np.array([[5, 6, 7, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 1, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 2, 0, 1, 0]]),
    ...     "sequence_mask": np.array([[1.0, 1.0, 0.0]]),
    ... }
    >>> np.asarray(scorer(features)["targets"]).tolist()
    [[2.0, 1.0, 0.0]]

    Args:
        lm: a `CausalLM` (or any model returning next-token ``logits`` [B, L, V]).
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: the LM's features, ``sequence_mask`` (K) and optionally
            ``loss_weights``.

    Returns:
        ``{"log_likelihood": [B, K], "targets": [B, K]}``, float32, 0 for
        absent sequences.
    """

    packed_outputs = {"log_likelihood": "sequence", "targets": "sequence"}
    optional_features = ("loss_weights",)

    @validate_params({"lm": Anything("a causal LM returning logits")})
    def __init__(self, lm, **kwargs):
        super().__init__(**kwargs)
        self.lm = lm

    @property
    def input_features(self):
        names = tuple(getattr(self.lm, "input_features", ("input_ids", "sequence_ids",
                                                          "position_ids")))
        return tuple(dict.fromkeys(names + ("sequence_mask", "loss_weights")))

    @property
    def vocabulary_size(self):
        return self.lm.vocabulary_size

    def call(self, inputs, training=None):
        logits = self.lm(inputs, training=False)["logits"]
        labels = next_token_targets(inputs["input_ids"], inputs["sequence_ids"])
        mask = ops.cast(inputs["sequence_mask"], "float32")
        log_likelihood, targets = sequence_log_likelihoods(
            logits, labels, inputs["sequence_ids"], mask.shape[-1],
            loss_weights=inputs.get("loss_weights"))
        return {"log_likelihood": log_likelihood * mask, "targets": targets * mask}

    def get_config(self):
        config = super().get_config()
        config["lm"] = keras.saving.serialize_keras_object(self.lm)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["lm"] = keras.saving.deserialize_keras_object(config["lm"])
        return cls(**config)
