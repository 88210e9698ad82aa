"""The distribution-strategy training loop for packed data.

`Trainer` runs one optimizer update as small overridable steps (as Orbit):

1. ``count_targets``: each replica counts the loss targets (masked tokens,
   sequences, ...) of all ``accumulation_steps`` micro-batches of the update;
   one all-reduce turns them into the GLOBAL counts.
2. ``compute_gradients`` (XLA, ``jit_compile=True``, fixed shapes, inside ``strategy.run``):
   forward, ``model.loss_statistics``, loss = per-term local loss sums over the global
   counts, backward; gradients are summed over the micro-batches on the replica (graph
   loops: `accumulation`). The update around them is traced without AutoGraph (cheaper to
   trace); the model's own code keeps it.
3. ``apply_gradients``: the optimizer all-reduces (sums) the gradients over
   replicas and updates the weights (with loss scaling under mixed precision).

The loss statistics are summed on the device and read back only every
``log_every`` steps (one host sync), logged as JSON lines. Checkpoints hold
model, optimizer, the data iterator's position, the random state (dropout's
seed generators) and the step, so a resumed run continues the same stream with
nothing lost or repeated and reaches the weights of an uninterrupted one. On
resume, the learning rate is the one passed in (not the checkpoint's), and log
lines past the restored step are dropped before new ones are appended. A finite
dataset that runs out ends training after the last whole update
(``TrainResult.data_exhausted``; the step counter counts updates applied).

Data layout: ``fit`` takes an *unbatched* dataset of packed examples (the
DESIGN.md features) and batches it itself so that every update sees the same
packs whatever the number of replicas or workers: update ``s`` takes packs
``[s * P, (s + 1) * P)`` of the stream, where ``P = micro_batch_size *
num_replicas * accumulation_steps``. A one-device run with ``micro_batch_size
* num_replicas`` packs per micro-batch therefore reaches the same weights.

Example:

>>> import tensorflow as tf
>>> from tfpack.training import Trainer, Lamb
>>> strategy = tf.distribute.get_strategy()
>>> with strategy.scope():  # doctest: +SKIP
...     model = tfpack.models.BertPretrainer(...)
...     trainer = Trainer(model, Lamb(1e-3), micro_batch_size=8, strategy=strategy,
...                       checkpoint_dir="runs/bert", log_path="runs/bert/log.jsonl")
>>> result = trainer.fit(packed_examples, num_steps=1000)  # doctest: +SKIP
>>> result.history[-1]["mlm_loss"]  # doctest: +SKIP
"""

from __future__ import annotations

import math
import time

import keras

from tfpack import _tensorflow
from tfpack.errors import TfpackError
from tfpack.packing.workers import PackSplit, split_packs
from tfpack.params import (Anything, Boolean, InstanceOf, Integer, OutputPath,
                           validate_params)
from tfpack.training import accumulation, hosts, inputs
from tfpack.training.checkpoint import Checkpointer, agreed_step, learning_rate_variable
from tfpack.training.checkpoint import random_state
from tfpack.training.exactness import check_before_training
from tfpack.training import trained_lengths
from tfpack.training.logging import JsonLinesLogger, ProgressBar, truncate_log
from tfpack.training.results import NonFiniteLossError, TrainResult, loss_record
from tfpack.training.validation import target_counts, validate_element_spec

tf = _tensorflow.require("tfpack.training.Trainer")

__all__ = ["Trainer", "TrainResult", "NonFiniteLossError"]


def _uses_loss_scaling(model) -> bool:
    return model.dtype_policy.compute_dtype == "float16"


