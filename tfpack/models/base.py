"""Shared machinery of the packed models: inputs, losses, metrics, build."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.losses import global_sum
from tfpack.layers.losses import loss_from_statistics
from tfpack.layers.statistic_ratio import StatisticRatio
from tfpack.training import trained_lengths

# dtypes of the DESIGN.md features a model may read.
FEATURE_DTYPES = {
    "input_ids": "int32",
    "sequence_ids": "int32",
    "position_ids": "int32",
    "token_type_ids": "int32",
    "masked_lm_positions": "int32",
    "masked_lm_ids": "int32",
    "masked_lm_weights": "float32",
    "masked_lm_sequence_ids": "int32",
    "cls_positions": "int32",
    "sequence_mask": "float32",
    "next_sentence_labels": "int32",
    "labels": "int32",
}


class PackedModel(keras.Model):
    """Base of the tfpack models: one feature dict in, one output dict out.

    Subclasses set `loss_terms` (names `t` of the loss terms),
    `packed_outputs` (output name -> `"token"` for `[B, L, ...]` outputs,
    `"prediction"` for `[B, M, ...]`, `"sequence"` for `[B, K, ...]`; the
    `tfpack.testing` helpers use it to find each sequence's outputs) and
    `input_features`, and implement `call` and `loss_statistics`.

    The training contract: `loss_statistics(x, y_pred)` returns scalar
    float32 `{t}_loss_sum`, `{t}_count` and `{t}_correct` for every `t` in
    `loss_terms`; `compute_loss` is `sum_t loss_sum_t / max(count_t, 1)` with
    counts summed over `tf.distribute` replicas, or, with `expected_counts`
    (loss balancing, seed 000 appendix T.6), `loss_sum_t / (expected_counts[t]
    * packs)`. `fit` reports `{t}_accuracy` as exact ratios of summed counts.

    Args:
        expected_counts: optional dict `{t: expected number of items per
            pack}` that turns on loss balancing for those terms.
        **kwargs: passed on to `keras.Model`.

    Example:

    >>> from tfpack.models import CausalLM
    >>> model = CausalLM(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                  num_heads=2, intermediate_dim=16)
    >>> isinstance(model, PackedModel), model.loss_terms
    (True, ('lm',))
    """

    loss_terms = ()
    packed_outputs = {}
    input_features = ()

    def __init__(self, expected_counts=None, **kwargs):
        super().__init__(**kwargs)
        if expected_counts is not None:
            expected_counts = dict(expected_counts)
            for term, value in expected_counts.items():
                if term not in self.loss_terms or not float(value) > 0:
                    raise TfpackError(
                        "`expected_counts` must map loss terms "
                        f"{self.loss_terms} to positive numbers. "
                        f"Received: expected_counts={expected_counts}")
        self.expected_counts = expected_counts
        for term in self.loss_terms:
            setattr(self, f"_{term}_accuracy",
                    StatisticRatio(name=f"{term}_accuracy"))

    def build(self, inputs_shape):
        # Subclassed models are built by running `call` once on zeros of the
        # recorded feature shapes (batch 1): this is also how `.keras` loading
        # rebuilds them before it restores the weights.
        dummy = {}
        for name, shape in inputs_shape.items():
            if name in self.input_features:
                # Unknown sizes (`from_pretrained`): 2, so no axis is trivial.
                shape = [1] + [2 if d is None else d for d in list(shape)[1:]]
                dummy[name] = ops.zeros(shape, FEATURE_DTYPES.get(name,
                                                                  "int32"))
        self.call(dummy)
        if getattr(self, "_build_shapes_dict", None) is None:
            # Built by hand (e.g. `from_pretrained`): record the shapes so
            # that `.keras` files can rebuild the model.
            self._build_shapes_dict = {"inputs_shape": dict(inputs_shape)}
        self.built = True

    def loss_statistics(self, x, y_pred):
        """Per-term sums: see the class docstring."""
        raise NotImplementedError

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """Keras 3 `compute_loss`: labels are read from `x`, `y` is unused."""
        del y, sample_weight  # Labels and weights are features of `x`.
        if training:  # Keras `fit` traces its train step here: the shapes it trains at.
            trained_lengths.record(self, x)
        if y_pred is None:
            y_pred = self(x, training=training)
        statistics = dict(self.loss_statistics(x, y_pred))
        for term in self.loss_terms:
            key = f"{term}_count"
            statistics[key] = global_sum(statistics[key])
        num_packs = None
        if self.expected_counts:
            rows = ops.shape(x[self.input_features[0]])[0]
            num_packs = global_sum(ops.cast(rows, "float32"))
        loss = loss_from_statistics(statistics, self.loss_terms,
                                    self.expected_counts, num_packs)
        if self.losses:
            loss = loss + ops.cast(ops.sum(self.losses), "float32")
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        statistics = self.loss_statistics(x, y_pred)
        for term in self.loss_terms:
            getattr(self, f"_{term}_accuracy").update_state(
                statistics[f"{term}_correct"], statistics[f"{term}_count"])
        return self.get_metrics_result()

    def get_build_config(self):
        # The trained L/K/M travel in `.keras` files with the build shapes.
        config = super().get_build_config()
        lengths = trained_lengths.read(self)
        if config is not None and lengths:
            config = {**config, "tfpack_trained_lengths": lengths}
        return config

    def build_from_config(self, config):
        config = dict(config)
        lengths = config.pop("tfpack_trained_lengths", None)
        super().build_from_config(config)
        trained_lengths.restore(self, lengths)

    def get_config(self):
        config = super().get_config()
        config["expected_counts"] = self.expected_counts
        return config


class EncoderTask(PackedModel):
    """A `PackedModel` with heads on a `BertEncoder` passed as `encoder`.

    Serializes the encoder inside its config (as keras-hub tasks do with
    their backbone); the subclass's constructor rebuilds the heads on the
    deserialized encoder, so tied weights stay tied after loading.

    Example:

    >>> from tfpack.models import BertClassifier, BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = BertClassifier(encoder, num_classes=2)
    >>> clone = BertClassifier.from_config(model.get_config())
    >>> clone.encoder.num_layers, isinstance(clone, EncoderTask)
    (1, True)
    """

    def get_config(self):
        config = super().get_config()
        config["encoder"] = keras.saving.serialize_keras_object(self.encoder)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(
            config["encoder"])
        return cls(**config)
