"""Google BERT pre-training TFRecords for tests: random examples, written as
`create_pretraining_data.py` writes them (padded to `max_seq_length`)."""

import numpy as np
import tensorflow as tf

import tfpack


def google_examples(count, seed=0, max_seq_length=32, max_predictions=5):
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(count):
        n = int(rng.integers(5, max_seq_length + 1))
        ids = rng.integers(1000, 2000, size=n).tolist()
        m = int(rng.integers(1, max_predictions + 1))
        positions = sorted(
            rng.choice(np.arange(1, n - 1), size=min(m, n - 2), replace=False).tolist())
        examples.append({
            "input_ids": ids, "token_type_ids": [0] * (n // 2) + [1] * (n - n // 2),
            "masked_lm_positions": positions, "masked_lm_ids": [ids[p] + 1 for p in positions],
            "masked_lm_weights": [1.0] * len(positions),
            "next_sentence_labels": int(rng.integers(0, 2)),
        })
    return examples


def write_google(path, examples, max_seq_length=32, max_predictions=5):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for e in examples:
            writer.write(tfpack.data.google_example(
                e["input_ids"], e["token_type_ids"], e["masked_lm_positions"],
                e["masked_lm_ids"], e["next_sentence_labels"], max_seq_length=max_seq_length,
                max_predictions_per_seq=max_predictions))
