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

import math

import tensorflow as tf

from tfpack.data.emit import graph
from tfpack.features import FeatureRoles
from tfpack.data.offline import offline
from tfpack.data.reading import input_names, truncate_example
from tfpack.data.report import PackReport
from tfpack.data.streaming import streaming
from tfpack.errors import TfpackError
from tfpack.formats import validation
from tfpack.formats.rows import dense_rows
from tfpack.packing.balance import check_balance
from tfpack.packing.histograms import validate_seed
from tfpack.packing.plans import PackingPlan
from tfpack.packing.windows import DEFAULT_ALGORITHM, empty_dataset_error
from tfpack.params import Anything, Boolean, InstanceOf, Integer, Options, validate_params

__all__ = ["pack", "Packer", "PackReport"]

_COUNT = [None, Integer(1)]
# Declared once for `pack` and `Packer` (tfpack.params): checked before anything else.
PARAMETERS = {
    "max_length": Integer(1), "max_sequences_per_pack": _COUNT,
    "max_predictions_per_pack": _COUNT, "plan": [None, InstanceOf(PackingPlan)],
    "algorithm": [None, InstanceOf(str, description="a planner name (tfpack.packing)")],
    "window": _COUNT, "roles": [None, InstanceOf(str, FeatureRoles)], "truncate": Boolean(),
    "shuffle": Boolean(), "seed": Integer(0),
    "input_context": [None, InstanceOf(tf.distribute.InputContext)],
    "per_replica_batch_size": Integer(1), "remainder": Options("pad", "drop"),
    "batch_size": _COUNT, "balance": [Boolean(), Options("sequences", "tokens")],
    "balance_size": _COUNT, "input_sharded": Boolean(),
    "all_gather": [None, Anything("a callable, checked with input_sharded")],
    "num_packs": _COUNT,
}


@validate_params(PARAMETERS)
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


class Packer:
    """The transformation returned by `pack`; see there for the arguments.

    Attributes:
        report: a `PackReport`, set when the packer is applied.
    """

    @validate_params(PARAMETERS)
    def __init__(self, *, max_length, max_sequences_per_pack, max_predictions_per_pack,
                 plan, algorithm, window, roles, truncate, shuffle, seed,
                 input_context, per_replica_batch_size, remainder, batch_size=None,
                 balance=False, balance_size=None, input_sharded=False, all_gather=None,
                 num_packs=None):
        validation.check_sizes(max_length, max_sequences_per_pack, max_predictions_per_pack)
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
            dataset = dataset.map(graph(lambda x: {n: x[n] for n in names}))  # drop extra
        if self.truncate:
            dataset = dataset.map(graph(lambda x: truncate_example(x, roles, self.max_length)),
                                  num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        packed, self.report = (streaming if self.window else offline)(self, dataset, roles)
        return packed
