"""Masked-LM head that reads only the masked positions of a pack."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.gather import gather_positions
from tfpack.layers.arguments import EPSILON, INITIALIZER, WIDTH
from tfpack.layers.transformer_block import ACTIVATIONS, get_activation
from tfpack.params import Anything, Options, validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class PackedMaskedLMHead(keras.layers.Layer):
    """BERT's MLM head applied at `masked_lm_positions` of each pack.

    Gathers the `M` masked positions (indices into the whole pack, so they
    point into whichever sequence owns them), transforms them (dense,
    activation, layer norm) and projects onto the vocabulary with the
    transposed token embedding plus a bias: the output is tied to the input
    embedding, as in BERT and keras-hub's `MaskedLMHead`. The tied embedding is
    serialized in `get_config` and restored in `from_config`; inside a model
    the model passes its own embedding layer again, so the weights stay
    shared after loading.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> embedding = keras.layers.Embedding(10, 8)
    >>> head = PackedMaskedLMHead(vocabulary_size=10, token_embedding=embedding)
    >>> _ = embedding(np.zeros((1, 1), "int32"))
    >>> hidden = np.ones((2, 6, 8), "float32")
    >>> head(hidden, np.array([[0, 4], [1, 0]])).shape
    TensorShape([2, 2, 10])

    Args:
        vocabulary_size: number of output classes.
        token_embedding: a built or buildable `keras.layers.Embedding` whose
            table `[vocabulary_size, hidden]` is the output projection. `None`
            gives the head its own output kernel.
        activation: activation of the transform, as `PackedTransformerBlock`.
        layer_norm_epsilon: epsilon of the transform's layer norm.
        kernel_initializer: initializer of the dense kernels.
        **kwargs: passed on to `keras.layers.Layer`.

    Call arguments:
        sequence_output: `[batch, length, hidden]` encoder output.
        masked_lm_positions: int `[batch, M]` indices into the pack.

    Returns:
        float32 logits `[batch, M, vocabulary_size]`.
    """

    @validate_params({
        "vocabulary_size": WIDTH,
        "token_embedding": Anything("None or an Embedding of vocabulary_size rows, checked below"),
        "activation": Options(*ACTIVATIONS), "layer_norm_epsilon": EPSILON,
        "kernel_initializer": INITIALIZER,
    })
    def __init__(self, vocabulary_size, token_embedding=None,
                 activation="gelu", layer_norm_epsilon=1e-12,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self._activation_fn = get_activation(activation)
        if token_embedding is not None and (
                token_embedding.input_dim != vocabulary_size):
            raise TfpackError(
                "`token_embedding.input_dim` must equal `vocabulary_size`. "
                f"Received: token_embedding.input_dim={token_embedding.input_dim}"
                f", vocabulary_size={vocabulary_size}")
        self.vocabulary_size = vocabulary_size
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, sequence_output_shape, masked_lm_positions_shape=None):
        hidden = sequence_output_shape[-1]
        self.transform = keras.layers.Dense(
            hidden, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name="transform")
        self.transform.build((None, None, hidden))
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy,
            name="transform_norm")
        self.layer_norm.build((None, None, hidden))
        if self.token_embedding is None:
            self.output_kernel = self.add_weight(
                name="output_kernel", shape=(hidden, self.vocabulary_size),
                initializer=self.kernel_initializer)
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocabulary_size,),
            initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions):
        x = gather_positions(sequence_output, masked_lm_positions)
        x = self.layer_norm(self._activation_fn(self.transform(x)))
        if self.token_embedding is not None:
            kernel = ops.transpose(self.token_embedding.embeddings)
        else:
            kernel = self.output_kernel
        logits = ops.matmul(x, ops.cast(kernel, x.dtype))
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias,
                                                         "float32")
        return logits

    def compute_output_shape(self, sequence_output_shape,
                             masked_lm_positions_shape):
        return tuple(masked_lm_positions_shape) + (self.vocabulary_size,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocabulary_size": self.vocabulary_size,
            "token_embedding": (
                keras.layers.serialize(self.token_embedding)
                if self.token_embedding is not None else None),
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer),
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if config.get("token_embedding") is not None:
            config["token_embedding"] = keras.layers.deserialize(
                config["token_embedding"])
        return cls(**config)
