"""Tasks: heads and a loss on any backbone.

A task wraps a backbone (`tfpack.models.backbone`: packed features ->
`sequence_output`) and owns everything about its training objective: the
heads, the loss statistics, the number of targets per loss term, and the
contract features (`tfpack.features`) its heads and loss read. The trainer,
the shape validation and the export read these from the task; nothing
outside a task knows what a loss term means.

What a task exposes:

- ``task``: its name in the feature contract (``"pretraining"``,
  ``"classification"``, ``"causal_lm"``); ``label_features`` are the contract's
  labels of that task, ``input_features`` the backbone's inputs plus
  ``head_features``; ``required_features`` those of both a dataset must carry
  (validated when training starts).
- ``loss_terms`` and ``loss_statistics(x, y_pred)``: scalar float32
  ``{t}_loss_sum``, ``{t}_count`` and ``{t}_correct`` for every term ``t``.
- ``target_counts(x)``: ``{t: count}`` from the features alone (no forward
  pass), equal to the ``{t}_count`` of ``loss_statistics``; the trainer
  all-reduces them before computing gradients.
- ``packed_outputs``: where each output lives (``"token"``, ``"prediction"``,
  ``"sequence"``), read from the task's declaration (`tfpack.tasks`), for
  `tfpack.predict`, `tfpack.testing` and the export.

``compute_loss`` is ``sum_t loss_sum_t / max(count_t, 1)`` with counts summed
over `tf.distribute` replicas, or, with ``expected_counts`` (loss balancing,
seed 000 appendix T.6), ``loss_sum_t / (expected_counts[t] * packs)``; ``fit``
reports ``{t}_accuracy`` as exact ratios of summed counts, and ``loss`` through
`tfpack.layers.StepLoss`, so that under `tf.distribute` it is the loss of the
whole step (one device's number), however the packs are split over replicas.

Example:

>>> from tfpack.models import CausalLM, DecoderBackbone, Task
>>> backbone = DecoderBackbone(vocabulary_size=20, num_layers=1,
...                            hidden_dim=8, num_heads=2, intermediate_dim=16)
>>> model = CausalLM(backbone)
>>> isinstance(model, Task), model.loss_terms, model.label_features
(True, ('lm',), ('labels', 'loss_weights'))
"""

import keras
from keras import ops

from tfpack import features as contract
from tfpack.errors import TfpackError
from tfpack.layers.losses import global_sum
from tfpack.layers.losses import loss_from_statistics
from tfpack.layers.losses import num_replicas
from tfpack.layers.statistic_ratio import StatisticRatio
from tfpack.layers.step_loss import EvaluationLoss, StepLoss
from tfpack.models.backbone import backbone_input_features
from tfpack.models.backbone import build_by_calling
from tfpack.models.backbone import check_backbone
from tfpack.models.batch_checks import checked_loss, graph_checked, host_checked, refusing
from tfpack.models.limits import input_limits
from tfpack.params import Anything, InstanceOf, validate_params
from tfpack.training import trained_lengths

# The arguments every task declares (`tfpack.params`); `expected_counts`'s terms and
# values are checked against the task's loss terms in `Task.__init__`.
TASK_PARAMETERS = {
    "backbone": Anything("a backbone, checked by check_backbone"),
    "expected_counts": [None, InstanceOf(dict, description="a dict of loss term -> count")],
}


