"""Preference pairs, each sequence run alone, a NumPy reference of the four losses,
and one `Trainer` update on uneven packs.

Shared by the decoder tests, the keras-hub tests and the two-replica run
(`update_helpers.replicas_updates`, a subprocess: logical devices must be
set before TensorFlow starts).
"""

import numpy as np

from tfpack.builders import preference_pair
from tfpack.testing import pack_examples

VOCAB, MAX_LENGTH = 29, 48
LOSS_OPTIONS = dict(beta=0.5, simpo_gamma=0.3, orpo_lambda=0.7)


def make_pairs(seed=0, count=7, vocabulary=VOCAB):
    """Pairs of prompts of 1-4 tokens and responses of 1-3 (at most 14 tokens a pair)."""
    rng = np.random.default_rng(seed)

    def tokens(low, high):
        return rng.integers(1, vocabulary, int(rng.integers(low, high + 1))).tolist()

    return [{"prompt": tokens(1, 4), "chosen": tokens(1, 3), "rejected": tokens(1, 3)}
            for _ in range(count)]


def items(pairs, share_prompt=False):
    return [preference_pair(p["prompt"], p["chosen"], p["rejected"], share_prompt=share_prompt)
            for p in pairs]


def with_reference(examples, reference):
    """The examples with reference log-likelihoods (``{chosen, rejected}`` lists)."""
    return [dict(e, reference_chosen_log_likelihood=np.float32(c),
                 reference_rejected_log_likelihood=np.float32(r))
            for e, c, r in zip(examples, reference["chosen"], reference["rejected"])]


# Packs of 3, 1, 2 and 1 pairs: a per-micro-batch mean would weigh pairs unevenly.
UNEVEN_PACKS = [[0, 1, 2], [3], [4, 5], [6]]


def sequences_alone(lm, sequences):
    """``lm``'s float32 log-probabilities ``[len(sequences), longest, V]`` of each
    sequence alone, in one call: each its own row, right padded with 0 (one
    sequence a row, positions from 0). The decoder is causal, so the padding
    after a sequence never reaches its tokens, and the rows never meet: each row
    is the sequence run alone (one eager call instead of one a sequence, most of
    the cost of the tests that compare with the sequences alone)."""
    import tensorflow as tf

    longest = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), longest), np.int32)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = sequence
    logits = lm({"input_ids": ids, "sequence_ids": np.ones_like(ids),
                 "position_ids": np.tile(np.arange(longest, dtype=np.int32), (len(ids), 1))},
                training=False)["logits"]
    return tf.nn.log_softmax(tf.cast(logits, tf.float32))


def pairs_alone(lm, pairs):
    """Per pair ``(chosen, rejected, |chosen|, |rejected|)``, every sequence run alone
    (`sequences_alone`)."""
    responses = [(p["prompt"], r) for p in pairs for r in (p["chosen"], p["rejected"])]
    log_probs = np.asarray(sequences_alone(lm, [prompt + r for prompt, r in responses]))
    scores = [float(np.sum(log_probs[row, np.arange(len(prompt) - 1, len(prompt) + len(r) - 1), r],
                           dtype=np.float32))
              for row, (prompt, r) in enumerate(responses)]
    return np.array([(scores[2 * i], scores[2 * i + 1], len(p["chosen"]), len(p["rejected"]))
                     for i, p in enumerate(pairs)], np.float64)


def numpy_losses(loss, scores, reference=None, beta=0.5, simpo_gamma=0.3, orpo_lambda=0.7):
    """The papers' per-pair losses and reward margins, in float64 NumPy."""
    c, r, nc, nr = scores.T

    def softplus(x):
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)

    if loss in ("sigmoid", "ipo"):
        h = (c - reference[:, 0]) - (r - reference[:, 1])
        if loss == "sigmoid":
            return softplus(-beta * h), beta * h          # -log sigma(beta h)
        return (h - 1 / (2 * beta)) ** 2, beta * h
    mc, mr = c / nc, r / nr
    if loss == "simpo":
        margin = beta * mc - beta * mr
        return softplus(-(margin - simpo_gamma)), margin

    def odds(p):
        return p - np.log(1 - np.exp(p))

    margin = odds(mc) - odds(mr)
    return -mc + orpo_lambda * softplus(-margin), margin


