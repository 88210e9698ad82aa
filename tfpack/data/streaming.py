"""Streaming mode of `tfpack.data.pack` (``window=N``): memory bounded by the window.

Each window of ``N`` examples is checked and planned in Python
(`tf.numpy_function`, `tfpack.packing.windows.plan_window`), then packed in
the graph; the last partial window is flushed. Bad input fails on iteration
with a `TfpackError` naming the example's index in the stream. Packing per
host with ``num_packs``: the host's own packs, then empty ones, exactly
``num_packs`` (packs past it are not read). ``packer`` is the
`tfpack.data.Packer` whose settings apply.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfpack.data.assemble import assemble
from tfpack.data.boundary import raising_tfpack_errors
from tfpack.data.emit import empty_packs, graph, with_static_shapes
from tfpack.data.reading import ragged_rows
from tfpack.data.report import PackReport
from tfpack.formats import validation
from tfpack.packing.windows import (check_predictions, fit_to_multiple, permute_packs,
                                    plan_window, take_worker)

__all__ = ["streaming"]


def streaming(packer, dataset, roles):
    """Streaming mode: plan and pack ``packer.window`` examples at a time.

    Returns the dataset of packs and its `PackReport` (settings only).
    """
    L, K, M = packer.max_length, packer.max_sequences_per_pack, packer.max_predictions_per_pack
    window = packer.window
    length_feature = roles.length_feature
    fixed_count = packer.input_sharded and packer.num_packs is not None

    def plan_numpy(lengths, index, codes, predictions):
        # Raised here, in Python, so that `raising_tfpack_errors` can give
        # the user this TfpackError rather than TensorFlow's wrapper.
        validation.check_example_codes(codes, int(index) * window)
        rng_seed = int(np.random.SeedSequence([packer.seed, int(index)]).generate_state(1)[0])
        order, splits = plan_window(lengths, L, K, packer.algorithm, seed=rng_seed,
                                    first_index=int(index) * window)
        if M is not None:
            check_predictions(predictions, order, splits, M, int(index) * window)
        if packer.shuffle:
            perm = np.random.default_rng(rng_seed).permutation(len(splits) - 1)
            order, splits = permute_packs(order, splits, perm)
        if fixed_count:  # The host's own packs, padded or cut at the end.
            return order, splits
        order, splits, _, _ = fit_to_multiple(order, splits, packer.multiple, "pad")
        if packer.input_sharded:
            return order, splits
        return take_worker(order, splits, packer.worker, packer.num_workers)

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

    report = PackReport(mode="streaming", num_workers=packer.num_workers,
                        worker=packer.worker, max_predictions_per_pack=M,
                        input_sharded=packer.input_sharded,
                        packs=packer.num_packs if fixed_count else None)
    packed = (dataset.ragged_batch(window).enumerate()
              .map(graph(pack_window), num_parallel_calls=tf.data.AUTOTUNE,
                   deterministic=True)
              .unbatch())
    packed = with_static_shapes(packed, roles, L, K, M)
    if fixed_count:
        # `take` stops reading the share once `num_packs` packs are out.
        empty = empty_packs(dataset.element_spec, roles, L, K, M)
        packed = packed.concatenate(empty.repeat()).take(packer.num_packs)
    packed = packed.batch(packer.batch_size) if packer.batch_size else packed
    return raising_tfpack_errors(packed), report
