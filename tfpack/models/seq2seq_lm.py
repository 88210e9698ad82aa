"""Encoder-decoder language modelling on pair packs: a task on a seq2seq backbone."""

import keras
from keras import ops

from tfpack.errors import TfpackError
from tfpack.evaluation.metrics import Perplexity
from tfpack.layers.losses import AVERAGING
from tfpack.layers.losses import causal_lm_count
from tfpack.layers.losses import causal_lm_statistics
from tfpack.models.task import Task
from tfpack.params import Anything, Options, validate_params


def target_log_likelihood(logits, decoder_input_ids, decoder_sequence_ids, num_sequences):
    """Each pair's summed log-likelihood of its targets, `[B, K]` float32.

    The target of a decoder token is the next token of the same sequence
    (teacher forcing: the decoder reads its targets), so the score needs the
    inputs only.
    """
    log_probabilities = ops.log_softmax(ops.cast(logits[:, :-1], "float32"), axis=-1)
    following = ops.cast(decoder_input_ids[:, 1:], "int32")
    taken = ops.take_along_axis(log_probabilities, following[..., None], axis=-1)[..., 0]
    owner = ops.cast(decoder_sequence_ids, "int32")
    same = ops.logical_and(owner[:, 1:] == owner[:, :-1], owner[:, :-1] > 0)
    slots = ops.one_hot(owner[:, :-1] - 1, num_sequences, dtype="float32")  # 0 -> no slot
    return ops.einsum("bl,blk->bk", ops.where(same, taken, 0.0), slots)


@keras.saving.register_keras_serializable(package="tfpack")
class Seq2SeqLM(Task):
    """Sequence-to-sequence language modelling on an encoder-decoder backbone.

    The backbone reads pair packs (`tfpack.tasks.seq2seq`) and has a
    `logits(decoder_sequence_output)` head: the keras-hub encoder-decoders
    of `tfpack.models.from_keras_hub` (T5, BART, T5Gemma: their
    ``Seq2SeqLM``'s own head). `decoder_labels` are each decoder token's
    next token in the same pair (-100 at a target's end), weighted by
    `decoder_loss_weights` where given. The loss is the mean over every
    target of the batch (``lm_averaging="token"``, what keras-hub's
    ``Seq2SeqLM`` computes for a batch of unpacked pairs, its padding
    weighted 0) or over pairs of each pair's mean (``"sequence"``), with
    counts summed across gradient accumulation and replicas, so packed
    training is unpacked training.

    Example:

    >>> import keras_hub, numpy as np
    >>> from tfpack.builders import pack_pairs
    >>> from tfpack.models import from_keras_hub
    >>> backbone = keras_hub.models.BartBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> model = Seq2SeqLM(from_keras_hub(backbone))
    >>> packs = pack_pairs([([0, 5, 2], [2, 0, 7, 2]), ([0, 6, 2], [2, 0, 2])],
    ...                    max_encoder_length=8, max_decoder_length=8)
    >>> out = model({n: packs[n] for n in model.input_features})
    >>> out["logits"].shape, out["log_likelihood"].shape
    (TensorShape([1, 8, 30]), TensorShape([1, 2]))
    >>> {k: float(v) for k, v in model.target_counts(packs).items()}
    {'lm': 5.0}

    Args:
        backbone: an encoder-decoder backbone with `logits` and
            `vocabulary_size`.
        lm_averaging: `"token"` or `"sequence"` (see above).
        expected_counts: loss balancing, e.g. `{"lm": 40.0}` targets per pack.
        **kwargs: passed on to `keras.Model`.

    Call arguments:
        inputs: dict with the pair-pack features the backbone reads and
            `sequence_mask` ([K], for the per-pair scores).
        training: whether dropout is active.

    Returns:
        `{"logits": [B, Ld, vocabulary_size], "log_likelihood": [B, K]}`:
        next-token logits, and each pair's summed log-likelihood of its
        targets (0 in empty slots).
    """

    task = "seq2seq_lm"
    loss_terms = ("lm",)
    head_features = ("sequence_mask",)
    optional_features = ("decoder_loss_weights",)
    backbone_requires = ("vocabulary_size", "logits")

    @validate_params({
        "backbone": Anything("an encoder-decoder backbone, checked by Task"),
        "lm_averaging": Options(*AVERAGING),
        "expected_counts": Anything("None or {'lm': count}, checked by Task"),
    })
    def __init__(self, backbone, lm_averaging="token", expected_counts=None, **kwargs):
        super().__init__(backbone, expected_counts=expected_counts, **kwargs)
        self.lm_averaging = lm_averaging
        self.vocabulary_size = backbone.vocabulary_size
        self._perplexity = Perplexity() if lm_averaging == "token" else None

    def call(self, inputs, training=None):
        outputs = self.backbone(inputs, training=training)
        logits = ops.cast(self.backbone.logits(outputs["decoder_sequence_output"]), "float32")
        scores = target_log_likelihood(logits, inputs["decoder_input_ids"],
                                       inputs["decoder_sequence_ids"],
                                       inputs["sequence_mask"].shape[-1])
        return {"logits": logits, "log_likelihood": scores}

    def _loss_options(self, x):
        options = {"loss_weights": x.get("decoder_loss_weights"),
                   "averaging": self.lm_averaging}
        if self.lm_averaging == "sequence":
            options.update(sequence_ids=x["decoder_sequence_ids"],
                           num_sequences=x["sequence_mask"].shape[-1])
        return options

    def loss_statistics(self, x, y_pred):
        return causal_lm_statistics(y_pred["logits"], x["decoder_labels"], term="lm",
                                    **self._loss_options(x))

    def target_counts(self, x):
        return {"lm": causal_lm_count(x["decoder_labels"], **self._loss_options(x))}

    def update_task_metrics(self, x, y_pred, statistics):
        if self._perplexity is not None:
            self._perplexity.update_state(statistics["lm_loss_sum"], statistics["lm_count"])

    def get_config(self):
        config = super().get_config()
        config.update(lm_averaging=self.lm_averaging)
        return config
