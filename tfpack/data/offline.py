"""Offline mode of `tfpack.data.pack`: every example read once, one plan over all.

The examples are read into host memory (`tfpack.data.reading.materialize`),
checked, planned and assigned (`tfpack.packing.flow.offline_packs`); the
packs are then padded or cut to whole steps of the replicas, and this worker
takes its share (`offline`). Packing per host (`offline_share`): each host
plans only its own share of the input, and the hosts agree on one count
(`tfpack.packing.hosts`). ``packer`` is the `tfpack.data.Packer` whose
settings apply.
"""

from __future__ import annotations

import warnings

import numpy as np

from tfpack.data.emit import pack_dataset
from tfpack.data.reading import materialize
from tfpack.data.report import PackReport
from tfpack.errors import TfpackError
from tfpack.formats import validation
from tfpack.packing.flow import offline_packs
from tfpack.packing.hosts import FAILED, agreed_packs, check_counts, fit_to_count
from tfpack.packing.windows import empty_dataset_error, fit_to_multiple, take_worker

__all__ = ["offline", "offline_share", "plan_examples"]


def offline(packer, dataset, roles):
    """Offline mode: read every example once, plan them all, yield the packs.

    Returns the dataset of packs and its `PackReport`.
    """
    if packer.input_sharded:
        return offline_share(packer, dataset, roles)
    examples, lengths = materialize(dataset, roles)
    packs = plan_examples(packer, examples, lengths, roles)
    L = packer.max_length
    order, splits, plan = packs.order, packs.splits, packs.plan
    K, M = packs.max_sequences_per_pack, packs.max_predictions_per_pack
    if M is None:
        M = packer.max_predictions_per_pack
    real_packs = len(splits) - 1
    before = len(order)
    order, splits, added, dropped = fit_to_multiple(
        order, splits, packer.multiple, packer.remainder)
    dropped_sequences = before - len(order)
    if dropped:
        warnings.warn(
            f"remainder='drop' cut {dropped} packs ({dropped_sequences} sequences) "
            "so that every replica gets the same number of packs", stacklevel=3)
    order, splits = take_worker(order, splits, packer.worker, packer.num_workers)
    report = PackReport(
        mode="offline", packs=len(splits) - 1, sequences=len(order),
        tokens=int(lengths[order].sum()),
        efficiency=float(lengths.sum() / (real_packs * L)),
        packing_factor=float(len(lengths) / real_packs),
        padding_packs=added, dropped_packs=dropped,
        dropped_sequences=dropped_sequences,
        num_workers=packer.num_workers, worker=packer.worker,
        max_predictions_per_pack=M, plan=plan, balance=packs.balance)
    return pack_dataset(examples, order, splits, roles, L, K, M, packer.batch_size), report

def plan_examples(packer, examples, lengths, roles):
    """Check every example, then plan and assign them (`offline_packs`)."""
    validation.check_example_codes(
        validation.example_problems(examples, roles).numpy(), 0,
        lambda i: {n: t[i].numpy() for n, t in examples.items()})
    predictions = None
    if roles.predictions:
        predictions = examples[roles.predictions[0]].row_lengths().numpy()
    return offline_packs(
        lengths, predictions, max_length=packer.max_length,
        max_sequences_per_pack=packer.max_sequences_per_pack,
        max_predictions_per_pack=packer.max_predictions_per_pack, plan=packer.plan,
        algorithm=None if packer.plan is not None else packer.algorithm, seed=packer.seed,
        shuffle=packer.shuffle, balance=packer.balance,
        batch_size=packer.balance_size if packer.balance else None)

def offline_share(packer, dataset, roles):
    """Packing per host: plan this host's share, agree on the count, pad or cut.

    Returns the dataset of packs and its `PackReport`.
    """
    L, K, M = packer.max_length, packer.max_sequences_per_pack, packer.max_predictions_per_pack
    try:
        examples, lengths = materialize(dataset, roles, allow_empty=True)
        packs = plan_examples(packer, examples, lengths, roles) if len(lengths) else None
    except Exception:
        # Tell the others before raising, so that none waits for this host.
        if packer.all_gather is not None:
            packer.all_gather(FAILED)
        raise
    order = packs.order if packs else np.zeros([0], np.int64)
    splits = packs.splits if packs else np.zeros([1], np.int64)
    real_packs = len(splits) - 1
    counts = None
    if packer.all_gather is not None:
        counts = check_counts(packer.all_gather(real_packs), packer.num_workers)
        if counts[packer.worker] != real_packs:  # the collective must agree with this host
            raise TfpackError(
                f"`all_gather` must return every host's own count; host {packer.worker} "
                f"packed {real_packs} packs. Received: counts {counts}")
        if not any(counts):
            raise empty_dataset_error()
        target = agreed_packs(counts, multiple=packer.multiple, remainder=packer.remainder)
    elif packer.num_packs is not None:
        target = packer.num_packs
    else:  # One input pipeline: its share is the whole input.
        if not real_packs:
            raise empty_dataset_error()
        target = agreed_packs([real_packs], multiple=packer.multiple,
                              remainder=packer.remainder)
    order, splits, added, dropped, dropped_sequences = fit_to_count(order, splits, target)
    if dropped and counts is not None and packer.remainder == "pad":  # "pad" loses nothing
        raise TfpackError(
            f"`remainder='pad'` must lose no pack, but host {packer.worker} would cut "
            f"{dropped} of its {real_packs} packs ({dropped_sequences} sequences) to the "
            f"agreed count. Received: target={target}")
    if dropped:
        warnings.warn(
            f"Host {packer.worker} cut {dropped} packs ({dropped_sequences} sequences) "
            f"to the {target} packs every host emits", stacklevel=3)
    report = PackReport(
        mode="offline", packs=target, sequences=len(order),
        tokens=int(lengths[order].sum()),
        efficiency=float(lengths.sum() / (real_packs * L)) if real_packs else 0.0,
        packing_factor=float(len(lengths) / real_packs) if real_packs else 0.0,
        padding_packs=added, dropped_packs=dropped, dropped_sequences=dropped_sequences,
        num_workers=packer.num_workers, worker=packer.worker, max_predictions_per_pack=M,
        input_sharded=True, host_packs=counts, plan=packs.plan if packs else None,
        balance=packs.balance if packs else None)
    return pack_dataset(examples, order, splits, roles, L, K, M, packer.batch_size), report
