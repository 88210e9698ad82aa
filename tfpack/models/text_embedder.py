"""Sentence embeddings on packed batches: one vector per sequence of a pack."""

import keras

from tfpack.layers.losses import contrastive_count
from tfpack.layers.losses import contrastive_statistics
from tfpack.layers.pooling import PackedSequencePooling
from tfpack.layers.arguments import POSITIVE
from tfpack.layers.pooling import POOLING_MODES
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import Boolean, Options, validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class TextEmbedder(Task):
    """A backbone that embeds every sequence of a pack.

    ``pooling="mean"`` averages each sequence's own tokens (the
    sentence-transformers definition, e.g. all-MiniLM-L6-v2 with
    ``normalize=True``), ``"cls"`` takes its first token and ``"last"`` its
    last one (decoders); the embedding of a sequence is the same packed or
    alone. Fine-tuning uses a supervised contrastive loss over every sequence
    of the batch: ``labels`` [K] are group ids, sequences of a group are each
    other's positives (`tfpack.layers.losses.contrastive_statistics`).

    Example:

    >>> import numpy as np
    >>> from tfpack.models import BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = TextEmbedder(encoder)
    >>> features = {
    ...     "input_ids": np.array([[2, 6, 2, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "cls_positions": np.array([[0, 2, 0]]),
    ...     "sequence_mask": np.array([[1.0, 1.0, 0.0]]),
    ... }
    >>> embeddings = model(features)["embeddings"]
    >>> embeddings.shape, round(float(np.linalg.norm(embeddings[0, 1])), 4)
    (TensorShape([1, 3, 8]), 1.0)

    Args:
        backbone: a `BertEncoder`, `DecoderBackbone` or any backbone.
        pooling: ``"mean"``, ``"cls"`` or ``"last"``.
        normalize: L2-normalize the embeddings.
        temperature: temperature of the contrastive loss.
        expected_counts: loss balancing, e.g. `{"contrastive": 2.0}`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict of features (backbone features, `cls_positions`,
            `sequence_mask`).
        training: whether dropout is active.

    Returns:
        `{"embeddings": [B, K, hidden_dim]}`, float32, 0 for absent sequences.
    """

    task = "embedding"
    loss_terms = ("contrastive",)
    head_features = ("sequence_ids", "cls_positions", "sequence_mask")

    @validate_params({**TASK_PARAMETERS, "pooling": Options(*POOLING_MODES),
                      "normalize": Boolean(), "temperature": POSITIVE})
    def __init__(self, backbone, pooling="mean", normalize=True, temperature=0.05,
                 expected_counts=None, **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        self.pooling = pooling
        self.normalize = normalize
        self.temperature = temperature
        self.pooler = PackedSequencePooling(pooling, normalize=normalize,
                                            dtype=self.dtype_policy, name="pooling")

    def call(self, inputs, training=None):
        sequence_output = self.sequence_output(inputs, training=training)
        return {"embeddings": self.pooler(sequence_output, inputs["sequence_ids"],
                                          inputs["cls_positions"], inputs["sequence_mask"])}

    def loss_statistics(self, x, y_pred):
        return contrastive_statistics(y_pred["embeddings"], x["labels"], x["sequence_mask"],
                                      temperature=self.temperature)

    def target_counts(self, x):
        return {"contrastive": contrastive_count(x["labels"], x["sequence_mask"])}

    def get_config(self):
        config = super().get_config()
        config.update(pooling=self.pooling, normalize=self.normalize,
                      temperature=self.temperature)
        return config
