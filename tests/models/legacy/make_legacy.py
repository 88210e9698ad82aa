"""Writes the .keras fixtures of tfpack before the backbone/task split.

Produced with tfpack at commit f205bc8 (before the split):
    git worktree add /tmp/old f205bc8 && cd /tmp/old && python make_legacy.py OUT_DIR
Each `NAME.keras` comes with `NAME_outputs.npz`, the model's outputs on the
features `legacy_features(NAME)` of test_legacy_files.py.
"""
import sys
import numpy as np
import keras
from tfpack import models
from tfpack.testing import pack_examples, next_token_labels

out = sys.argv[1]
keras.utils.set_random_seed(0)
enc = lambda: models.BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2,
                                 intermediate_dim=16, max_sequence_length=16)
bert = [{"input_ids": [2, 5, 6, 3], "masked_lm_positions": [1], "masked_lm_ids": [7],
         "next_sentence_labels": 1, "labels": 1, "token_type_ids": [0, 0, 1, 1]},
        {"input_ids": [2, 8, 3], "masked_lm_positions": [1], "masked_lm_ids": [9],
         "next_sentence_labels": 0, "labels": 0, "token_type_ids": [0, 0, 0]}]
lm = [{"input_ids": ids, "labels": next_token_labels(ids)} for ids in ([3, 4, 5], [6, 7])]
cases = {
    "bert_encoder": (enc(), bert),
    "bert_pretrainer": (models.BertPretrainer(enc(), mlm_averaging="sequence"), bert),
    "bert_classifier": (models.BertClassifier(enc(), 3), bert),
    "causal_lm": (models.CausalLM(vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2,
                                  intermediate_dim=16, max_sequence_length=16), lm),
    "causal_lm_untied": (models.CausalLM(vocabulary_size=20, num_layers=1, hidden_dim=8,
                                         num_heads=2, intermediate_dim=16, max_sequence_length=16,
                                         position_embedding="learned", tie_embeddings=False), lm),
}
for name, (model, examples) in cases.items():
    features = pack_examples(examples, max_length=8, max_sequences_per_pack=2)
    outputs = model(features)
    model.save(f"{out}/{name}.keras")
    np.savez(f"{out}/{name}_outputs.npz", **{k: np.asarray(v) for k, v in outputs.items()})