def pack(examples, packs, max_length=MAX_LENGTH, max_pairs=None):
    return pack_examples(examples, max_length, packs=packs, max_sequences_per_pack=max_pairs)


def per_pair(outputs, packs, count):
    """``{name: [count]}``: the packed ``[B, K]`` outputs read back per pair."""
    found = {name: np.zeros(count) for name in outputs}
    for row, members in enumerate(packs):
        for slot, index in enumerate(members):
            for name, value in outputs.items():
                found[name][index] = np.asarray(value)[row, slot]
    return found


# The one-update tests ask how the loss of an update is normalized (the pair count
# across micro-batches, accumulation steps and replicas), which the depth of the
# model does not change: their policy has one layer (a Trainer update on two took
# 30-40% more CPU, nearly all of it tracing and graph optimization).
UPDATE_LAYERS = 1


def decoder_policy(seed=0, num_layers=2, **kwargs):
    import keras

    from tfpack.models import CausalLM, DecoderBackbone

    keras.utils.set_random_seed(seed)
    return CausalLM(DecoderBackbone(vocabulary_size=VOCAB, num_layers=num_layers, hidden_dim=16,
                                    num_heads=2, intermediate_dim=32,
                                    max_sequence_length=MAX_LENGTH, **kwargs))


def reference_scores(seed=7):
    rng = np.random.default_rng(seed)
    return {"chosen": rng.uniform(-12, -2, 7).tolist(), "rejected": rng.uniform(-12, -2, 7).tolist()}


def trainer_update(strategy, loss, micro, accumulation):
    """Weights after ONE `Trainer` update (SGD, learning rate 1) on the uneven packs."""
    from tfpack.models import PreferenceModel

    from update_helpers import trainer_update as update

    examples = with_reference(items(make_pairs()), reference_scores())
    packs = pack(examples, UNEVEN_PACKS, max_pairs=3)
    return update(strategy, lambda: PreferenceModel(decoder_policy(num_layers=UPDATE_LAYERS),
                                                    "precomputed", loss=loss, **LOSS_OPTIONS),
                  packs, micro, accumulation)


def unpacked_update(loss):
    """Weights after one SGD step (learning rate 1) with every pair alone in its row."""
    import keras
    import tensorflow as tf

    from tfpack.models import PreferenceModel

    examples = with_reference(items(make_pairs()), reference_scores())
    rows = pack(examples, [[i] for i in range(len(examples))], max_pairs=1)
    model = PreferenceModel(decoder_policy(num_layers=UPDATE_LAYERS), "precomputed", loss=loss,
                            **LOSS_OPTIONS)
    x = {k: tf.constant(v) for k, v in rows.items()}
    model(x)
    with tf.GradientTape() as tape:
        value = model.compute_loss(x=x, y_pred=model(x), training=False)
    grads = tape.gradient(value, model.trainable_variables)
    keras.optimizers.SGD(1.0).apply(grads, model.trainable_variables)
    return [v.numpy() for v in model.trainable_variables]


def local_mean_update(loss):
    """The update a per-micro-batch mean would make: each pack's own mean, averaged."""
    import keras
    import tensorflow as tf

    from tfpack.models import PreferenceModel

    examples = with_reference(items(make_pairs()), reference_scores())
    packs = pack(examples, UNEVEN_PACKS, max_pairs=3)
    model = PreferenceModel(decoder_policy(num_layers=UPDATE_LAYERS), "precomputed", loss=loss,
                            **LOSS_OPTIONS)
    rows = [{k: tf.constant(v[i:i + 1]) for k, v in packs.items()}
            for i in range(len(UNEVEN_PACKS))]
    model(rows[0])
    with tf.GradientTape() as tape:
        value = tf.add_n([model.compute_loss(x=x, y_pred=model(x), training=False)
                          for x in rows]) / len(rows)
    grads = tape.gradient(value, model.trainable_variables)
    keras.optimizers.SGD(1.0).apply(grads, model.trainable_variables)
    return [v.numpy() for v in model.trainable_variables]


def close(a, b, tolerance=1e-6):
    """Equal to ``tolerance`` relative to the values' scale (at least 1): float32 rounding."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.abs(a - b).max() <= tolerance * max(1.0, np.abs(b).max())
