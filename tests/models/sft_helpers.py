"""SFT packs whose targets are weighted unevenly, and one update on them.

Shared by the accumulation test (in process) and the two-replica run
(`update_helpers.replicas_update`, a subprocess: logical devices must be set
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
