"""SFT packs whose targets are weighted unevenly, and one update on them.

Shared by the accumulation test (in process) and the two-replica run
(`update_helpers.replicas_updates`, a subprocess: logical devices must be set
before TensorFlow starts).
"""

import numpy as np

from tfpack.testing import next_token_labels, pack_examples

VOCAB, MAX_LENGTH = 23, 10


def sft_example(prompt, response):
    """Position i predicts token i + 1; it is trained when that is a response token."""
    ids = np.array(prompt + response, np.int32)
    weights = (np.arange(len(ids)) + 1 >= len(prompt)).astype(np.float32)
    weights[-1] = 0.0
    return {"input_ids": ids, "labels": next_token_labels(ids), "loss_weights": weights}


def sft_packs():
    """Four packs of two sequences, 1 to 8 trained targets per pack."""
    rng = np.random.default_rng(3)

    def tokens(n):
        return rng.integers(1, VOCAB, n).tolist()

    # Pack 1 ends with a prompt without response: no target of it counts.
    shapes = [((1, 6), (1, 2)), ((4, 1), (3, 0)), ((1, 4), (2, 2)), ((6, 1), (2, 1))]
    examples, packs = [], []
    for (a, b), (c, d) in shapes:
        packs.append([len(examples), len(examples) + 1])
        examples += [sft_example(tokens(a), tokens(b)), sft_example(tokens(c), tokens(d))]
    return pack_examples(examples, MAX_LENGTH, packs=packs, max_sequences_per_pack=2)


def make_model(averaging):
    from tfpack import models

    return models.CausalLM(models.DecoderBackbone(
        vocabulary_size=VOCAB, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16,
        max_sequence_length=MAX_LENGTH), lm_averaging=averaging)


def trainer_update(strategy, averaging, micro, accumulation):
    """Weights after ONE `Trainer` update (SGD, learning rate 1) on the four packs."""
    import keras

    from update_helpers import trainer_update as update

    def seeded_model():
        keras.utils.set_random_seed(0)
        return make_model(averaging)

    return update(strategy, seeded_model, sft_packs(), micro, accumulation)


def expected_update(averaging, micro_batches):
    """Weights after SGD(1) on the hand-written global loss over all packs.

    ``micro_batches`` > 1 gives the WRONG (local-mean) update: the mean over
    micro-batches of each one's own mean, which a correct trainer must not do.
    """
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = make_model(averaging)
    packs = sft_packs()
    model(packs)
    rows = np.array_split(np.arange(len(packs["input_ids"])), micro_batches)
    with tf.GradientTape() as tape:
        total = 0.0
        for part in rows:
            x = {k: tf.constant(v[part]) for k, v in packs.items()}
            logits = model(x, training=True)["logits"]
            ce = keras.losses.sparse_categorical_crossentropy(
                tf.maximum(x["labels"], 0), logits, from_logits=True)
            w = x["loss_weights"] * tf.cast(x["labels"] != -100, tf.float32)
            if averaging == "token":
                total += tf.reduce_sum(ce * w) / tf.reduce_sum(w)
            else:
                means = []
                for row in range(len(part)):
                    for seq in (1, 2):
                        keep = tf.cast(x["sequence_ids"][row] == seq, tf.float32) * w[row]
                        if float(tf.reduce_sum(keep)) > 0:
                            means.append(tf.reduce_sum(ce[row] * keep) / tf.reduce_sum(keep))
                total += tf.add_n(means) / len(means)
        loss = total / micro_batches
    grads = tape.gradient(loss, model.trainable_variables)
    return [(v - g).numpy() for v, g in zip(model.trainable_variables, grads)]
