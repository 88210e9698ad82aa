"""Position embedding looked up by per-sequence position ids."""

import keras
from keras import ops

from tfpack.layers.arguments import INITIALIZER, WIDTH
from tfpack.params import validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class PackedPositionEmbedding(keras.layers.Layer):
    """Learned position embedding indexed by `position_ids`.

    Vanilla BERT adds the first `L` rows of its position table to the token
    embeddings, which is only right when every row holds one sequence that
    starts at index 0. In a pack the position restarts at 0 for every sequence
    (seed 000, section 3.2.1), so this layer replaces the bias add with a
    lookup of each token's own position id.

    Example:

    >>> import numpy as np
    >>> layer = PackedPositionEmbedding(max_length=8, output_dim=4)
    >>> position_ids = np.array([[0, 1, 0, 1, 2, 0]])  # lengths 2 and 3, pad
    >>> layer(position_ids).shape
    TensorShape([1, 6, 4])

    Args:
        max_length: number of rows of the table: the longest sequence the
            layer can embed (BERT's `max_position_embeddings`).
        output_dim: embedding width.
        initializer: initializer of the table.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        position_ids: int tensor `[batch, length]`, the position of every
            token inside its own sequence.

    Returns:
        `[batch, length, output_dim]` embeddings in the layer's compute dtype.
    """

    @validate_params({"max_length": WIDTH, "output_dim": WIDTH, "initializer": INITIALIZER})
    def __init__(self, max_length, output_dim, initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        self.max_length = max_length
        self.output_dim = output_dim
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape=None):
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_length, self.output_dim),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, position_ids):
        position_ids = ops.cast(position_ids, "int32")
        embeddings = ops.take(self.position_embeddings, position_ids, axis=0)
        return ops.cast(embeddings, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_length": self.max_length,
            "output_dim": self.output_dim,
            "initializer": keras.initializers.serialize(self.initializer),
        })
        return config
