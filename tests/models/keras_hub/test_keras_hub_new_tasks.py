"""TextEmbedder, TokenClassifier, QuestionAnswerer and CausalLMScorer on keras-hub backbones
(`from_keras_hub`): packed == unpacked per example, with reordered packs and empty slots."""

import keras
import numpy as np
import pytest

from keras_hub_helpers import VOCAB, make_backbone
from tfpack import models
from tfpack.testing import assert_packed_equals_unpacked, next_token_labels

LENGTHS = (5, 3, 7, 2, 6)
PACKS = [[4, 1], [2, 3], [0]]  # reordered; a pack of one


def task_examples(task, seed=0):
    rng = np.random.default_rng(seed)
    result = []
    for n in LENGTHS:
        example = {"input_ids": rng.integers(1, VOCAB, n)}
        if task == "tagging":
            labels = rng.integers(0, 3, n)
            labels[rng.random(n) < 0.3] = -100
            example["labels"] = labels
        elif task == "qa":
            start = int(rng.integers(0, n))
            example.update(start_positions=start, end_positions=int(rng.integers(start, n)))
        elif task == "embedding":
            example["labels"] = int(rng.integers(0, 2))
        else:
            example["labels"] = next_token_labels(example["input_ids"])
        result.append(example)
    return result


@pytest.mark.parametrize("task,family", [("embedding", "bert"), ("tagging", "llama"),
                                         ("qa", "roberta"), ("scoring", "qwen2")])
def test_new_tasks_on_keras_hub_backbones(task, family):
    keras.utils.set_random_seed(0)
    # The adapters' exactness check: in test_conformance.py (every family).
    backbone = models.from_keras_hub(make_backbone(family), check_exact=False)
    model = {"embedding": lambda: models.TextEmbedder(backbone, pooling="last"),
             "tagging": lambda: models.TokenClassifier(backbone, 3, dropout=0.0),
             "qa": lambda: models.QuestionAnswerer(backbone),
             "scoring": lambda: models.CausalLMScorer(models.CausalLM(backbone))}[task]()
    # The contrastive loss divides scores by its temperature (0.05): float32
    # rounding of its gradients grows 20-fold, to ~3e-5.
    assert_packed_equals_unpacked(model, task_examples(task), max_length=16, packs=PACKS,
                                  max_sequences_per_pack=3, check_gradients=task != "scoring",
                                  atol=1e-4 if task == "embedding" else 1e-5)
