"""Extractive question answering on packed batches: a span per sequence."""

import keras
from keras import ops

from tfpack.layers.losses import span_statistics
from tfpack.models.backbone import head_hint
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class QuestionAnswerer(Task):
    """A backbone that finds an answer span in every sequence of a pack.

    Each sequence is ``[CLS] question [SEP] context window [SEP]``
    (`tfpack.builders.question_answering_examples`). A dense layer gives every
    token a start and an end logit; the loss classifies the start and the end
    of each sequence over its own tokens only (`span_statistics`), so a pack
    trains exactly like its sequences one per row. ``start_positions`` and
    ``end_positions`` [K] index the pack: packing shifts them by the
    sequence's offset, and a window without the answer points at its own
    ``[CLS]``. `tfpack.builders.best_answers` turns the per-example logits of all
    windows of a question into its answer text.

    Example:

    >>> import numpy as np
    >>> from tfpack.models import BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = QuestionAnswerer(encoder)
    >>> features = {
    ...     "input_ids": np.array([[2, 6, 2, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "sequence_mask": np.array([[1.0, 1.0, 0.0]]),
    ... }
    >>> {k: v.shape for k, v in model(features).items()}
    {'start_logits': TensorShape([1, 6]), 'end_logits': TensorShape([1, 6])}

    Args:
        backbone: a `BertEncoder` or any backbone.
        expected_counts: loss balancing, e.g. `{"qa": 1.5}`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict with the backbone's features and `sequence_mask`.
        training: whether dropout is active.

    Returns:
        `{"start_logits": [B, L], "end_logits": [B, L]}`, float32.
    """

    task = "question_answering"
    loss_terms = ("qa",)
    head_features = ("sequence_mask",)

    @validate_params(TASK_PARAMETERS)
    def __init__(self, backbone, expected_counts=None, **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        self.span_head = keras.layers.Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=head_hint(backbone, "initializer_range")),
            dtype=self.dtype_policy, name="span_head")

    def call(self, inputs, training=None):
        logits = ops.cast(self.span_head(self.sequence_output(inputs, training=training)),
                          "float32")
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def loss_statistics(self, x, y_pred):
        return span_statistics(y_pred["start_logits"], y_pred["end_logits"],
                               x["start_positions"], x["end_positions"],
                               x["sequence_ids"], x["sequence_mask"])

    def target_counts(self, x):
        return {"qa": ops.sum(ops.cast(x["sequence_mask"], "float32"))}
