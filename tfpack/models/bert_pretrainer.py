"""BERT pre-training (MLM + NSP) on packed batches."""

import keras
from keras import ops

from tfpack.layers.losses import MLM_AVERAGING
from tfpack.layers.losses import masked_lm_count
from tfpack.layers.losses import masked_lm_statistics
from tfpack.layers.losses import sequence_statistics
from tfpack.layers.masked_lm_head import PackedMaskedLMHead
from tfpack.layers.sequence_head import PackedSequenceHead
from tfpack.models.backbone import head_hint
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import Options, validate_params


@keras.saving.register_keras_serializable(package="tfpack")
class BertPretrainer(Task):
    """A backbone with the masked-LM and next-sentence heads.

    The backbone is a `BertEncoder` or any backbone with a
    `vocabulary_size` (`tfpack.models.backbone`). The MLM head reads
    `masked_lm_positions` and is tied to the backbone's `token_embedding`
    when it has one (else it has its own output kernel); the NSP head classifies the [CLS] token of each of the K
    sequences at `cls_positions`. `compute_loss` adds the MLM loss (averaged
    per token or per sequence) and the NSP loss over real sequences only, so
    `model.fit(dataset_of_feature_dicts)` trains it.

    Example:

    >>> import numpy as np
    >>> from tfpack.models import BertEncoder
    >>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
    ...                       num_heads=2, intermediate_dim=16)
    >>> model = BertPretrainer(encoder)
    >>> features = {
    ...     "input_ids": np.array([[2, 6, 3, 2, 8, 3]]),
    ...     "sequence_ids": np.array([[1, 1, 1, 2, 2, 2]]),
    ...     "position_ids": np.array([[0, 1, 2, 0, 1, 2]]),
    ...     "masked_lm_positions": np.array([[1, 4]]),
    ...     "masked_lm_ids": np.array([[7, 9]]),
    ...     "masked_lm_weights": np.array([[1.0, 1.0]]),
    ...     "masked_lm_sequence_ids": np.array([[1, 2]]),
    ...     "cls_positions": np.array([[0, 3]]),
    ...     "sequence_mask": np.array([[1.0, 1.0]]),
    ...     "next_sentence_labels": np.array([[0, 1]]),
    ... }
    >>> outputs = model(features)
    >>> outputs["mlm_logits"].shape, outputs["nsp_logits"].shape
    (TensorShape([1, 2, 50]), TensorShape([1, 2, 2]))
    >>> sorted(model.loss_statistics(features, outputs))[:3]
    ['mlm_correct', 'mlm_count', 'mlm_loss_sum']

    Args:
        backbone: a `BertEncoder` or another backbone with `vocabulary_size`.
        mlm_averaging: `"token"` (BERT: mean over all masked tokens of the
            batch) or `"sequence"` (mean per sequence, then over sequences).
        expected_counts: loss balancing, e.g. `{"mlm": 76, "nsp": 2}`
            expected items per pack (see `PackedModel`).
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict of DESIGN.md features (encoder features plus
            `masked_lm_positions`, `cls_positions`, `sequence_mask`).
        training: whether dropout is active.

    Returns:
        `{"mlm_logits": [B, M, V], "nsp_logits": [B, K, 2]}`, float32.
    """

    task = "pretraining"
    loss_terms = ("mlm", "nsp")
    head_features = ("masked_lm_positions", "cls_positions", "sequence_mask")
    backbone_requires = ("vocabulary_size",)

    @property
    def optional_features(self):
        # Per-token averaging does not need to know whose prediction it is.
        return ("masked_lm_sequence_ids",) if self.mlm_averaging == "token" else ()

    @validate_params({**TASK_PARAMETERS, "mlm_averaging": Options(*MLM_AVERAGING)})
    def __init__(self, backbone, mlm_averaging="token", expected_counts=None,
                 **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        self.mlm_averaging = mlm_averaging
        self.vocabulary_size = backbone.vocabulary_size
        initializer = keras.initializers.TruncatedNormal(
            stddev=head_hint(backbone, "initializer_range"))
        self.mlm_head = PackedMaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=getattr(backbone, "token_embedding", None),
            activation=head_hint(backbone, "activation"),
            layer_norm_epsilon=head_hint(backbone, "layer_norm_epsilon"),
            kernel_initializer=initializer, dtype=self.dtype_policy,
            name="mlm_head")
        self.nsp_head = PackedSequenceHead(
            2, kernel_initializer=initializer, dtype=self.dtype_policy,
            name="nsp_head")

    def call(self, inputs, training=None):
        sequence_output = self.sequence_output(inputs, training=training)
        return {
            "mlm_logits": self.mlm_head(sequence_output,
                                        inputs["masked_lm_positions"]),
            "nsp_logits": self.nsp_head(sequence_output,
                                        inputs["cls_positions"],
                                        inputs.get("sequence_mask"),
                                        training=training),
        }

    def loss_statistics(self, x, y_pred):
        statistics = masked_lm_statistics.__wrapped__(
            y_pred["mlm_logits"], x["masked_lm_ids"], x["masked_lm_weights"],
            x.get("masked_lm_sequence_ids"),
            num_sequences=y_pred["nsp_logits"].shape[1],
            averaging=self.mlm_averaging, term="mlm")
        statistics.update(sequence_statistics.__wrapped__(
            y_pred["nsp_logits"], x["next_sentence_labels"],
            x["sequence_mask"], term="nsp"))
        return statistics

    def target_counts(self, x):
        return {
            "mlm": masked_lm_count.__wrapped__(
                x["masked_lm_weights"], x.get("masked_lm_sequence_ids"),
                num_sequences=x["sequence_mask"].shape[-1],
                averaging=self.mlm_averaging),
            "nsp": ops.sum(ops.cast(x["sequence_mask"], "float32")),
        }

    def get_config(self):
        config = super().get_config()
        config["mlm_averaging"] = self.mlm_averaging
        return config