class Task(keras.Model):
    """Base of the tfpack tasks (see the module docstring).

    Subclasses set ``task`` (a registered declaration, `tfpack.tasks`),
    ``loss_terms``, ``head_features``, ``optional_features`` (contract features they read
    only when present) and ``backbone_requires`` (protocol attributes their
    heads need beyond ``hidden_dim``), and implement ``call``,
    ``loss_statistics`` and ``target_counts``.

    Args:
        backbone: any object following the backbone protocol; serialized
            inside the task's config (as keras-hub tasks do), so tied weights
            stay tied after loading.
        expected_counts: optional dict `{t: expected number of items per
            pack}` that turns on loss balancing for those terms.
        **kwargs: passed on to `keras.Model`.
    """

    task = None
    loss_terms = ()
    head_features = ()
    optional_features = ()
    backbone_requires = ()

    @validate_params(TASK_PARAMETERS)
    def __init__(self, backbone, expected_counts=None, **kwargs):
        super().__init__(**kwargs)
        check_backbone(backbone, self.backbone_requires, type(self).__name__)
        contract.check_names(self.head_features + backbone_input_features(backbone),
                             f"{type(self).__name__}'s input features")
        if expected_counts is not None:
            expected_counts = dict(expected_counts)
            for term, value in expected_counts.items():
                if term not in self.loss_terms or not float(value) > 0:
                    raise TfpackError(
                        "`expected_counts` must map loss terms "
                        f"{self.loss_terms} to positive numbers. "
                        f"Received: expected_counts={expected_counts}")
        self.backbone = backbone
        self.expected_counts = expected_counts
        for term in self.loss_terms:
            setattr(self, f"_{term}_accuracy",
                    StatisticRatio(name=f"{term}_accuracy"))

    @property
    def packed_outputs(self):
        """Output name -> packing, from the task's declaration (`tfpack.tasks`)."""
        return contract.outputs(self.task)

    @property
    def input_features(self):
        """The contract features the forward pass reads (backbone + heads)."""
        names = backbone_input_features(self.backbone) + tuple(self.head_features)
        return tuple(dict.fromkeys(names))

    @property
    def label_features(self):
        """The contract features the loss reads (labels of ``task``)."""
        return contract.label_features(self.task)

    @property
    def required_features(self):
        """Input and label features a dataset must carry to train the task."""
        optional = set(self.optional_features) | set(
            getattr(self.backbone, "optional_features", ()))
        return tuple(n for n in self.input_features + self.label_features
                     if n not in optional)

    @property
    def position_table_rows(self):
        """Rows of the learned position table ``position_ids`` are read in, or `None`
        (rotary positions: no table). Keras `fit`, `evaluate` and `predict` refuse a
        position past it (`tfpack.training.validation.position_checks`)."""
        return input_limits(self).get("position_ids")

    @property
    def encoder(self):
        """The backbone (the name before tasks took any backbone)."""
        return self.backbone

    def build(self, inputs_shape):
        build_by_calling(self, inputs_shape)

    def sequence_output(self, inputs, training=None):
        """The backbone's ``sequence_output`` on ``inputs``."""
        return self.backbone(inputs, training=training)["sequence_output"]

    def loss_statistics(self, x, y_pred):
        """Per-term sums and counts: see the module docstring."""
        raise NotImplementedError

    def target_counts(self, x):
        """Per-term target counts from the features: see the module docstring."""
        raise NotImplementedError

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """Keras 3 `compute_loss`: labels are read from `x`, `y` is unused."""
        del y, sample_weight  # Labels and weights are features of `x`.
        if training:  # Keras `fit` traces its train step here: the shapes it trains at.
            trained_lengths.record(self, x)
        tracker = getattr(self, "_loss_tracker", None)
        if isinstance(tracker, EvaluationLoss):  # Read by `compute_metrics`, same trace.
            tracker.evaluating = not training
        if y_pred is None:
            y_pred = self(x, training=training)
        statistics = dict(self.loss_statistics(x, y_pred))
        for term in self.loss_terms:
            key = f"{term}_count"
            statistics[key] = global_sum.__wrapped__(statistics[key])
        num_packs = None
        if self.expected_counts:
            rows = ops.shape(x[self.input_features[0]])[0]
            num_packs = global_sum.__wrapped__(ops.cast(rows, "float32"))
        # The declared loss functions unchecked (`.__wrapped__`): no check per step.
        loss = loss_from_statistics.__wrapped__(statistics, self.loss_terms,
                                                self.expected_counts, num_packs)
        if self.losses:
            # Each replica adds its 1 / R of the regularization, as Keras does:
            # the optimizer sums the replicas' gradients.
            loss = loss + ops.cast(ops.sum(self.losses), "float32") / num_replicas()
        return checked_loss(self, x, loss)

    # Keras `fit`, `evaluate` and `predict` check each batch before its step
    # (`tfpack.models.batch_checks`): on the host on JAX, in the step's graph on TensorFlow.
    def _checked_function(self, function, kind):
        backend = keras.backend.backend()
        if backend == "jax":
            return host_checked(self, function, kind)
        if backend != "tensorflow":
            return function
        if not hasattr(keras.Model, "_autoconvert_optionals"):
            raise TfpackError(
                "Keras's TensorFlow trainer must pass each step through "
                "`_autoconvert_optionals`, where tfpack checks the batch outside XLA. "
                f"Received: keras=={keras.__version__}, which has no such method")
        return refusing(function)

    def _autoconvert_optionals(self, step_func):
        # Keras's TensorFlow trainer passes its one-batch step (compiled with XLA under
        # `jit_compile=True`) through here; the checks run around it, in the graph.
        return graph_checked(self, super()._autoconvert_optionals(step_func))

    def fit(self, x=None, y=None, *args, **kwargs):
        self._build_before_tracing(x)
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        self._build_before_tracing(x)
        return super().evaluate(x, y, *args, **kwargs)

    def _build_before_tracing(self, x):
        """Builds the model, its compiled metrics and its optimizer from the element
        spec of a `tf.data.Dataset` ``x``, before Keras's TensorFlow trainer traces
        its step.

        Without a `tf.distribute` strategy that trainer builds them inside the
        step's first trace, and a `tf.function` that made variables on its first
        call traces itself again: every ``fit`` paid for its step (and, under
        ``jit_compile=True``, its XLA compilation) twice. Under a strategy, or with
        other inputs, Keras builds them as it always does.
        """
        if (keras.backend.backend() != "tensorflow" or not self.compiled
                or not hasattr(x, "element_spec")
                or getattr(self, "_distribute_strategy", None) is not None):
            return
        self._symbolic_build(data_batch=x.element_spec)

    def make_train_function(self, force=False):
        made = super().make_train_function(force)
        self.train_function = self._checked_function(self.train_function, "train")
        return made

    def make_test_function(self, force=False):
        made = super().make_test_function(force)
        self.test_function = self._checked_function(self.test_function, "test")
        return made

    def make_predict_function(self, force=False):
        super().make_predict_function(force)
        self.predict_function = self._checked_function(self.predict_function, "predict")
        return self.predict_function

    def compile(self, *args, **kwargs):
        super().compile(*args, **kwargs)
        # Keras's tracker re-weights replica losses as per-replica means: ours
        # are shares of a global loss (see `StepLoss`). Set past Keras's
        # attribute tracking, as `Trainer.compile` sets its own (it lists the
        # tracker in `metrics` itself): tracking would refuse a new metric on
        # a model that is already built.
        # `evaluate` reports the loss per target (per pair), not per batch of packs.
        object.__setattr__(self, "_loss_tracker", EvaluationLoss(self.loss_terms, name="loss"))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        statistics = self.loss_statistics(x, y_pred)
        for term in self.loss_terms:
            getattr(self, f"_{term}_accuracy").update_state(
                statistics[f"{term}_correct"], statistics[f"{term}_count"])
        self.update_task_metrics(x, y_pred, statistics)
        tracker = getattr(self, "_loss_tracker", None)
        if isinstance(tracker, EvaluationLoss) and tracker.evaluating:
            tracker.add_statistics(statistics, ops.shape(x[self.input_features[0]])[0],
                                   regularized=bool(self.losses))
        return self.get_metrics_result()

    @property
    def task_metrics(self):
        """The task's own metrics (beyond ``{t}_accuracy``), in attribute order."""
        return [value for value in vars(self).values()
                if isinstance(value, keras.metrics.Metric)
                and not type(value) is StatisticRatio and not isinstance(value, StepLoss)]

    def update_task_metrics(self, x, y_pred, statistics):
        """Update a task's own metrics (macro F1, entity F1, perplexity).

        Called by ``compute_metrics`` with the batch's features, outputs and
        `loss_statistics`; metrics must accumulate per-example counts so that
        packed evaluation equals unpacked evaluation (`tfpack.evaluation`).
        """
        del x, y_pred, statistics

    def get_build_config(self):
        # The trained L/K/M (export reads them) travel in `.keras` files.
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
        config["backbone"] = keras.saving.serialize_keras_object(self.backbone)
        config["expected_counts"] = self.expected_counts
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "backbone" not in config:
            raise TfpackError(
                f"This {cls.__name__} was saved before tfpack split models into "
                "backbones and tasks; convert the file once with "
                "`tfpack.models.upgrade_keras_file(old_path, new_path)` and load the "
                f"new file. Received: a {cls.__name__} config without `backbone` "
                f"(keys {sorted(config)})")
        config["backbone"] = keras.saving.deserialize_keras_object(
            config["backbone"])
        return cls(**config)