class Trainer:
    """Train a tfpack model on packed batches under any `tf.distribute` strategy.

    Create the model (and the optimizer, if you pass an instance) inside
    ``strategy.scope()``, or pass zero-argument callables that build them; the
    trainer calls them inside the scope.

    Args:
        model: a Keras model following the tfpack model contract
            (``loss_terms``, ``loss_statistics``), or a callable returning one.
        optimizer: a Keras optimizer (e.g. `tfpack.training.Lamb`) or a
            callable returning one. Wrapped in `keras.optimizers.LossScaleOptimizer`
            when the model computes in float16.
        micro_batch_size: packs per replica per forward/backward pass.
        accumulation_steps: micro-batches per optimizer update (int32 loop counters).
        strategy: a `tf.distribute.Strategy` (default: the current one).
        jit_compile: compile the per-replica forward/backward with XLA.
        checkpoint_dir: where checkpoints go; an existing one is resumed.
        checkpoint_every: updates between checkpoints (and one at the end).
        log_path: JSON-lines log file (chief only), or `None`.
        log_every: updates between host syncs, log lines and NaN checks.
        progress: show a progress bar.
        max_to_keep: checkpoints kept.
        eval_dataset: optional UNBATCHED packed examples evaluated every
            ``eval_every`` updates (and at the end) with `evaluate`; the
            results join that step's log record as ``eval_*`` keys.
        eval_every: updates between evaluations (required with ``eval_dataset``).
        eval_batch_size: packs per evaluation batch (default
            ``micro_batch_size * num_replicas``).
        check_exact: before the first update, refuse a model that does not
            compute each packed sequence as it would alone
            (`tfpack.training.exactness`; one probe pack, seconds).
    """

    @validate_params({
        "model": Anything("a tfpack model or a callable returning one: the contract is checked"),
        "optimizer": Anything("a Keras optimizer or a callable returning one"),
        "micro_batch_size": Integer(1), "accumulation_steps": Integer(1, 2**31 - 1),
        "strategy": [None, InstanceOf(tf.distribute.Strategy)], "jit_compile": Boolean(),
        "checkpoint_dir": [None, OutputPath("directory")],
        "checkpoint_every": [None, Integer(1)], "log_path": [None, OutputPath("file")],
        "log_every": Integer(1), "progress": Boolean(), "max_to_keep": Integer(1),
        "eval_dataset": [None, InstanceOf(tf.data.Dataset)], "eval_every": [None, Integer(1)],
        "eval_batch_size": [None, Integer(1)], "check_exact": Boolean(),
    })
    def __init__(self, model, optimizer, *, micro_batch_size: int,
                 accumulation_steps: int = 1, strategy: tf.distribute.Strategy | None = None,
                 jit_compile: bool = True, checkpoint_dir: str | None = None,
                 checkpoint_every: int | None = None, log_path=None, log_every: int = 10,
                 progress: bool = True, max_to_keep: int = 3,
                 eval_dataset: tf.data.Dataset | None = None, eval_every: int | None = None,
                 eval_batch_size: int | None = None, check_exact: bool = True):
        if eval_dataset is not None and eval_every is None:
            raise TfpackError("`eval_every` must be a positive integer when `eval_dataset` "
                              f"is given. Received: eval_every={eval_every!r}")
        self.strategy = strategy or tf.distribute.get_strategy()
        with self.strategy.scope():
            self.model = model() if callable(model) and not isinstance(model, keras.Model) else model
            optimizer = optimizer() if callable(optimizer) and not isinstance(
                optimizer, keras.optimizers.Optimizer) else optimizer
            if _uses_loss_scaling(self.model) and not isinstance(
                    optimizer, keras.optimizers.LossScaleOptimizer):
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
        for attribute in ("loss_terms", "loss_statistics"):
            if not hasattr(self.model, attribute):
                raise TfpackError(
                    "The model must follow the tfpack model contract (`loss_terms`, "
                    f"`loss_statistics`). Received: model without `{attribute}`")
        self.micro_batch_size = micro_batch_size
        self.accumulation_steps = accumulation_steps
        self.jit_compile = jit_compile
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.log_every = log_every
        self.progress = progress
        self.max_to_keep = max_to_keep
        self.log_path = log_path
        self.check_exact = check_exact
        self.exactness = None  # The check's `ExactnessResult`, once `fit` ran it.
        self.terms = tuple(self.model.loss_terms)
        self.loss_scaling = isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer)
        # Host-side state: plain variables on the host, read once per log interval.
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self._first_bad_step = tf.Variable(-1, dtype=tf.int64, trainable=False)
        self._exhausted = tf.Variable(False, trainable=False)
        self._sums = {k: tf.Variable(0.0, dtype=tf.float64, trainable=False)
                      for k in self._statistic_names()}
        self.eval_dataset = eval_dataset
        self.eval_every = eval_every if eval_dataset is not None else None
        self.eval_batch_size = eval_batch_size
        self._compiled = {}
        self._eval_step = None
        self._loop = tf.function(self._train_loop, autograph=False)
        self._iterator = None
        self._dataset = None
        self._output = None
        self._element_spec = None

    # ----------------------------------------------------------------- steps
    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def packs_per_update(self) -> int:
        return self.micro_batch_size * self.num_replicas * self.accumulation_steps

    def _statistic_names(self):
        names = ["real_tokens", "sequences"]
        for t in self.terms:
            names += [f"{t}_loss_sum", f"{t}_count", f"{t}_correct", f"{t}_targets"]
        return names

    def count_targets(self, batches):
        """Per replica: targets of each loss term (and real tokens) in ``batches``
        (features stacked ``[accumulation_steps, micro_batch_size, ...]``)."""
        count = tf.autograph.to_graph(target_counts)  # the model's code keeps AutoGraph
        return accumulation.sum_micro_batches(lambda x: count(self.model, x), batches,
                                              self.accumulation_steps)

    def _zeros(self):
        return ([tf.zeros_like(v) for v in self.model.trainable_variables],
                {k: tf.zeros([], tf.float32) for k in self._statistic_names()
                 if k not in ("real_tokens", "sequences") and not k.endswith("_targets")})

    def compute_gradients(self, x, denominators, gradients, statistics):
        """Per replica (XLA): add this micro-batch's gradients and statistics."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            y_pred = self.model(x, training=True)
            stats = self.model.loss_statistics(x, y_pred)
            # Each replica divides its LOCAL loss sum by the GLOBAL number of
            # targets (all replicas, all micro-batches of the update). The
            # optimizer SUMs gradients over replicas and we sum over
            # micro-batches, so the update follows the gradient of the mean
            # loss over every target, as one device with the whole batch would.
            # Local means (or dividing by the replica count, as `fit` does)
            # would weight a target in a sparsely filled pack more than one in
            # a dense pack: packs carry different numbers of targets.
            loss = tf.add_n([tf.cast(stats[f"{t}_loss_sum"], tf.float32) / denominators[t]
                             for t in self.terms])
            if self.model.losses:  # Regularizers: counted once per update overall.
                loss += tf.add_n(self.model.losses) / float(
                    self.num_replicas * self.accumulation_steps)
            scaled = self.optimizer.scale_loss(loss) if self.loss_scaling else loss
        grads = tape.gradient(scaled, variables)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        grads = [a + g for a, g in zip(gradients, grads)]
        stats = {k: statistics[k] + tf.cast(stats[k], tf.float32) for k in statistics}
        return grads, stats

    def accumulate_gradients(self, batches, denominators):
        """Per replica: `compute_gradients` of each micro-batch of ``batches``, summed."""
        # One compiled function per replica: a `tf.function` does not key its
        # trace cache on captured variables, so a single one shared by the
        # replicas would run replica 0's trace (and variables) on every device
        # ("Trying to access resource ... located in device CPU:1 from device
        # CPU:0"; `fit(jit_compile=True)` under Mirrored fails the same way).
        context = tf.distribute.get_replica_context()
        replica = int(tf.get_static_value(context.replica_id_in_sync_group)) if context else 0
        if replica not in self._compiled:
            self._compiled[replica] = tf.function(
                self.compute_gradients, jit_compile=self.jit_compile, reduce_retracing=True)
        step = self._compiled[replica]
        # Zeros first, so the compiled step has one signature (one XLA compile).
        return accumulation.fold_micro_batches(
            lambda x, state: step(x, denominators, *state), batches, self._zeros(),
            self.accumulation_steps)

    def apply_gradients(self, gradients):
        """Per replica: the optimizer all-reduces (sums) and applies the gradients."""
        if self.loss_scaling:
            # Every replica must agree on skipping an overflowing step; the
            # loss-scale optimizer only looks at the first replica's gradients.
            overflow = 1.0 - tf.cast(tf.reduce_all(
                [tf.reduce_all(tf.math.is_finite(g)) for g in gradients]), tf.float32)
            overflow = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, overflow)
            gradients = [tf.where(overflow > 0, tf.fill(tf.shape(g), float("nan")), g)
                         for g in gradients]
        self.optimizer.apply(gradients, self.model.trainable_variables)

    def train_step(self, iterator):
        """One optimizer update (cross-replica context, inside `tf.function`); its graph
        does not grow with ``accumulation_steps`` (`tfpack.training.accumulation`). A
        stream that ends within an update ends training; that update is not applied."""
        complete, arrays = accumulation.read_micro_batches(
            self.strategy, iterator, self.accumulation_steps,
            accumulation.micro_batch_spec(self._element_spec, self.micro_batch_size))
        self._exhausted.assign(tf.logical_not(complete))  # it stays so: `_train_loop` ends
        tf.cond(complete, lambda: self.update(accumulation.stacked_micro_batches(
            self.strategy, arrays)), lambda: None)

    def update(self, batches):
        """One optimizer update on distributed micro-batches ``batches``
        (per replica, features stacked ``[accumulation_steps, micro_batch_size, ...]``)."""
        counts = self._sum_over_replicas(self.strategy.run(self.count_targets, args=(batches,)))
        expected = getattr(self.model, "expected_counts", None) or {}
        # Loss balancing (seed 000, appendix T.6): a fixed expected count per
        # pack replaces the observed one for the terms that ask for it.
        denominators = {t: (tf.constant(expected[t] * self.packs_per_update, tf.float32)
                            if t in expected else tf.maximum(counts[t], 1.0))
                        for t in self.terms}
        grads, stats = self.strategy.run(self.accumulate_gradients,
                                         args=(batches, denominators))
        self.strategy.run(self.apply_gradients, args=(grads,))
        stats = self._sum_over_replicas(stats)
        for k in ("real_tokens", "sequences"):
            stats[k] = counts[k]
        for t in self.terms:
            stats[f"{t}_targets"] = counts[t]
        self.step.assign_add(1)
        loss = tf.add_n([stats[f"{t}_loss_sum"] / tf.maximum(stats[f"{t}_count"], 1.0)
                         for t in self.terms])
        bad = tf.logical_and(tf.logical_not(tf.math.is_finite(loss)), self._first_bad_step < 0)
        self._first_bad_step.assign(tf.where(bad, self.step, self._first_bad_step))
        for k, v in self._sums.items():
            v.assign_add(tf.cast(stats[k], tf.float64))

    def _sum_over_replicas(self, values: dict) -> dict:
        # One all-reduce of a stacked vector: fewer collectives, and
        # MultiWorkerMirroredStrategy cannot reduce nested structures.
        keys = sorted(values)
        stacked = self.strategy.run(lambda d: tf.stack([d[k] for k in keys]), args=(values,))
        total = self.strategy.reduce(tf.distribute.ReduceOp.SUM, stacked, axis=None)
        return {k: total[i] for i, k in enumerate(keys)}

    def _train_loop(self, iterator, num_steps):
        # Up to `num_steps` updates in one graph (one host sync per call);
        # stops early once a non-finite loss was seen.
        def body(i):
            self.train_step(iterator)
            return (i + 1,)

        def keep_going(i):
            return tf.logical_and(tf.logical_and(i < num_steps, self._first_bad_step < 0),
                                  tf.logical_not(self._exhausted))

        tf.while_loop(keep_going, body, (tf.constant(0, tf.int64),))

    # ------------------------------------------------------------ data setup
    def split(self, output, num_workers: int | None = None) -> PackSplit:
        """How a packed output's packs are split over the workers (`split_packs`).

        Each worker contributes ``micro_batch_size * replicas per worker *
        accumulation_steps`` packs to an update; ``split(output).steps`` is
        the number of updates in one epoch.
        """
        output = inputs.packed_output(output)
        workers = num_workers or inputs.num_input_pipelines(self.strategy)
        return split_packs([records for _, records in output.shards], num_workers=workers,
                           packs_per_step=self.packs_per_update // workers)

    def distribute_packed(self, output, start_step: int = 0):
        """Each worker reads only its share of a packed output (`tfpack.training.inputs`).

        Worker ``w`` reads its range of packs (then its empty packs) from
        update ``start_step`` on, epoch after epoch, in micro-batches.
        """
        output = inputs.packed_output(output)
        micro = self.micro_batch_size

        def dataset_fn(context: tf.distribute.InputContext):
            split = self.split(output, context.num_input_pipelines)
            packs = inputs.worker_packs(output, split, context.input_pipeline_id,
                                        start_step=start_step)
            return packs.batch(micro, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def distribute(self, dataset: tf.data.Dataset):
        """Batch and shard unbatched packed examples so every update gets the same packs.

        Every worker reads the whole ``dataset`` and keeps its micro-batches;
        pass a packed output to `fit` instead to read only each worker's share.
        """
        micro = self.micro_batch_size

        def dataset_fn(context: tf.distribute.InputContext):
            per_worker = context.num_replicas_in_sync // context.num_input_pipelines
            data = dataset.batch(micro, drop_remainder=True)
            if context.num_input_pipelines > 1:
                # Micro-batch c of the stream belongs to global replica
                # c % num_replicas; a worker owns a consecutive group of them.
                data = data.batch(per_worker, drop_remainder=True).shard(
                    context.num_input_pipelines, context.input_pipeline_id).unbatch()
            return data.prefetch(tf.data.AUTOTUNE)

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    def _build(self, element_spec):
        validate_element_spec(self.model, element_spec)
        trained_lengths.record(self.model, element_spec)
        with self.strategy.scope():
            if not self.model.built or not self.model.weights:
                dummy = {k: tf.zeros([self.micro_batch_size] + s.shape.as_list(), s.dtype)
                         for k, s in element_spec.items()}
                self.model(dummy, training=False)
            self.optimizer.build(self.model.trainable_variables)
        if self.check_exact:
            # Pair packs (encoder-decoders) have no `input_ids`: their probe sets its lengths.
            ids = element_spec.get("input_ids")
            self.exactness = check_before_training(
                self.model, None if ids is None else int(ids.shape[0]))

    # ------------------------------------------------------------------- fit
    def fit(self, dataset, num_steps: int) -> TrainResult:
        """Train until ``num_steps`` optimizer updates (resuming from a checkpoint).

        Args:
            dataset: a packed output (its directory, or a `PackedOutput`):
                each worker reads only its share (`tfpack.training.inputs`:
                contiguous pack ranges, the remainder padded with empty packs,
                epoch after epoch; ``self.split(dataset).steps`` updates an
                epoch). Or a `tf.data.Dataset` of UNBATCHED packed examples
                (dicts of DESIGN.md features, fixed shapes), which every
                worker reads whole; repeat it for several epochs. Or a
                `tfpack.training.HostPacking`: each worker packs its own files
                (`tfpack.training.hosts`). A later call
                on the same trainer continues the stream of the first call's
                input (call ``fit`` again with a larger ``num_steps`` to
                train on, e.g. alternating with evaluation).
            num_steps: the total number of updates to reach.

        Returns:
            A `TrainResult`.

        Raises:
            TfpackError: the dataset does not fit the model, or a checkpoint
                in ``checkpoint_dir`` comes from another configuration.
            NonFiniteLossError: the loss became NaN/inf (training stops; the
                last good checkpoint stays).
        """
        if not isinstance(num_steps, int) or num_steps < 0:
            raise TfpackError(f"`num_steps` must be a non-negative integer. "
                              f"Received: num_steps={num_steps!r}")
        if any(isinstance(d, hosts.HostPacking) for d in (dataset, self._dataset)):
            return hosts.fit(self, dataset, num_steps)  # each worker packs its own files
        if inputs.is_packed_output(dataset):
            return self._fit_packed(inputs.packed_output(dataset), num_steps)
        if not isinstance(dataset, tf.data.Dataset):
            raise TfpackError("`dataset` must be a tf.data.Dataset of packs, a packed output "
                              "directory or a PackedOutput. "
                              f"Received: dataset={dataset!r:.200}")
        if self._output is not None:
            raise TfpackError("Later `fit` calls continue the stream of the first call's "
                              "packed output and must pass it again. "
                              f"Received: a tf.data.Dataset after {self._output.directory!r}")
        if self._iterator is not None and dataset.element_spec != self._element_spec:
            raise TfpackError(
                "Later `fit` calls continue the stream of the first dataset and must pass "
                "one with the same features; build a new Trainer for another dataset. "
                f"Received: element_spec={dataset.element_spec!r}")
        if self._iterator is None:
            self._element_spec = dataset.element_spec
            self._build(self._element_spec)
            self._dataset = dataset
            self._iterator = iter(self.distribute(dataset))
        return self._run(num_steps, lambda resumed: iter(self.distribute(
            self._dataset.skip(resumed * self.packs_per_update))))

    def _fit_packed(self, output, num_steps: int) -> TrainResult:
        # Resuming never needs the iterator's state: the split says where
        # every worker's stream continues, and reading starts there.
        if self._iterator is not None and self._output != output:
            raise TfpackError("Later `fit` calls continue the stream of the first call's "
                              f"input and must pass it again. Received: {output.directory!r}")
        if self._iterator is None:
            self._output = output
            self._element_spec = inputs.empty_packs(output, 1).element_spec
            self._build(self._element_spec)
            self._iterator = iter(self.distribute_packed(output))
        return self._run(num_steps, lambda resumed: iter(self.distribute_packed(
            output, start_step=resumed)), save_iterator=False)

    def _run(self, num_steps: int, resume_iterator, save_iterator: bool = True,
             stream: dict | None = None) -> TrainResult:
        """The training loop of `fit`; ``resume_iterator(step)`` continues a restored run
        (of the same ``stream``, `Checkpointer`)."""
        resumed, checkpointer = None, None
        if self.checkpoint_dir is not None:
            saves_iterator = save_iterator and isinstance(
                self._iterator, tf.__internal__.tracking.Trackable)
            extra = {"iterator": self._iterator} if saves_iterator else {}
            checkpointer = Checkpointer(
                self.checkpoint_dir, model=self.model, optimizer=self.optimizer,
                step=self.step, max_to_keep=self.max_to_keep, is_chief=self._is_chief(),
                stream=stream, random_state=random_state(self.model), **extra)
            if int(self.step.numpy()) == 0:
                learning_rate = learning_rate_variable(self.optimizer)
                wanted = None if learning_rate is None else learning_rate.numpy()
                resumed = agreed_step(self.strategy, checkpointer.restore())
                if resumed and wanted is not None:
                    learning_rate.assign(wanted)  # The rate passed in, not the checkpoint's.
                if self.log_path and self._is_chief():
                    truncate_log(self.log_path, resumed or 0)
                if resumed and not saves_iterator:
                    # The iterator is not in the checkpoint (a packed output, or
                    # MultiWorkerMirroredStrategy's iterator, which cannot be
                    # saved): continue after the packs the restored updates
                    # consumed (a dataset: skipped, so it must be deterministic).
                    self._iterator = resume_iterator(resumed)
        logger = JsonLinesLogger(self.log_path if self._is_chief() else None)
        start = int(self.step.numpy())
        bar = ProgressBar(num_steps, start, enabled=self.progress and self._is_chief())
        history, last_checkpoint = [], None
        try:
            while int(self.step.numpy()) < num_steps:
                step = int(self.step.numpy())
                chunk = min(self.log_every - step % self.log_every, num_steps - step)
                for every in (self.checkpoint_every, self.eval_every):
                    if every:
                        chunk = min(chunk, every - step % every)
                tic = time.perf_counter()
                self._loop(self._iterator, tf.constant(chunk, tf.int64))
                seconds = time.perf_counter() - tic
                exhausted = bool(self._exhausted.numpy())
                chunk = int(self.step.numpy()) - step
                if exhausted and chunk == 0:
                    break
                bad = int(self._first_bad_step.numpy())
                if bad >= 0:
                    last = checkpointer.latest_step() if checkpointer else None
                    kept = (f"{self.checkpoint_dir}/ckpt-{last}" if last is not None else None)
                    raise NonFiniteLossError(
                        "The loss must stay finite; training stopped. Last good "
                        f"checkpoint: {kept}. Received: non-finite loss at step={bad}",
                        bad, kept)
                record = self._read_statistics(chunk, seconds)
                if self.eval_every and (record["step"] % self.eval_every == 0
                                        or record["step"] >= num_steps or exhausted):
                    record.update({f"eval_{k}": v
                                   for k, v in self.evaluate(self.eval_dataset).items()})
                history.append(record)
                logger.write(record)
                bar.update(record["step"] - step, record)
                done = record["step"] >= num_steps or exhausted
                if checkpointer and (done or (self.checkpoint_every and
                                              record["step"] % self.checkpoint_every == 0)):
                    last_checkpoint = checkpointer.save(record["step"])
                if exhausted:
                    break
        finally:
            bar.close()
            logger.close()
        return TrainResult(int(self.step.numpy()), history, last_checkpoint, resumed,
                           bool(self._exhausted.numpy()))

    # -------------------------------------------------------------- evaluate
    def evaluate(self, dataset: tf.data.Dataset, batch_size: int | None = None) -> dict:
        """Loss, accuracy and the task's metrics on packed data, per example.

        Every pack of ``dataset`` (unbatched packed examples, the last batch
        may be partial) is evaluated once with ``training=False``. Losses and
        accuracies are summed statistics over every target (``{t}_loss``,
        ``{t}_accuracy``, as in training logs) and the task's own metrics
        (``entity_f1``, ``macro_f1``, ``perplexity``: `Task.task_metrics`)
        accumulate per-example counts, so the result equals an evaluation of
        the same examples unpacked.

        Returns:
            ``{"loss", "{t}_loss", "{t}_accuracy", ..., metric name: value}``.
        """
        if self._eval_step is None:
            self._eval_step = tf.function(self._evaluate_batch, reduce_retracing=True)
        metrics = list(getattr(self.model, "task_metrics", ()))
        for metric in metrics:
            metric.reset_state()
        batch_size = batch_size or self.eval_batch_size or (
            self.micro_batch_size * self.num_replicas)
        sums = {}
        for x in dataset.batch(batch_size):
            for k, v in self._eval_step(x).items():
                sums[k] = sums.get(k, 0.0) + float(v.numpy())
        if not sums:
            raise TfpackError("`dataset` must hold at least one pack to evaluate. "
                              "Received: an empty dataset")
        record = loss_record(sums, self.terms)
        for metric in metrics:
            record[metric.name] = float(keras.ops.convert_to_numpy(metric.result()))
        return record

    def _evaluate_batch(self, x):
        y_pred = self.model(x, training=False)
        statistics = self.model.loss_statistics(x, y_pred)
        update = getattr(self.model, "update_task_metrics", None)
        if update is not None:
            update(x, y_pred, statistics)
        return {k: tf.cast(v, tf.float64) for k, v in statistics.items()}

    def _read_statistics(self, steps: int, seconds: float) -> dict:
        sums = {k: float(v.numpy()) for k, v in self._sums.items()}
        for v in self._sums.values():
            v.assign(0.0)
        for t in self.terms:
            if abs(sums[f"{t}_targets"] - sums[f"{t}_count"]) > 1e-3 * max(1.0, sums[f"{t}_count"]):
                # The denominators came from `target_counts`; they must be the
                # model's own counts or the loss would be silently mis-scaled.
                raise TfpackError(
                    f"The target count of loss term {t!r} read from the features must "
                    "equal the model's `loss_statistics` count (give the model a "
                    "`target_counts(x)` method). Received: "
                    f"features={sums[f'{t}_targets']}, model={sums[f'{t}_count']}")
        record = {"step": int(self.step.numpy()), **loss_record(sums, self.terms)}
        record["learning_rate"] = float(keras.ops.convert_to_numpy(self.optimizer.learning_rate))
        seconds = max(seconds, 1e-9)
        record["sequences"] = sums["sequences"]
        record["real_tokens"] = sums["real_tokens"]
        record["real_tokens_per_second"] = sums["real_tokens"] / seconds
        record["sequences_per_second"] = sums["sequences"] / seconds
        record["packs_per_second"] = steps * self.packs_per_update / seconds
        record["seconds"] = seconds
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else float("nan"))
                for k, v in record.items()}

    def _is_chief(self) -> bool:
        resolver = getattr(self.strategy, "cluster_resolver", None)
        if resolver is None or not resolver.cluster_spec().as_dict():
            return True
        return (resolver.task_type in ("chief", None)
                or (resolver.task_type == "worker" and resolver.task_id == 0
                    and "chief" not in resolver.cluster_spec().as_dict()))

