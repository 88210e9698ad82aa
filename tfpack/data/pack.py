"""`ds.apply(tfpack.data.pack(...))`: unpacked examples in, fixed-shape packs out.

Input: a dataset of dicts of variable-length features (see
`tfpack.data.features` for the roles). Output: the DESIGN.md packed features
with shapes ``[L]``, ``[K]`` and ``[M]``.

Two modes:

- offline (default): the examples are read once into host memory; their
  lengths give a plan over the whole dataset (``plan=`` or ``algorithm=``);
  the plan's assignment then yields the packs (`tfpack.packing.flow`, the flow
  ``tfpack pack`` runs too). Pack order is shuffled with ``seed``; bad input (an example longer than ``L``, a pack with more than
  ``M`` predictions) fails while ``ds.apply`` runs, naming the example.
- streaming (``window=N``): ``N`` examples at a time are planned and packed;
  memory is bounded by the window and the last partial window is flushed.
  Bad input fails on iteration with a `TfpackError` naming the example's
  index in the stream (`tfpack.formats.validation` checks every example).

Example (input -> output, ``L=6``, ``K=2``)::

    {"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}, {"input_ids": [3]}
    -> input_ids [5, 6, 7, 3, 0, 0], sequence_ids [1, 1, 1, 2, 0, 0], ...
       input_ids [8, 9, 0, 0, 0, 0], sequence_ids [1, 1, 0, 0, 0, 0], ...

Sharding (``input_context=``): worker ``w`` of ``W`` gets packs ``w, w + W,
...``; the number of packs is first padded up (``remainder="pad"``: empty packs
with ``sequence_mask`` all 0, which carry no loss) or cut down
(``remainder="drop"``, offline only) to a multiple of ``W * replicas per
worker * per_replica_batch_size``, so every replica sees the same number of
packs. `Packer.report` says how many packs were added or dropped. Every host
reads and plans the whole input (the same plan as one host).

Packing per host (``input_sharded=True``): the dataset is this host's own share
of the raw input (built from `tfpack.data.host_files`, so no host reads
another's files); the host plans and packs only it. Offline, the hosts then
exchange their pack counts once (``all_gather``, e.g.
`tfpack.data.strategy_all_gather`) and each pads with empty packs to the
largest count (``"pad"``) or cuts its last packs to the smallest (``"drop"``),
so every host yields the same number of batches; streaming, each host emits
exactly ``num_packs`` packs (its own, then empty ones; packs past
``num_packs`` are not read). See `tfpack.packing.hosts`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import tensorflow as tf

from tfpack.data.assemble import assemble
from tfpack.data.boundary import raising_tfpack_errors
from tfpack.data.features import FeatureRoles, packed_feature_spec
from tfpack.data.reading import (
    input_names,
    materialize,
    no_examples,
    ragged_rows,
    truncate_example,
)
from tfpack.errors import TfpackError
from tfpack.formats import validation
from tfpack.formats.rows import dense_rows
from tfpack.packing.balance import check_balance
from tfpack.packing.histograms import validate_seed
from tfpack.packing.flow import offline_packs
from tfpack.packing.hosts import FAILED, agreed_packs, check_counts, fit_to_count
from tfpack.packing.windows import (
    DEFAULT_ALGORITHM,
    check_predictions,
    empty_dataset_error,
    fit_to_multiple,
    permute_packs,
    plan_window,
    take_worker,
)

__all__ = ["pack", "Packer", "PackReport"]

# Packs built per call of `assemble` in offline mode: large enough to amortize
# the per-call overhead, small enough to keep the first element fast.
_CHUNK_PACKS = 512
# Pipeline functions have no Python control flow on tensors: skip AutoGraph.
_graph = tf.autograph.experimental.do_not_convert


@dataclasses.dataclass
class PackReport:
    """What a `Packer` produced (offline mode: exact; streaming: settings only).

    Attributes:
        mode: ``"offline"`` or ``"streaming"``.
        packs: packs this worker emits (padding packs included).
        sequences: real sequences this worker emits.
        tokens: real tokens this worker emits.
        efficiency: ``tokens / (packs * L)`` over all workers, before sharding.
        packing_factor: sequences per non-empty pack, before sharding.
        padding_packs: empty packs added (all workers) so that every replica
            gets the same number of packs.
        dropped_packs, dropped_sequences: cut with ``remainder="drop"``.
        num_workers, worker: the input pipeline this dataset is for.
        max_predictions_per_pack: ``M`` in effect.
        input_sharded: the dataset was this host's own share of the input.
            Then ``packs``, ``sequences``, ``tokens``, ``efficiency``,
            ``packing_factor``, ``padding_packs``, ``dropped_packs`` and
            ``dropped_sequences`` describe this host only.
        host_packs: with ``all_gather``, every host's real packs before
            they were padded or cut, host by host; else ``None``.
        plan: the `tfpack.packing.PackingPlan` used (offline), else ``None``.
        balance: with ``balance=``, the `tfpack.packing.balance.BatchBalance`
            of the batches of all workers together (``low``/``high``: the
            fewest and most sequences, or tokens, in a full batch;
            ``excess``: by how much the worst misses the tolerance), else
            ``None``.
    """

    mode: str
    packs: int | None = None
    sequences: int | None = None
    tokens: int | None = None
    efficiency: float | None = None
    packing_factor: float | None = None
    padding_packs: int = 0
    dropped_packs: int = 0
    dropped_sequences: int = 0
    num_workers: int = 1
    worker: int = 0
    max_predictions_per_pack: int | None = None
    input_sharded: bool = False
    host_packs: list | None = None
    plan: object = None
    balance: object = None


def pack(
    *,
    max_length: int,
    max_sequences_per_pack: int | None,
    max_predictions_per_pack: int | None = None,
    plan=None,
    algorithm: str | None = None,
    window: int | None = None,
    roles: str | FeatureRoles | None = None,
    truncate: bool = False,
    shuffle: bool = True,
    seed: int = 0,
    input_context: tf.distribute.InputContext | None = None,
    per_replica_batch_size: int = 1,
    remainder: str = "pad",
    batch_size: int | None = None,
    balance=False,
    balance_size: int | None = None,
    input_sharded: bool = False,
    all_gather=None,
    num_packs: int | None = None,
) -> "Packer":
    """A dataset transformation packing examples into fixed-shape packs.

    Example:

    >>> import tensorflow as tf, tfpack
    >>> ds = tf.data.Dataset.from_generator(
    ...     lambda: ({"input_ids": [1] * n} for n in [3, 5, 2, 6]),
    ...     output_signature={"input_ids": tf.TensorSpec([None], tf.int32)})
    >>> packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2,
    ...                           algorithm="ffd")
    >>> packs = ds.apply(packer)
    >>> packer.report.packs, packs.element_spec["input_ids"].shape
    (2, TensorShape([8]))

    Args:
        max_length: ``L``, tokens per pack.
        max_sequences_per_pack: ``K``; ``None`` (offline only): the most the
            plan uses.
        max_predictions_per_pack: ``M`` for masked-LM features; ``None``
            (offline only): the most any pack needs.
        plan: a precomputed `tfpack.packing.PackingPlan` (offline mode).
        algorithm: planner name (default ``"optimal"``: the
            best packs; ``"lpfhp"`` plans ~100x faster, e.g. for small windows);
            see `tfpack.packing`.
        window: streaming mode: plan and pack this many examples at a time.
        roles: `FeatureRoles`, a preset name, or ``None`` to infer from the
            dataset's features (`FeatureRoles.infer`).
        truncate: cut examples longer than ``L`` (masked-LM predictions past
            the cut are dropped) instead of failing.
        shuffle: shuffle the order of packs with ``seed`` (streaming: within
            each window; add ``.shuffle()`` after packing to mix windows).
        seed: seeds the assignment and the shuffle: same seed, same stream.
        input_context: a `tf.distribute.InputContext`: emit this worker's
            share of the packs.
        per_replica_batch_size: packs per replica per step; the number of
            packs is made a multiple of it times the number of replicas.
        remainder: ``"pad"`` (add empty packs) or ``"drop"`` (offline only)
            when the packs do not divide evenly across replicas.
        batch_size: emit batches of this many packs (leading dimension
            ``batch_size``) instead of single packs. Offline, each batch is
            assembled at once (no unbatch/batch round trip) and the number of
            packs is padded (or cut) to whole batches, so every batch has the
            static shape ``[batch_size, ...]``.
            Streaming: ``.batch(batch_size)`` after packing.
        balance: offline mode with ``batch_size``: ``True`` (or
            ``"sequences"``) orders the packs so that every batch holds the
            same number of sequences (within 2% of the mean, or 1), all but
            the last; ``"tokens"``: the same number of tokens. Packs are only
            reordered (seeded): none is added, dropped or changed. With
            ``input_context``, the batches of all workers of one step
            together are balanced. ``Packer.report.balance`` says how evenly.
        balance_size: packs per balanced group, all workers together, when
            it is not one step: e.g. ``rule.packs_per_update`` of
            `tfpack.training.for_packing` to balance whole optimizer updates
            of accumulated micro-batches (better: a group of a few packs
            cannot always be balanced), or with ``batch_size=None`` for
            unbatched packs (`tfpack.training.Trainer` batches them). A
            multiple of ``batch_size`` times the workers.
        input_sharded: with ``input_context``: the dataset is this host's own
            share of the raw input, e.g. read from the files of
            `tfpack.data.host_files` (shares may differ in size). The host
            plans and packs only its share; ``max_sequences_per_pack`` (and
            ``max_predictions_per_pack`` for masked-LM data) must be fixed so
            that all hosts' packs have one shape. Needs ``all_gather`` or
            ``num_packs`` when there are several input pipelines.
        all_gather: offline, with ``input_sharded``: a collective taking
            this host's pack count and returning every host's (or every
            replica's), called once by every host while ``ds.apply`` runs:
            `tfpack.data.strategy_all_gather` (tf.distribute) or
            `tfpack.data.jax_all_gather` (JAX processes). Every host then
            emits the largest count rounded up to its steps (``remainder=
            "pad"``: empty packs, no loss) or the smallest rounded down
            (``"drop"``: the cut packs and sequences are in the report).
        num_packs: with ``input_sharded``: emit exactly this many packs on
            this host, with no communication: the host's own packs, then
            empty ones; packs past ``num_packs`` are cut (offline: counted
            in the report; streaming: not read, so not counted). The way to
            agree in streaming mode, where counts are known only at the end.

    Returns:
        A `Packer`: pass it to ``dataset.apply``; ``Packer.report`` then
        describes the result.
    """
    return Packer(
        max_length=max_length, max_sequences_per_pack=max_sequences_per_pack,
        max_predictions_per_pack=max_predictions_per_pack, plan=plan,
        algorithm=algorithm, window=window, roles=roles, truncate=truncate,
        shuffle=shuffle, seed=seed, input_context=input_context,
        per_replica_batch_size=per_replica_batch_size, remainder=remainder,
        batch_size=batch_size, balance=balance, balance_size=balance_size,
        input_sharded=input_sharded, all_gather=all_gather, num_packs=num_packs)


def _positive(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise TfpackError(f"`{name}` must be a positive integer. Received: {name}={value!r}")


class Packer:
    """The transformation returned by `pack`; see there for the arguments.

    Attributes:
        report: a `PackReport`, set when the packer is applied.
    """

    def __init__(self, *, max_length, max_sequences_per_pack, max_predictions_per_pack,
                 plan, algorithm, window, roles, truncate, shuffle, seed,
                 input_context, per_replica_batch_size, remainder, batch_size=None,
                 balance=False, balance_size=None, input_sharded=False, all_gather=None,
                 num_packs=None):
        _positive("max_length", max_length)
        _positive("max_sequences_per_pack", max_sequences_per_pack, allow_none=True)
        _positive("max_predictions_per_pack", max_predictions_per_pack, allow_none=True)
        _positive("window", window, allow_none=True)
        _positive("per_replica_batch_size", per_replica_batch_size)
        _positive("batch_size", batch_size, allow_none=True)
        validation.check_sizes(max_length, max_sequences_per_pack, max_predictions_per_pack)
        _positive("balance_size", balance_size, allow_none=True)
        balance = check_balance(balance, balance_size or batch_size)
        if balance and window:
            raise TfpackError("`balance` arranges all packs at once: offline mode only. "
                              f"Received: balance={balance!r}, window={window!r}")
        if plan is not None and (algorithm is not None or window is not None):
            raise TfpackError(
                "`plan` cannot be combined with `algorithm` or `window`. "
                f"Received: algorithm={algorithm!r}, window={window!r}")
        if remainder not in ("pad", "drop") or (remainder == "drop" and window):
            raise TfpackError(
                "`remainder` must be 'pad' or, in offline mode, 'drop'. "
                f"Received: remainder={remainder!r}")
        if window and max_sequences_per_pack is None:
            raise TfpackError(
                "Streaming mode (`window`) needs a fixed `max_sequences_per_pack`. "
                "Received: max_sequences_per_pack=None")
        if plan is not None:
            if plan.max_length > max_length:
                raise TfpackError(
                    "`plan.max_length` must be at most `max_length`. "
                    f"Received: plan.max_length={plan.max_length}, max_length={max_length}")
            if max_sequences_per_pack is None:
                max_sequences_per_pack = int(plan.metrics["max_depth_used"])
        self.max_length = int(max_length)
        self.max_sequences_per_pack = max_sequences_per_pack
        self.max_predictions_per_pack = max_predictions_per_pack
        self.plan = plan
        self.algorithm = algorithm or DEFAULT_ALGORITHM
        self.window = window
        self.roles = roles
        self.truncate = truncate
        self.shuffle = shuffle
        self.seed = validate_seed(seed)
        self.num_workers = input_context.num_input_pipelines if input_context else 1
        self.worker = input_context.input_pipeline_id if input_context else 0
        replicas = input_context.num_replicas_in_sync if input_context else 1
        self.multiple = max(replicas, self.num_workers) * per_replica_batch_size
        self.batch_size = batch_size
        if batch_size and not window:
            # Every worker's share must be whole batches.
            self.multiple = math.lcm(self.multiple, self.num_workers * batch_size)
        self.remainder = remainder
        self.balance = balance
        # A step takes one batch from every worker: balance those together
        # (packing per host: each host balances its own batches).
        arranged = 1 if input_sharded else self.num_workers
        self.balance_size = balance_size or (batch_size or 0) * arranged
        if balance and batch_size and balance_size and \
                balance_size % (batch_size * arranged):
            raise TfpackError(
                "`balance_size` must be a multiple of `batch_size` times the workers "
                f"({batch_size * arranged}), so that groups are whole steps. "
                f"Received: balance_size={balance_size}")
        self.input_sharded = bool(input_sharded)
        self.all_gather = all_gather
        self.num_packs = num_packs
        if input_sharded:
            self._check_sharded(input_context, replicas, per_replica_batch_size, plan)
        elif all_gather is not None or num_packs is not None:
            raise TfpackError("`all_gather` and `num_packs` are for `input_sharded=True`. "
                              f"Received: input_sharded={input_sharded!r}")
        self.report: PackReport | None = None

    def _check_sharded(self, input_context, replicas, per_replica_batch_size, plan):
        """Settings of packing per host; the per-host multiple of packs."""
        if input_context is None:
            raise TfpackError("`input_sharded=True` needs the `input_context` of this host. "
                              "Received: input_context=None")
        if plan is not None:
            raise TfpackError("`input_sharded=True` plans each host's own share: pass "
                              "`algorithm`, not `plan`. Received: plan=<PackingPlan>")
        if self.max_sequences_per_pack is None:
            raise TfpackError("`input_sharded=True` needs a fixed `max_sequences_per_pack`, "
                              "the same on every host. Received: max_sequences_per_pack=None")
        _positive("num_packs", self.num_packs, allow_none=True)
        if self.window and self.all_gather is not None:
            raise TfpackError(
                "Streaming mode (`window`) cannot agree on a count it knows only at the "
                "end: pass `num_packs` instead of `all_gather`. Received: all_gather="
                f"{self.all_gather!r}")
        if self.all_gather is not None and self.num_packs is not None:
            raise TfpackError("Pass `all_gather` or `num_packs`, not both. Received: "
                              f"num_packs={self.num_packs!r}")
        if (self.num_workers > 1 and self.all_gather is None and self.num_packs is None):
            raise TfpackError(
                "With several input pipelines, `input_sharded=True` needs `all_gather` "
                "(offline) or `num_packs`, so that every host emits the same number of "
                f"packs. Received: num_input_pipelines={self.num_workers}")
        if self.all_gather is not None and not callable(self.all_gather):
            raise TfpackError("`all_gather` must be callable (count -> every host's count). "
                              f"Received: all_gather={self.all_gather!r}")
        # Each host feeds its own replicas: its packs are whole steps of them.
        self.multiple = max(replicas // self.num_workers, 1) * per_replica_batch_size
        if self.batch_size and not self.window:
            self.multiple = math.lcm(self.multiple, self.batch_size)
        if self.num_packs is not None and self.num_packs % self.multiple:
            raise TfpackError(
                f"`num_packs` must be a multiple of {self.multiple} (whole steps of this "
                f"host's replicas and batches). Received: num_packs={self.num_packs}")

    def __call__(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        dataset = dense_rows(dataset)
        roles = (FeatureRoles.infer(dataset.element_spec) if self.roles is None
                 else FeatureRoles.get(self.roles))
        roles.validate(dataset.element_spec)
        roles = roles.present(dataset.element_spec)
        if roles.predictions and self.max_predictions_per_pack is None and (
                self.window or self.input_sharded):
            raise TfpackError(
                "Streaming mode (`window`) and `input_sharded` with masked-LM features need "
                "a fixed `max_predictions_per_pack`. Received: max_predictions_per_pack=None")
        # Offline mode finds an empty dataset while reading it; streaming peeks.
        # A host's own share may be empty: the hosts' counts decide.
        if not self.input_sharded and (tf.data.experimental.cardinality(dataset) == 0 or (
                self.window and not any(True for _ in dataset.take(1)))):
            raise empty_dataset_error()
        names = input_names(roles, dataset.element_spec)
        if set(names) != set(dataset.element_spec):
            dataset = dataset.map(_graph(lambda x: {n: x[n] for n in names}))  # drop extra
        if self.truncate:
            dataset = dataset.map(_graph(lambda x: truncate_example(x, roles, self.max_length)),
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        if self.window:
            return self._streaming(dataset, roles)
        return self._offline(dataset, roles)

    # -- offline ---------------------------------------------------------

    def _offline(self, dataset, roles):
        if self.input_sharded:
            return self._offline_share(dataset, roles)
        examples, lengths = materialize(dataset, roles)
        packs = self._plan(examples, lengths, roles)
        L = self.max_length
        order, splits, plan = packs.order, packs.splits, packs.plan
        K, M = packs.max_sequences_per_pack, packs.max_predictions_per_pack
        if M is None:
            M = self.max_predictions_per_pack
        real_packs = len(splits) - 1
        before = len(order)
        order, splits, added, dropped = fit_to_multiple(
            order, splits, self.multiple, self.remainder)
        dropped_sequences = before - len(order)
        if dropped:
            warnings.warn(
                f"remainder='drop' cut {dropped} packs ({dropped_sequences} sequences) "
                "so that every replica gets the same number of packs", stacklevel=3)
        order, splits = take_worker(order, splits, self.worker, self.num_workers)
        self.report = PackReport(
            mode="offline", packs=len(splits) - 1, sequences=len(order),
            tokens=int(lengths[order].sum()),
            efficiency=float(lengths.sum() / (real_packs * L)),
            packing_factor=float(len(lengths) / real_packs),
            padding_packs=added, dropped_packs=dropped,
            dropped_sequences=dropped_sequences,
            num_workers=self.num_workers, worker=self.worker,
            max_predictions_per_pack=M, plan=plan, balance=packs.balance)
        return _pack_dataset(examples, order, splits, roles, L, K, M, self.batch_size)

    def _plan(self, examples, lengths, roles):
        """Check every example, then plan and assign them (`offline_packs`)."""
        validation.check_example_codes(
            validation.example_problems(examples, roles).numpy(), 0,
            lambda i: {n: t[i].numpy() for n, t in examples.items()})
        predictions = None
        if roles.predictions:
            predictions = examples[roles.predictions[0]].row_lengths().numpy()
        return offline_packs(
            lengths, predictions, max_length=self.max_length,
            max_sequences_per_pack=self.max_sequences_per_pack,
            max_predictions_per_pack=self.max_predictions_per_pack, plan=self.plan,
            algorithm=None if self.plan is not None else self.algorithm, seed=self.seed,
            shuffle=self.shuffle, balance=self.balance,
            batch_size=self.balance_size if self.balance else None)

    def _offline_share(self, dataset, roles):
        """Packing per host: plan this host's share, agree on the count, pad or cut."""
        L, K, M = self.max_length, self.max_sequences_per_pack, self.max_predictions_per_pack
        try:
            examples, lengths = materialize(dataset, roles, allow_empty=True)
            packs = self._plan(examples, lengths, roles) if len(lengths) else None
        except Exception:
            # Tell the others before raising, so that none waits for this host.
            if self.all_gather is not None:
                self.all_gather(FAILED)
            raise
        order = packs.order if packs else np.zeros([0], np.int64)
        splits = packs.splits if packs else np.zeros([1], np.int64)
        real_packs = len(splits) - 1
        counts = None
        if self.all_gather is not None:
            counts = check_counts(self.all_gather(real_packs), self.num_workers)
            if not any(counts):
                raise empty_dataset_error()
            target = agreed_packs(counts, multiple=self.multiple, remainder=self.remainder)
        elif self.num_packs is not None:
            target = self.num_packs
        else:  # One input pipeline: its share is the whole input.
            if not real_packs:
                raise empty_dataset_error()
            target = agreed_packs([real_packs], multiple=self.multiple,
                                  remainder=self.remainder)
        order, splits, added, dropped, dropped_sequences = fit_to_count(order, splits, target)
        if dropped:
            warnings.warn(
                f"Host {self.worker} cut {dropped} packs ({dropped_sequences} sequences) "
                f"to the {target} packs every host emits", stacklevel=3)
        self.report = PackReport(
            mode="offline", packs=target, sequences=len(order),
            tokens=int(lengths[order].sum()),
            efficiency=float(lengths.sum() / (real_packs * L)) if real_packs else 0.0,
            packing_factor=float(len(lengths) / real_packs) if real_packs else 0.0,
            padding_packs=added, dropped_packs=dropped, dropped_sequences=dropped_sequences,
            num_workers=self.num_workers, worker=self.worker, max_predictions_per_pack=M,
            input_sharded=True, host_packs=counts, plan=packs.plan if packs else None,
            balance=packs.balance if packs else None)
        return _pack_dataset(examples, order, splits, roles, L, K, M, self.batch_size)

    # -- streaming -------------------------------------------------------

    def _streaming(self, dataset, roles):
        L, K, M = self.max_length, self.max_sequences_per_pack, self.max_predictions_per_pack
        window = self.window
        length_feature = roles.length_feature
        fixed_count = self.input_sharded and self.num_packs is not None

        def plan_numpy(lengths, index, codes, predictions):
            # Raised here, in Python, so that `raising_tfpack_errors` can give
            # the user this TfpackError rather than TensorFlow's wrapper.
            validation.check_example_codes(codes, int(index) * window)
            rng_seed = int(np.random.SeedSequence([self.seed, int(index)]).generate_state(1)[0])
            order, splits = plan_window(lengths, L, K, self.algorithm, seed=rng_seed,
                                        first_index=int(index) * window)
            if M is not None:
                check_predictions(predictions, order, splits, M, int(index) * window)
            if self.shuffle:
                perm = np.random.default_rng(rng_seed).permutation(len(splits) - 1)
                order, splits = permute_packs(order, splits, perm)
            if fixed_count:  # The host's own packs, padded or cut at the end.
                return order, splits
            order, splits, _, _ = fit_to_multiple(order, splits, self.multiple, "pad")
            if self.input_sharded:
                return order, splits
            return take_worker(order, splits, self.worker, self.num_workers)

        def pack_window(index, batch):
            batch = ragged_rows(batch)
            lengths = batch[length_feature].row_lengths()
            codes = validation.example_problems(batch, roles)
            predictions = (batch[roles.predictions[0]].row_lengths() if roles.predictions
                           else tf.zeros_like(lengths))
            order, splits = tf.numpy_function(
                plan_numpy, [lengths, index, codes, predictions], [tf.int64, tf.int64],
                stateful=False)
            order.set_shape([None])
            splits.set_shape([None])
            # `codes` covered the partitions (rules masked_lm_lengths, token_feature_lengths)
            # before any pack is built.
            first = tf.cast(index, tf.int64) * window
            ids = first + tf.range(tf.shape(lengths, out_type=tf.int64)[0])
            return assemble(batch, order, splits, roles, L, K, M, check_partitions=False,
                            example_ids=ids)

        self.report = PackReport(mode="streaming", num_workers=self.num_workers,
                                 worker=self.worker, max_predictions_per_pack=M,
                                 input_sharded=self.input_sharded,
                                 packs=self.num_packs if fixed_count else None)
        packed = (dataset.ragged_batch(window).enumerate()
                  .map(_graph(pack_window), num_parallel_calls=tf.data.AUTOTUNE,
                       deterministic=True)
                  .unbatch())
        packed = _with_static_shapes(packed, roles, L, K, M)
        if fixed_count:
            # `take` stops reading the share once `num_packs` packs are out.
            empty = _empty_packs(dataset.element_spec, roles, L, K, M)
            packed = packed.concatenate(empty.repeat()).take(self.num_packs)
        return raising_tfpack_errors(packed.batch(self.batch_size) if self.batch_size else packed)


def _empty_packs(element_spec, roles, L, K, M):
    """One empty pack (every feature at its padding value) as a dataset."""
    names = input_names(roles, element_spec)
    examples = no_examples(element_spec, names, batched=False)
    pack = assemble(examples, tf.zeros([0], tf.int64), tf.zeros([2], tf.int64), roles, L, K,
                    M, check_partitions=False)
    return _with_static_shapes(tf.data.Dataset.from_tensor_slices(pack), roles, L, K, M)


def _pack_dataset(examples, order, splits, roles, L, K, M, batch_size=None):
    order_t = tf.constant(order, tf.int64)
    splits_t = tf.constant(splits, tf.int64)
    packs = len(splits) - 1
    chunk_packs = batch_size or _CHUNK_PACKS
    chunks = -(-packs // chunk_packs)

    def build(chunk):
        first = chunk * chunk_packs
        last = tf.minimum(first + chunk_packs, packs)
        sub_splits = splits_t[first:last + 1]
        sub_order = order_t[sub_splits[0]:sub_splits[-1]]
        return assemble(examples, sub_order, sub_splits - sub_splits[0], roles, L, K, M,
                        check_partitions=False)

    packed = tf.data.Dataset.range(chunks).map(
        _graph(build), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if batch_size:
        return _with_static_shapes(packed, roles, L, K, M, batch_size)
    return _with_static_shapes(packed.unbatch(), roles, L, K, M)


def _with_static_shapes(dataset, roles, L, K, M, batch_size=None):
    spec = packed_feature_spec(roles, L, K, M)
    if batch_size:
        spec = {n: tf.TensorSpec([batch_size, *s.shape], s.dtype) for n, s in spec.items()}
    if all(dataset.element_spec[n].shape == s.shape for n, s in spec.items()):
        return dataset
    return dataset.map(_graph(
        lambda x: {n: tf.ensure_shape(x[n], spec[n].shape) for n in spec}))
