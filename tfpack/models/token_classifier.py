"""Token classification (tagging: NER, POS) on packed batches."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.evaluation.metrics import EntityF1
from tfpack.layers.losses import causal_lm_count
from tfpack.layers.losses import causal_lm_statistics
from tfpack.models.backbone import head_hint
from tfpack.layers.arguments import DROPOUT, WIDTH
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import Anything, validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class TokenClassifier(Task):
    """A backbone that tags every token of every sequence of a pack.

    ``labels`` [L] hold a class per token and ``IGNORE_LABEL`` (-100) where
    nothing is trained: `tfpack.builders.token_classification_examples` labels
    the first sub-token of each word and ignores the rest, so a word is
    predicted at its first sub-token (`word_predictions`). The loss is the
    mean cross-entropy over labelled tokens, with counts summed over the
    batch as in unpacked training. With ``tags`` (BIO names of the classes)
    ``evaluate`` also reports ``entity_f1``, entity-level micro F1 over the
    words of each sequence (`tfpack.evaluation.EntityF1`).

    Example:

    >>> import numpy as np
    >>> from tfpack.models import BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = TokenClassifier(encoder, num_classes=3, tags=["O", "B-X", "I-X"])
    >>> features = {
    ...     "input_ids": np.array([[2, 6, 2, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "labels": np.array([[-100, 1, -100, 2, -100, -100]]),
    ... }
    >>> model(features)["logits"].shape
    TensorShape([1, 6, 3])

    Args:
        backbone: a `BertEncoder`, `DecoderBackbone` or any backbone.
        num_classes: number of tags.
        tags: optional names of the classes (``"O"``, ``"B-PER"``, ...); turn
            on the ``entity_f1`` metric.
        dropout: dropout before the classifier.
        expected_counts: loss balancing, e.g. `{"tagging": 100.0}`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict with the backbone's features.
        training: whether dropout is active.

    Returns:
        `{"logits": [B, L, num_classes]}`, float32.
    """

    task = "token_classification"
    loss_terms = ("tagging",)

    @validate_params({**TASK_PARAMETERS, "num_classes": WIDTH,
                      "tags": Anything("None or a name per class, checked below"),
                      "dropout": DROPOUT})
    def __init__(self, backbone, num_classes, tags=None, dropout=0.1,
                 expected_counts=None, **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        if tags is not None and len(tags) != num_classes:
            raise TfpackError("`tags` must name every class. Received: "
                              f"{len(tags)} tags for num_classes={num_classes}")
        self.num_classes = num_classes
        self.tags = None if tags is None else list(tags)
        self.dropout = dropout
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.classifier = keras.layers.Dense(
            num_classes, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=head_hint(backbone, "initializer_range")),
            dtype=self.dtype_policy, name="classifier")
        self._entity_f1 = None if tags is None else EntityF1(self.tags)

    def call(self, inputs, training=None):
        x = self.sequence_output(inputs, training=training)
        x = self.dropout_layer(x, training=training)
        return {"logits": ops.cast(self.classifier(x), "float32")}

    def loss_statistics(self, x, y_pred):
        return causal_lm_statistics.__wrapped__(y_pred["logits"], x["labels"], term="tagging")

    def target_counts(self, x):
        return {"tagging": causal_lm_count.__wrapped__(x["labels"])}

    def update_task_metrics(self, x, y_pred, statistics):
        if self._entity_f1 is not None:
            self._entity_f1.update_state(x["labels"], ops.argmax(y_pred["logits"], axis=-1),
                                         x["sequence_ids"])

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, tags=self.tags, dropout=self.dropout)
        return config
