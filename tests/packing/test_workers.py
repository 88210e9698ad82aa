"""`tfpack.packing.workers.split_packs`: which packs each training worker reads."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfpack.errors import TfpackError
from tfpack.packing import workers
from tfpack.packing.workers import split_packs


def _table(split):
    return [(s.start, s.stop, s.padding, s.shards, s.ranges, s.records_read)
            for s in split.shares]


def test_hand_computed_uneven_shards_two_workers():
    # Shards of 5, 3, 4 packs; 2 workers of 4 packs per update: 2 updates,
    # 8 packs each, 6 real + 2 empty.
    split = split_packs([5, 3, 4], num_workers=2, packs_per_step=4)
    assert split.steps == 2 and split.num_packs == 12 and split.padding == 4
    assert _table(split) == [
        (0, 6, 2, (0, 1), ((0, 0, 5), (1, 0, 1)), 6),
        (6, 12, 2, (1, 2), ((1, 1, 3), (2, 0, 4)), 7),  # shard 1 read from its start
    ]


def test_hand_computed_remainder_spread_and_empty_shard():
    # 7 packs over 3 workers, 1 pack per update: 3 updates, real 3, 2, 2.
    split = split_packs([2, 0, 5], num_workers=3, packs_per_step=1)
    assert split.steps == 3
    assert _table(split) == [
        (0, 3, 0, (0, 2), ((0, 0, 2), (2, 0, 1)), 3),  # the empty shard is skipped
        (3, 5, 1, (2,), ((2, 1, 3),), 3),  # shard 2 from its start: packs 2..4
        (5, 7, 1, (2,), ((2, 3, 5),), 5),
    ]
    assert split.global_batches(1).tolist() == [[0, 3, 5], [1, 4, 6], [2, -1, -1]]


def test_more_workers_than_packs():
    split = split_packs([2], num_workers=4, packs_per_step=2)
    assert split.steps == 1
    assert [(s.start, s.stop, s.padding, s.shards, s.records_read) for s in split.shares] == [
        (0, 1, 1, (0,), 1), (1, 2, 1, (0,), 2), (2, 2, 2, (), 0), (2, 2, 2, (), 0)]
    assert split.global_batches(2).tolist() == [[0, -1, 1, -1, -1, -1, -1, -1]]


def test_one_worker_reads_everything_in_written_order():
    split = split_packs([3, 3], num_workers=1, packs_per_step=4)
    assert split.steps == 2 and split.shares[0].padding == 2
    assert split.global_batches(2).tolist() == [[0, 1], [2, 3], [4, 5], [-1, -1]]


@pytest.mark.parametrize("kwargs, match", [
    (dict(shard_records=[], num_workers=1, packs_per_step=1), "at least one pack"),
    (dict(shard_records=[0, 0], num_workers=1, packs_per_step=1), "at least one pack"),
    (dict(shard_records=[3, -1], num_workers=1, packs_per_step=1), "non-negative"),
    (dict(shard_records=[3, 1.5], num_workers=1, packs_per_step=1), "non-negative"),
    (dict(shard_records=[3], num_workers=0, packs_per_step=1), "num_workers"),
    (dict(shard_records=[3], num_workers=True, packs_per_step=1), "num_workers"),
    (dict(shard_records=[3], num_workers=1, packs_per_step=0), "packs_per_step"),
])
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(TfpackError, match=match):
        split_packs(kwargs.pop("shard_records"), **kwargs)


def test_global_batches_needs_a_divisor():
    with pytest.raises(TfpackError, match="worker_batch"):
        split_packs([4], num_workers=1, packs_per_step=4).global_batches(3)


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=12).filter(any),
       num_workers=st.integers(1, 9), packs_per_step=st.integers(1, 12))
def test_every_pack_once_equal_updates_bounded_reads(counts, num_workers, packs_per_step):
    split = split_packs(counts, num_workers=num_workers, packs_per_step=packs_per_step)
    total, P = sum(counts), packs_per_step
    starts = np.cumsum([0] + counts[:-1])
    # Every pack exactly once, over the workers' ranges.
    order = np.concatenate([split.worker_order(w) for w in range(num_workers)])
    assert sorted(order[order >= 0].tolist()) == list(range(total))
    # The shard ranges are exactly the worker's range.
    for share in split.shares:
        covered = [int(starts[s]) + i for s, a, b in share.ranges for i in range(a, b)]
        assert covered == list(range(share.start, share.stop))
        assert all(counts[s] > 0 for s in share.shards)
    # Equal updates; the fewest updates that hold every pack; padding only in the last one.
    assert split.steps == -(-total // (num_workers * P))
    assert {s.packs for s in split.shares} == {split.steps * P}
    assert all(s.padding <= P for s in split.shares)
    real = [s.stop - s.start for s in split.shares]
    assert max(real) - min(real) <= 1
    # Reads: the share plus less than one shard (the first, from its start).
    for share in split.shares:
        share_size = share.stop - share.start
        if share.shards:
            first = share.shards[0]
            assert share.records_read == share.stop - starts[first]
            assert share_size <= share.records_read < share_size + counts[first]
        else:
            assert share.records_read == 0 and share_size == 0
    # Global batches: every pack once, each worker's block in worker order.
    batches = split.global_batches(1 if P == 1 else P)
    assert batches.shape == (split.steps * (P // (1 if P == 1 else P)), num_workers * P)
    flat = batches.ravel()
    assert sorted(flat[flat >= 0].tolist()) == list(range(total))


@settings(max_examples=100, deadline=None)
@given(counts=st.lists(st.integers(1, 20), min_size=1, max_size=6),
       num_workers=st.integers(1, 4), micro=st.integers(1, 3), acc=st.integers(1, 3))
def test_global_batches_are_the_workers_micro_batches(counts, num_workers, micro, acc):
    split = split_packs(counts, num_workers=num_workers, packs_per_step=micro * acc)
    batches = split.global_batches(micro)
    for i, batch in enumerate(batches):
        for w in range(num_workers):
            assert batch[w * micro:(w + 1) * micro].tolist() == \
                split.worker_order(w)[i * micro:(i + 1) * micro].tolist()
