"""Causal language modelling on packed sequences: a task on any decoder."""

import inspect

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.evaluation.metrics import Perplexity
from tfpack.layers.losses import AVERAGING
from tfpack.layers.losses import causal_lm_count
from tfpack.layers.losses import causal_lm_statistics
from tfpack.models.backbone import head_hint
from tfpack.models.decoder import DecoderBackbone
from tfpack.models.task import TASK_PARAMETERS, Task
from tfpack.params import Boolean, Options, validate_params

_BACKBONE_ARGUMENTS = tuple(
    name for name in inspect.signature(DecoderBackbone.__init__).parameters
    if name not in ("self", "kwargs"))


@keras.saving.register_keras_serializable(package="tfpack")
class CausalLM(Task):
    """Next-token prediction on a decoder backbone, sequence by sequence.

    The backbone is a `DecoderBackbone` or any causal backbone with a
    `vocabulary_size` (`tfpack.models.backbone`). `labels` are next-token
    targets with -100 (`tfpack.features.IGNORE_LABEL`) on padding and on the
    last token of every sequence, so no target crosses a sequence boundary.
    Optional `loss_weights` [B, L] weigh each target: supervised fine-tuning
    gives prompt targets 0.0 so that only responses are trained
    (`tfpack.builders.sft_examples`).

    For backward compatibility, the `DecoderBackbone` arguments may be given
    instead of a backbone: `CausalLM(vocabulary_size=..., num_layers=...)`
    is `CausalLM(DecoderBackbone(vocabulary_size=..., num_layers=...))`.

    Example:

    >>> import numpy as np
    >>> from tfpack.models import DecoderBackbone
    >>> backbone = DecoderBackbone(vocabulary_size=40, num_layers=1,
    ...                            hidden_dim=8, num_heads=2,
    ...                            intermediate_dim=16)
    >>> model = CausalLM(backbone)
    >>> features = {
    ...     "input_ids": np.array([[5, 6, 7, 8, 9, 0]]),
    ...     "sequence_ids": np.array([[1, 1, 2, 2, 2, 0]]),
    ...     "position_ids": np.array([[0, 1, 0, 1, 2, 0]]),
    ...     "labels": np.array([[6, -100, 8, 9, -100, -100]]),
    ... }
    >>> model(features)["logits"].shape
    TensorShape([1, 6, 40])
    >>> {k: float(v) for k, v in model.target_counts(features).items()}
    {'lm': 3.0}

    Args:
        backbone: a `DecoderBackbone` or another causal backbone with
            `vocabulary_size`; `None` builds a `DecoderBackbone` from
            `**kwargs`.
        lm_averaging: `"token"`: the loss is the weighted mean over every
            target of the batch; `"sequence"`: the mean over sequences of each
            sequence's weighted mean (every sequence weighs the same, however
            long its response). Both divide by global counts, so they stay
            exact across gradient accumulation and replicas.
        tie_embeddings: the output projection is the transposed
            `backbone.token_embedding` (keras-hub's `ReversibleEmbedding`
            with untied weights uses its reverse kernel), or the backbone's
            own `logits(sequence_output)` where it has one (the keras-hub
            decoders of `from_keras_hub`: tied or not, with Gemma's final
            soft cap); `False` gives the task its own `output_projection`.
        expected_counts: loss balancing, e.g. `{"lm": 480.0}` targets per pack.
        **kwargs: `DecoderBackbone` arguments when `backbone` is `None`; the
            rest is passed on to `keras.Model`.

    Call arguments:
        inputs: dict with the backbone's features (`input_ids`,
            `sequence_ids`, `position_ids`).
        training: whether dropout is active.

    Returns:
        `{"logits": [B, L, vocabulary_size]}`, float32.
    """

    task = "causal_lm"
    loss_terms = ("lm",)
    optional_features = ("loss_weights",)
    backbone_requires = ("vocabulary_size",)

    @validate_params({**TASK_PARAMETERS, "backbone": [None, TASK_PARAMETERS["backbone"]],
                      "tie_embeddings": Boolean(), "lm_averaging": Options(*AVERAGING)})
    def __init__(self, backbone=None, tie_embeddings=True, lm_averaging="token",
                 expected_counts=None, **kwargs):
        if backbone is None:
            arguments = {k: kwargs.pop(k) for k in _BACKBONE_ARGUMENTS if k in kwargs}
            if "dtype" in kwargs:
                arguments["dtype"] = kwargs["dtype"]
            backbone = DecoderBackbone(**arguments)
        elif isinstance(backbone, (int, float)):
            raise TfpackError(
                "`backbone` must be a backbone; pass `DecoderBackbone` arguments as "
                f"keywords. Received: backbone={backbone!r}")
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        if tie_embeddings and getattr(backbone, "token_embedding", None) is None:
            raise TfpackError(
                "`tie_embeddings=True` needs a backbone with a `token_embedding`. "
                f"Received: backbone of type {type(backbone).__name__} without one")
        self.tie_embeddings = tie_embeddings
        self.lm_averaging = lm_averaging
        self.vocabulary_size = backbone.vocabulary_size
        # Perplexity is exp(mean NLL per target): defined for token averaging.
        self._perplexity = Perplexity() if lm_averaging == "token" else None
        self.output_projection = (
            None if tie_embeddings else keras.layers.Dense(
                backbone.vocabulary_size,
                kernel_initializer=keras.initializers.TruncatedNormal(
                    stddev=head_hint(backbone, "initializer_range")),
                dtype=self.dtype_policy, name="output_projection"))

    def call(self, inputs, training=None):
        x = self.sequence_output(inputs, training=training)
        if self.output_projection is not None:
            logits = self.output_projection(x)
        elif hasattr(self.backbone, "logits"):
            # The backbone's own output layer (keras-hub adapters: tied or
            # untied, with Gemma's final logit soft cap).
            logits = self.backbone.logits(x)
        else:
            logits = ops.matmul(x, ops.cast(_output_kernel(
                self.backbone.token_embedding), x.dtype))
        return {"logits": ops.cast(logits, "float32")}

    def _loss_options(self, x):
        options = {"loss_weights": x.get("loss_weights"),
                   "averaging": self.lm_averaging}
        if self.lm_averaging == "sequence":
            # K from the pack's sequence slots (L is an upper bound).
            slots = x["sequence_mask"] if "sequence_mask" in x else x["sequence_ids"]
            options.update(sequence_ids=x["sequence_ids"],
                           num_sequences=slots.shape[-1])
        return options

    def loss_statistics(self, x, y_pred):
        return causal_lm_statistics.__wrapped__(y_pred["logits"], x["labels"], term="lm",
                                                **self._loss_options(x))

    def target_counts(self, x):
        return {"lm": causal_lm_count.__wrapped__(x["labels"], **self._loss_options(x))}

    def update_task_metrics(self, x, y_pred, statistics):
        if self._perplexity is not None:
            self._perplexity.update_state(statistics["lm_loss_sum"], statistics["lm_count"])

    def get_config(self):
        config = super().get_config()
        config.update(tie_embeddings=self.tie_embeddings,
                      lm_averaging=self.lm_averaging)
        return config


def _output_kernel(embedding):
    """``[hidden, vocabulary]`` kernel of an output layer tied to ``embedding``."""
    if getattr(embedding, "tie_weights", True) is False:
        # keras-hub's ReversibleEmbedding(tie_weights=False): its own kernel.
        return embedding.reverse_embeddings
    return ops.transpose(embedding.embeddings)
