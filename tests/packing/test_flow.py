"""One offline flow (`tfpack.packing.flow`) behind the tf.data transform and both engines."""

import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack.packing.flow import offline_packs
from tfpack.errors import TfpackError


def test_offline_packs_by_hand():
    # ffd on lengths [3, 1, 2, 2] with L=4, K=2: packs (3, 1) and (2, 2), plan order.
    packs = offline_packs(np.array([3, 1, 2, 2]), np.array([1, 0, 2, 1]), max_length=4,
                          max_sequences_per_pack=2, algorithm="ffd", shuffle=False)
    assert packs.order.tolist() == [0, 1, 2, 3] and packs.splits.tolist() == [0, 2, 4]
    assert packs.max_sequences_per_pack == 2 and packs.max_predictions_per_pack == 3


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(max_predictions_per_pack=2),
     r"at most max_predictions_per_pack=2 masked-LM predictions\. Received: pack 1 "
     r"\(examples \[2, 3\]\) with 3 predictions"),
    (dict(algorithm="ffd", plan="given"), r"either `algorithm` or `plan`, not both"),
    (dict(max_sequences_per_pack=1, plan="given"),
     r"at most `max_sequences_per_pack` sequences in a pack\. Received: "
     r"max_sequences_per_pack=1, plan depth=2"),
])
def test_offline_packs_refuses(kwargs, pattern):
    lengths = np.array([3, 1, 2, 2])
    args = dict(max_length=4, max_sequences_per_pack=2, algorithm="ffd", shuffle=False)
    if kwargs.pop("plan", None):
        args["plan"] = tfpack.packing.plan(tfpack.packing.histogram(lengths, 4), 4, 2, "ffd")
        args["algorithm"] = None
    args.update(kwargs)
    with pytest.raises(TfpackError, match=pattern):
        offline_packs(lengths, np.array([1, 0, 2, 1]), **args)


@pytest.mark.parametrize("seed, shuffle", [(0, True), (5, True), (0, False)])
def test_the_transform_packs_as_the_flow_says(seed, shuffle):
    # Example i starts with token 1000 + i: read each pack's examples back in order.
    lengths = np.random.default_rng(seed).integers(1, 9, size=60)
    ids = tf.ragged.constant([[1000 + i] + [7] * (n - 1) for i, n in enumerate(lengths)])
    ds = tf.data.Dataset.from_tensor_slices({"input_ids": ids})
    packs = list(ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=3,
                                           algorithm="lpfhp", seed=seed, shuffle=shuffle,
                                           roles="causal_lm")).as_numpy_iterator())
    got = [[int(t) - 1000 for t in p["input_ids"] if t >= 1000] for p in packs]
    flow = offline_packs(lengths, max_length=8, max_sequences_per_pack=3, algorithm="lpfhp",
                         seed=seed, shuffle=shuffle)
    want = [flow.order[a:b].tolist() for a, b in zip(flow.splits[:-1], flow.splits[1:])]
    assert got == want
