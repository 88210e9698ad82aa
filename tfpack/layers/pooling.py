"""Pooling each sequence of a pack into one vector (sentence embeddings)."""

import keras
from keras import ops

from tfpack.layers.gather import gather_positions
from tfpack.params import Boolean, Options, validate_params

POOLING_MODES = ("mean", "cls", "last")


def sequence_membership(sequence_ids, num_sequences):
    """float32 ``[B, L, K]``: 1 where token ``l`` belongs to sequence ``k``.

    Sequence ids are 1..K and 0 is padding, which falls off the one-hot.

    >>> import numpy as np
    >>> sequence_membership(np.array([[1, 1, 2, 0]]), 2).numpy()[0].tolist()
    [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    """
    return ops.one_hot(ops.cast(sequence_ids, "int32") - 1, num_sequences,
                       dtype="float32")


@keras.saving.register_keras_serializable(package="tfpack")
class PackedSequencePooling(keras.layers.Layer):
    """Pools the tokens of each of the K sequences of a pack into one vector.

    ``"mean"`` averages the sequence's own tokens (the sentence-transformers
    definition: padding and the other sequences of the pack count for
    nothing), ``"cls"`` takes its first token, ``"last"`` its last token (the
    usual choice for decoders). With ``normalize`` the vectors are divided by
    their L2 norm (``max(norm, 1e-12)``, as ``torch.nn.functional.normalize``).
    The pooled vector of a sequence is the same whatever else shares its pack;
    absent slots (``sequence_mask == 0``) are zeros.

    Example:

    >>> import numpy as np
    >>> pool = PackedSequencePooling("mean", normalize=False)
    >>> hidden = np.array([[[1., 0.], [3., 2.], [5., 5.], [9., 9.]]], "float32")
    >>> pool(hidden, np.array([[1, 1, 2, 0]]), np.array([[0, 2]]),
    ...      np.array([[1., 1.]])).numpy().tolist()
    [[[2.0, 1.0], [5.0, 5.0]]]

    Args:
        pooling: ``"mean"``, ``"cls"`` or ``"last"``.
        normalize: L2-normalize the pooled vectors.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        sequence_output: ``[batch, L, hidden]``.
        sequence_ids: int ``[batch, L]``, 1..K, 0 for padding.
        cls_positions: int ``[batch, K]``, each sequence's first token.
        sequence_mask: float ``[batch, K]``, 1 where the sequence exists.

    Returns:
        float32 ``[batch, K, hidden]``.
    """

    @validate_params({"pooling": Options(*POOLING_MODES), "normalize": Boolean()})
    def __init__(self, pooling="mean", normalize=True, **kwargs):
        super().__init__(**kwargs)
        self.pooling = pooling
        self.normalize = normalize

    def call(self, sequence_output, sequence_ids, cls_positions, sequence_mask):
        num_sequences = cls_positions.shape[-1]
        hidden = ops.cast(sequence_output, "float32")
        membership = sequence_membership(sequence_ids, num_sequences)
        counts = ops.sum(membership, axis=1)  # [B, K] tokens per sequence
        if self.pooling == "mean":
            # 0 x NaN is NaN: a non-finite token is summed into its own
            # sequence only (which becomes NaN), never into the others.
            finite = ops.all(ops.isfinite(hidden), axis=-1, keepdims=True)
            sums = ops.einsum("blk,blh->bkh", membership,
                              ops.where(finite, hidden, ops.zeros_like(hidden)))
            poisoned = ops.einsum("blk,bl->bk", membership,
                                  ops.cast(ops.logical_not(finite[..., 0]), "float32")) > 0
            pooled = sums / ops.expand_dims(ops.maximum(counts, 1.0), -1)
            pooled = ops.where(poisoned[..., None], float("nan"), pooled)
        else:
            positions = ops.cast(cls_positions, "int32")
            if self.pooling == "last":
                last = positions + ops.cast(counts, "int32") - 1
                positions = ops.maximum(last, 0)
            pooled = gather_positions(hidden, positions)
        if self.normalize:
            # max(norm, 1e-12) taken inside the square root: absent slots are
            # zero vectors, and sqrt's gradient at 0 (inf, times 0 under XLA)
            # would make every gradient NaN.
            squares = ops.sum(ops.square(pooled), axis=-1, keepdims=True)
            pooled = pooled * ops.rsqrt(ops.maximum(squares, 1e-24))
        present = ops.expand_dims(ops.cast(sequence_mask, "float32"), -1)
        return ops.where(present > 0, pooled, ops.zeros_like(pooled))

    def compute_output_shape(self, sequence_output_shape, sequence_ids_shape,
                             cls_positions_shape, sequence_mask_shape):
        return tuple(cls_positions_shape) + (sequence_output_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update({"pooling": self.pooling, "normalize": self.normalize})
        return config
