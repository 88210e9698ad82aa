"""Per-sequence classification head (NSP, fine-tuning) for packs."""

import keras
from keras import ops

from tfpack.layers.arguments import DROPOUT, INITIALIZER, WIDTH
from tfpack.params import Boolean, validate_params
from tfpack.layers.gather import gather_positions


@keras.saving.register_keras_serializable(package="tfpack")
class PackedSequenceHead(keras.layers.Layer):
    """Classifies each of the K sequences of a pack from its [CLS] token.

    Gathers the first token of every sequence at `cls_positions` (seed 000,
    appendix T.4: apply the head at the K possible positions and mask the
    absent ones instead of unpacking), runs BERT's pooler (dense + tanh),
    dropout and a dense classifier. Logits of absent sequences
    (`sequence_mask == 0`) are set to 0 so they are deterministic; the
    per-sequence losses ignore them.

    Example:

    >>> import numpy as np
    >>> head = PackedSequenceHead(num_classes=2)
    >>> hidden = np.ones((1, 6, 8), "float32")
    >>> logits = head(hidden, np.array([[0, 3, 0]]), np.array([[1., 1., 0.]]))
    >>> logits.shape
    TensorShape([1, 3, 2])

    Args:
        num_classes: number of classes (2 for NSP).
        pooler: apply BERT's dense+tanh pooler before the classifier.
        dropout: dropout between pooler and classifier.
        kernel_initializer: initializer of the dense kernels.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        sequence_output: `[batch, length, hidden]`.
        cls_positions: int `[batch, K]` index of each sequence's first token.
        sequence_mask: optional float `[batch, K]`, 1 where the sequence exists.
        training: whether dropout is active.

    Returns:
        float32 logits `[batch, K, num_classes]`.
    """

    @validate_params({"num_classes": WIDTH, "pooler": Boolean(), "dropout": DROPOUT,
                      "kernel_initializer": INITIALIZER})
    def __init__(self, num_classes, pooler=True, dropout=0.0,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.pooler = pooler
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout,
                                                  dtype=self.dtype_policy)

    def build(self, sequence_output_shape, cls_positions_shape=None,
              sequence_mask_shape=None):
        hidden = sequence_output_shape[-1]
        if self.pooler:
            self.pooler_dense = keras.layers.Dense(
                hidden, activation="tanh",
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy, name="pooler")
            self.pooler_dense.build((None, None, hidden))
        self.classifier = keras.layers.Dense(
            self.num_classes, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name="classifier")
        self.classifier.build((None, None, hidden))
        self.built = True

    def call(self, sequence_output, cls_positions, sequence_mask=None,
             training=None):
        x = gather_positions(sequence_output, cls_positions)
        if self.pooler:
            x = self.pooler_dense(x)
        x = self.dropout_layer(x, training=training)
        logits = ops.cast(self.classifier(x), "float32")
        if sequence_mask is not None:
            present = ops.expand_dims(ops.cast(sequence_mask, "float32"), -1)
            logits = ops.where(present > 0, logits, ops.zeros_like(logits))
        return logits

    def compute_output_shape(self, sequence_output_shape, cls_positions_shape,
                             sequence_mask_shape=None):
        return tuple(cls_positions_shape) + (self.num_classes,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_classes": self.num_classes,
            "pooler": self.pooler,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
        })
        return config
