"""Tiny configurations and examples shared by the model tests."""

import numpy as np

from tfpack.models import BertEncoder
from tfpack.testing import next_token_labels

VOCAB = 40
LENGTHS = [5, 3, 7, 4, 6, 2]
MAX_LENGTH = 12


def tiny_encoder(**kwargs):
    config = dict(vocabulary_size=VOCAB, num_layers=2, hidden_dim=16,
                  num_heads=2, intermediate_dim=32, max_sequence_length=16)
    config.update(kwargs)
    return BertEncoder(**config)


def bert_examples(seed=0):
    rng = np.random.default_rng(seed)
    examples = []
    for n in LENGTHS:
        positions = np.sort(rng.choice(np.arange(1, n), size=min(2, n - 1),
                                       replace=False))
        examples.append({
            "input_ids": rng.integers(1, VOCAB, n),
            "token_type_ids": (np.arange(n) > n // 2).astype(int),
            "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(1, VOCAB, len(positions)),
            "next_sentence_labels": int(rng.integers(0, 2)),
            "labels": int(rng.integers(0, 3)),
        })
    return examples


def causal_examples(seed=0):
    rng = np.random.default_rng(seed)
    examples = []
    for n in LENGTHS:
        ids = rng.integers(1, VOCAB, n)
        examples.append({"input_ids": ids, "labels": next_token_labels(ids)})
    return examples


