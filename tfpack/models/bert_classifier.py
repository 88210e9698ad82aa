"""Per-sequence classification (fine-tuning) on packed batches."""

import keras
from keras import ops

from tfpack.evaluation.metrics import MacroF1
from tfpack.layers.losses import sequence_statistics
from tfpack.layers.sequence_head import PackedSequenceHead
from tfpack.models.backbone import head_hint
from tfpack.layers.arguments import DROPOUT, WIDTH
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class BertClassifier(Task):
    """A backbone that classifies every sequence of a pack.

    The backbone is a `BertEncoder` or any other (`tfpack.models.backbone`);
    the head reads each sequence's first token at `cls_positions`.

    One label per sequence (`labels` [B, K]); the loss, the accuracy and the
    ``macro_f1`` metric count real sequences (`sequence_mask`) only, so a pack
    of three sequences weighs three times a pack of one, as in unpacked
    fine-tuning.

    Example:

    >>> import numpy as np
    >>> from tfpack.models import BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = BertClassifier(encoder, num_classes=3)
    >>> features = {
    ...     "input_ids": np.array([[2, 6, 2, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "cls_positions": np.array([[0, 2, 0]]),
    ...     "sequence_mask": np.array([[1.0, 1.0, 0.0]]),
    ...     "labels": np.array([[2, 0, 0]]),
    ... }
    >>> model(features)["logits"].shape
    TensorShape([1, 3, 3])

    Args:
        backbone: a `BertEncoder` or any backbone.
        num_classes: number of classes.
        dropout: dropout before the classifier.
        expected_counts: loss balancing, e.g. `{"classification": 2.0}`.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict of features (backbone features, `cls_positions`,
            `sequence_mask`).
        training: whether dropout is active.

    Returns:
        `{"logits": [B, K, num_classes]}`, float32, 0 for absent sequences.
    """

    task = "classification"
    loss_terms = ("classification",)
    head_features = ("cls_positions", "sequence_mask")

    @validate_params({**TASK_PARAMETERS, "num_classes": WIDTH, "dropout": DROPOUT})
    def __init__(self, backbone, num_classes, dropout=0.1, expected_counts=None,
                 **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout
        self.head = PackedSequenceHead(
            num_classes, dropout=dropout,
            kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=head_hint(backbone, "initializer_range")),
            dtype=self.dtype_policy, name="classifier_head")
        self._macro_f1 = MacroF1(num_classes)

    def call(self, inputs, training=None):
        sequence_output = self.sequence_output(inputs, training=training)
        return {"logits": self.head(sequence_output, inputs["cls_positions"],
                                    inputs.get("sequence_mask"),
                                    training=training)}

    def loss_statistics(self, x, y_pred):
        return sequence_statistics.__wrapped__(y_pred["logits"], x["labels"],
                                               x["sequence_mask"], term="classification")

    def target_counts(self, x):
        return {"classification": ops.sum(ops.cast(x["sequence_mask"], "float32"))}

    def update_task_metrics(self, x, y_pred, statistics):
        self._macro_f1.update_state(x["labels"], ops.argmax(y_pred["logits"], axis=-1),
                                    x["sequence_mask"])

    @classmethod
    def from_pretrained(cls, path, num_classes, **kwargs):
        """Encoder and pooler from a Hugging Face BERT directory; new classifier.

        Example (not run: needs a checkpoint directory):

        >>> model = BertClassifier.from_pretrained(path, 2)  # doctest: +SKIP
        """
        from tfpack.models import hf_bert
        from tfpack.models.bert_encoder import BertEncoder

        model = cls(BertEncoder.from_pretrained(path), num_classes, **kwargs)
        # Built on unknown L and K (no toy shape is recorded): the shapes come
        # from the data it is trained and exported at.
        model.build({"input_ids": (None, None), "sequence_ids": (None, None),
                     "position_ids": (None, None), "cls_positions": (None, None),
                     "sequence_mask": (None, None)})
        hf_bert.load_pooler_weights(model.head, path)
        return model

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_classes": self.num_classes,
            "dropout": self.dropout,
        })
        return config
