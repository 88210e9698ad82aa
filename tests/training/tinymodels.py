"""A tiny model that follows the tfpack model contract, and packed batches for it.

Contract (see the brief of tfpack.models): called on ONE dict of DESIGN.md
features, returns a dict; ``loss_terms``; ``loss_statistics(x, y_pred)`` gives
``{t}_loss_sum``, ``{t}_count``, ``{t}_correct`` float32 scalars per term;
``target_counts(x)`` per term from the features; ``compute_loss`` = sum_t loss_sum /
max(count, 1) so that ``fit`` works.
No attention, so nothing leaks between packed sequences by construction.
"""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

L, K, M, V = 16, 3, 4, 11


@keras.saving.register_keras_serializable(package="tfpack_tests")
class TinyPretrainer(keras.Model):
    loss_terms = ("mlm", "nsp")

    def __init__(self, vocab_size=V, hidden=8, max_length=L, max_sequences_per_pack=K,
                 max_predictions_per_pack=M, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.hidden = vocab_size, hidden
        self.max_length = max_length
        self.max_sequences_per_pack = max_sequences_per_pack
        self.max_predictions_per_pack = max_predictions_per_pack
        self.embed = keras.layers.Embedding(vocab_size, hidden, name="embed")
        self.position = keras.layers.Embedding(max_length, hidden, name="position")
        self.dense = keras.layers.Dense(hidden, activation="tanh", name="dense")
        self.layer_norm = keras.layers.LayerNormalization(name="layer_norm")
        self.mlm = keras.layers.Dense(vocab_size, name="mlm_head")
        self.nsp = keras.layers.Dense(2, name="nsp_head")

    def call(self, x, training=False):
        h = self.embed(x["input_ids"]) + self.position(x["position_ids"])
        h = self.layer_norm(self.dense(h))
        mlm_h = ops.take_along_axis(h, ops.expand_dims(x["masked_lm_positions"], -1), axis=1)
        cls_h = ops.take_along_axis(h, ops.expand_dims(x["cls_positions"], -1), axis=1)
        return {"mlm_logits": self.mlm(mlm_h), "nsp_logits": self.nsp(cls_h)}

    def loss_statistics(self, x, y_pred):
        out = {}
        for term, logits, labels, weights in (
                ("mlm", y_pred["mlm_logits"], x["masked_lm_ids"], x["masked_lm_weights"]),
                ("nsp", y_pred["nsp_logits"], x["next_sentence_labels"], x["sequence_mask"])):
            logits = ops.cast(logits, "float32")
            weights = ops.cast(weights, "float32")
            ce = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            hit = ops.cast(ops.equal(ops.argmax(logits, -1), ops.cast(labels, "int64")), "float32")
            out[f"{term}_loss_sum"] = ops.sum(ce * weights)
            out[f"{term}_count"] = ops.sum(weights)
            out[f"{term}_correct"] = ops.sum(hit * weights)
        return out

    def target_counts(self, x):
        # Counts from the features alone, so the trainer needs no extra forward pass.
        return {"mlm": ops.sum(ops.cast(x["masked_lm_weights"], "float32")),
                "nsp": ops.sum(ops.cast(x["sequence_mask"], "float32"))}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        stats = self.loss_statistics(x, y_pred)
        return sum(stats[f"{t}_loss_sum"] / ops.maximum(stats[f"{t}_count"], 1.0)
                   for t in self.loss_terms)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "hidden": self.hidden,
                "max_length": self.max_length,
                "max_sequences_per_pack": self.max_sequences_per_pack,
                "max_predictions_per_pack": self.max_predictions_per_pack}


def packed_examples(n, seed=0, L=L, K=K, M=M, vocab=V):
    """n packed examples (numpy dict, batch-leading) with 1..K sequences each."""
    rng = np.random.default_rng(seed)
    f = {k: np.zeros((n, L), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    f.update({k: np.zeros((n, M), np.int32) for k in
              ("masked_lm_positions", "masked_lm_ids", "masked_lm_sequence_ids")})
    f["masked_lm_weights"] = np.zeros((n, M), np.float32)
    f["cls_positions"] = np.zeros((n, K), np.int32)
    f["sequence_mask"] = np.zeros((n, K), np.float32)
    f["next_sentence_labels"] = np.zeros((n, K), np.int32)
    for i in range(n):
        depth = rng.integers(1, K + 1)
        lengths = rng.integers(2, L // K + 1, size=depth)
        start, predictions = 0, 0
        for k, length in enumerate(lengths):
            tokens = rng.integers(1, vocab, size=length)
            f["input_ids"][i, start:start + length] = tokens
            f["sequence_ids"][i, start:start + length] = k + 1
            f["position_ids"][i, start:start + length] = np.arange(length)
            f["cls_positions"][i, k] = start
            f["sequence_mask"][i, k] = 1.0
            f["next_sentence_labels"][i, k] = rng.integers(0, 2)
            for pos in rng.choice(length, size=min(length, rng.integers(0, 3)), replace=False):
                if predictions < M:
                    f["masked_lm_positions"][i, predictions] = start + pos
                    f["masked_lm_ids"][i, predictions] = tokens[pos]
                    f["masked_lm_weights"][i, predictions] = 1.0
                    f["masked_lm_sequence_ids"][i, predictions] = k + 1
                    predictions += 1
            start += length
    return f


def dataset(n, seed=0, **kwargs):
    return tf.data.Dataset.from_tensor_slices(packed_examples(n, seed, **kwargs))
