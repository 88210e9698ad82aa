"""ds.apply(tfpack.data.pack(...)): nothing lost, nothing leaked, fixed shapes."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfpack
from tfpack.errors import TfpackError

from packed_checks import assert_same_examples, dataset_from_examples, unpack

L, K, M = 16, 3, 6


@st.composite
def bert_examples(draw, max_len=L, min_size=1, max_size=12):
    examples = []
    for _ in range(draw(st.integers(min_size, max_size))):
        n = draw(st.integers(1, max_len))
        ids = draw(st.lists(st.integers(1, 99), min_size=n, max_size=n))
        positions = sorted(draw(st.sets(st.integers(0, n - 1), max_size=min(n, 2))))
        examples.append({
            "input_ids": ids,
            "token_type_ids": draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
            "masked_lm_positions": positions,
            "masked_lm_ids": [ids[p] + 100 for p in positions],
            "masked_lm_weights": [1.0] * len(positions),
            "next_sentence_labels": draw(st.integers(0, 1)),
        })
    return examples


def packs_of(examples, **kwargs):
    kwargs.setdefault("max_length", L)
    kwargs.setdefault("max_sequences_per_pack", K)
    packer = tfpack.data.pack(**kwargs)
    ds = dataset_from_examples(examples).apply(packer)
    return ds, list(ds.as_numpy_iterator()), packer


@settings(max_examples=10)
@given(bert_examples(), st.sampled_from(["lpfhp", "ffd", "greedy", "none"]), st.integers(0, 3))
def test_offline_unpacks_to_the_inputs(examples, algorithm, seed):
    ds, packs, packer = packs_of(examples, algorithm=algorithm, max_predictions_per_pack=M,
                                 seed=seed)
    assert_same_examples(examples, packs)
    for name, spec in tfpack.data.packed_feature_spec(
            tfpack.data.FeatureRoles.bert(), L, K, M).items():
        assert ds.element_spec[name] == spec
        assert all(p[name].shape == spec.shape for p in packs)
    # Masked-LM positions point at the same tokens as before packing.
    for p in packs:
        real = p["masked_lm_weights"] > 0
        tokens = p["input_ids"][p["masked_lm_positions"][real]]
        assert (p["masked_lm_ids"][real] == tokens + 100).all()
    assert packer.report.packs == len(packs) and packer.report.sequences == len(examples)


@settings(max_examples=6)
@given(bert_examples(max_size=20), st.integers(1, 7))
def test_streaming_unpacks_to_the_inputs_and_flushes_the_last_window(examples, window):
    _, packs, packer = packs_of(examples, window=window, max_predictions_per_pack=M,
                                algorithm="ffd")
    assert_same_examples(examples, packs)
    assert packer.report.mode == "streaming"


def test_hand_computed_causal_lm_pack():
    examples = [{"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}, {"input_ids": [3]}]
    _, packs, _ = packs_of(examples, max_length=6, max_sequences_per_pack=2,
                           algorithm="ffd", shuffle=False, seed=0)
    got = sorted((p["input_ids"].tolist(), p["sequence_ids"].tolist(), p["position_ids"].tolist(),
                  p["labels"].tolist(), p["cls_positions"].tolist(), p["sequence_mask"].tolist())
                 for p in packs)
    assert got == [
        ([3, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0],
         [-100] * 6, [0, 0], [1.0, 0.0]),
        ([5, 6, 7, 8, 9, 0], [1, 1, 1, 2, 2, 0], [0, 1, 2, 0, 1, 0],
         [6, 7, -100, 9, -100, -100], [0, 3], [1.0, 1.0]),
    ]


def test_hand_computed_bert_pack_shifts_masked_positions():
    examples = [
        {"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 0], "masked_lm_positions": [1],
         "masked_lm_ids": [70], "masked_lm_weights": [1.0], "next_sentence_labels": 1},
        {"input_ids": [101, 8, 9, 102], "token_type_ids": [0, 0, 1, 1],
         "masked_lm_positions": [1, 2], "masked_lm_ids": [80, 90], "masked_lm_weights": [1.0, 1.0],
         "next_sentence_labels": 0},
    ]
    _, packs, _ = packs_of(examples, max_length=8, max_sequences_per_pack=2,
                           max_predictions_per_pack=4, algorithm="ffd")
    (p,) = packs
    # ffd puts the longer example first.
    assert p["input_ids"].tolist() == [101, 8, 9, 102, 101, 7, 102, 0]
    assert p["token_type_ids"].tolist() == [0, 0, 1, 1, 0, 0, 0, 0]
    assert p["masked_lm_positions"].tolist() == [1, 2, 5, 0]
    assert p["masked_lm_ids"].tolist() == [80, 90, 70, 0]
    assert p["masked_lm_weights"].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert p["masked_lm_sequence_ids"].tolist() == [1, 1, 2, 0]
    assert p["next_sentence_labels"].tolist() == [0, 1]
    assert p["cls_positions"].tolist() == [0, 4]


def test_classification_labels_follow_their_sequences():
    examples = [{"input_ids": [1] * n, "labels": n} for n in (3, 5, 2, 6, 4)]
    _, packs, _ = packs_of(examples, max_length=8, algorithm="lpfhp")
    assert "next_sentence_labels" not in packs[0]
    for p in packs:
        for k, example in enumerate(unpack(p)):
            assert example["labels"] == len(example["input_ids"])


def test_same_seed_same_stream_different_seed_different_stream():
    examples = [{"input_ids": list(range(1, n + 1))} for n in range(1, 16) for _ in range(4)]
    streams = [[p["input_ids"].tolist() for p in packs_of(examples, seed=s, algorithm="ffd")[1]]
               for s in (1, 1, 2)]
    assert streams[0] == streams[1]
    assert streams[0] != streams[2]


@pytest.mark.parametrize("window", [None, 7])
def test_checkpoint_restores_mid_epoch(tmp_path, window):
    examples = [{"input_ids": list(range(1, n % 13 + 2))} for n in range(60)]
    ds, packs, _ = packs_of(examples, window=window, algorithm="ffd", seed=3)
    iterator = iter(ds)
    for _ in range(5):
        next(iterator)
    checkpoint = tf.train.Checkpoint(iterator=iterator)
    path = checkpoint.save(str(tmp_path / "ckpt"))
    rest = [p["input_ids"].numpy().tolist() for p in iterator]
    restored_iterator = iter(ds)
    tf.train.Checkpoint(iterator=restored_iterator).restore(path)
    assert [p["input_ids"].numpy().tolist() for p in restored_iterator] == rest
    assert rest == [p["input_ids"].tolist() for p in packs[5:]]


@pytest.mark.parametrize("window", [None, 9])
def test_sharding_gives_disjoint_equal_shares_and_reports_padding(window):
    examples = [{"input_ids": [i + 1] * (i % 11 + 1)} for i in range(40)]
    shares, reports = [], []
    for worker in range(3):
        context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=worker,
                                             num_replicas_in_sync=3)
        _, packs, packer = packs_of(examples, window=window, algorithm="ffd",
                                    input_context=context)
        shares.append(packs)
        reports.append(packer.report)
    assert len({len(s) for s in shares}) == 1
    assert_same_examples(examples, [p for s in shares for p in s])
    if window is None:
        total = len(shares[0]) * 3
        assert reports[0].padding_packs == sum(
            p["sequence_mask"].sum() == 0 for s in shares for p in s)
        assert (total - reports[0].padding_packs) % 3 == (3 - reports[0].padding_packs) % 3


def test_remainder_drop_is_reported():
    examples = [{"input_ids": [1] * 8} for _ in range(7)]  # 7 full packs
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0,
                                         num_replicas_in_sync=2)
    with pytest.warns(UserWarning, match="cut 1 packs"):
        _, packs, packer = packs_of(examples, max_length=8, algorithm="ffd",
                                    input_context=context, remainder="drop")
    assert len(packs) == 3
    assert packer.report.dropped_packs == 1 and packer.report.dropped_sequences == 1


def test_too_long_example_fails_at_build_naming_it_unless_truncated():
    examples = [{"input_ids": [1, 2]}, {"input_ids": list(range(1, 20))}]
    with pytest.raises(TfpackError, match=r"example 1 with length=19"):
        packs_of(examples, max_length=8)
    _, packs, _ = packs_of(examples, max_length=8, truncate=True, algorithm="ffd")
    assert sorted(len(e["input_ids"]) for p in packs for e in unpack(p)) == [2, 8]


def test_truncate_drops_predictions_past_the_cut():
    example = {"input_ids": list(range(1, 11)), "masked_lm_positions": [2, 9],
               "masked_lm_ids": [3, 10], "next_sentence_labels": 0}
    _, (p,), _ = packs_of([example], max_length=8, truncate=True, max_predictions_per_pack=2)
    assert p["masked_lm_positions"].tolist() == [2, 0]
    assert p["masked_lm_weights"].tolist() == [1.0, 0.0]


def test_streaming_too_long_example_fails_naming_it():
    examples = [{"input_ids": [1, 2]}] * 5 + [{"input_ids": list(range(1, 20))}]
    ds, _, _ = None, None, None
    packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2, window=4)
    ds = dataset_from_examples(examples).apply(packer)
    with pytest.raises(TfpackError, match=r"^Every example must hold .* example 5 with length=19$"):
        list(ds)


def test_missing_feature_and_wrong_dtype_fail_at_build_naming_them():
    ds = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1.0, 2.0]),
                                       "masked_lm_positions": tf.constant([0])})
    with pytest.raises(TfpackError) as error:
        ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2))
    message = str(error.value)
    assert "'input_ids' must be an integer tensor" in message
    assert "missing feature 'masked_lm_ids'" in message
    assert "missing feature 'next_sentence_labels'" in message


def test_empty_dataset_fails_at_build():
    ds = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1])}).take(0)
    with pytest.raises(TfpackError, match="at least one example"):
        ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2))
    ds = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1])}).filter(lambda x: False)
    with pytest.raises(TfpackError, match="at least one example"):
        ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2, window=4))


def test_too_many_predictions_fails_naming_the_pack():
    examples = [{"input_ids": [1] * 4, "masked_lm_positions": [0, 1, 2],
                 "masked_lm_ids": [1, 1, 1], "next_sentence_labels": 0}] * 2
    with pytest.raises(TfpackError, match=r"max_predictions_per_pack=4 .* pack 0 \(examples"):
        packs_of(examples, max_length=8, max_predictions_per_pack=4, algorithm="ffd")


@pytest.mark.parametrize("kwargs, match", [
    ({"max_length": 0}, r"`max_length` must be a positive integer. Received: max_length=0"),
    ({"window": -1}, r"Received: window=-1"),
    ({"remainder": "spill"}, r"Received: remainder='spill'"),
    ({"window": 4, "max_sequences_per_pack": None}, r"max_sequences_per_pack=None"),
])
def test_bad_arguments(kwargs, match):
    args = {"max_length": 8, "max_sequences_per_pack": 2, **kwargs}
    with pytest.raises(TfpackError, match=match):
        tfpack.data.pack(**args)


def test_streaming_metrics_against_offline():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 65, size=2000)
    offline = tfpack.packing.plan(tfpack.packing.histogram(lengths, 64), 64, 3,
                                  algorithm="lpfhp").metrics["efficiency"]
    streaming = tfpack.data.streaming_metrics(lengths, 64, 3, window=500)
    assert streaming["sequences"] == 2000
    assert offline - 0.05 < streaming["efficiency"] <= offline + 1e-9


@pytest.mark.parametrize("window", [None, 2])
def test_features_outside_the_roles_are_dropped(window):
    ds = tf.data.Dataset.from_tensor_slices({"input_ids": [[1, 2], [3, 4]], "text": ["a", "b"]})
    packs = list(ds.apply(tfpack.data.pack(max_length=4, max_sequences_per_pack=2,
                                           window=window, algorithm="ffd")))
    assert len(packs) == 1 and "text" not in packs[0]


def test_token_features_of_different_lengths_fail_naming_the_example():
    examples = [{"input_ids": [1, 2], "token_type_ids": [0, 0]},
                {"input_ids": [1, 2, 3], "token_type_ids": [0]}]
    with pytest.raises(TfpackError, match=r"'token_type_ids' must have as many values as "
                                          r"'input_ids' .* example 1 with 1 and 3"):
        packs_of(examples, roles=tfpack.data.FeatureRoles(
            name="pairs", tokens=("input_ids", "token_type_ids")))
    with pytest.raises(TfpackError, match=r"token features with one value per `input_ids` "
                                          r"value \(rule token_feature_lengths\)\. "
                                          r"Received: example 1$"):
        packs_of(examples, window=2, roles=tfpack.data.FeatureRoles(
            name="pairs", tokens=("input_ids", "token_type_ids")))


@pytest.mark.parametrize("window", [None, 5])
def test_batch_size_emits_batches_of_packs(window):
    examples = [{"input_ids": [i + 1] * (i % 7 + 1)} for i in range(23)]
    ds, batches, packer = packs_of(examples, max_length=8, algorithm="ffd", batch_size=4,
                                   window=window)
    packs = [{k: v[i] for k, v in b.items()} for b in batches for i in range(len(b["input_ids"]))]
    assert_same_examples(examples, packs)
    if window is None:
        assert ds.element_spec["input_ids"].shape == (4, 8)
        assert all(len(b["input_ids"]) == 4 for b in batches)
        assert packer.report.padding_packs == -(len(packs) - packer.report.padding_packs) % 4


def test_slices_of_a_ragged_tensor_are_accepted():
    ds = tf.data.Dataset.from_tensor_slices({"input_ids": tf.ragged.constant([[1, 2, 3], [4]])})
    (p,) = list(ds.apply(tfpack.data.pack(max_length=4, max_sequences_per_pack=2,
                                          algorithm="ffd")).as_numpy_iterator())
    assert p["input_ids"].tolist() == [1, 2, 3, 4]


def test_precomputed_plan_is_used_as_is():
    examples = [{"input_ids": [1] * n} for n in (3, 5, 2, 6, 4, 4)]
    lengths = [len(e["input_ids"]) for e in examples]
    plan = tfpack.packing.plan(tfpack.packing.histogram(lengths, 8), 8, 2, algorithm="optimal")
    _, packs, packer = packs_of(examples, max_length=8, max_sequences_per_pack=None, plan=plan)
    assert packer.report.plan is plan and len(packs) == plan.metrics["packs"] == 3
    assert_same_examples(examples, packs)
    with pytest.raises(TfpackError, match="plan.max_length"):
        packs_of(examples, max_length=4, plan=plan)


@pytest.mark.parametrize("by", ["sequences", "tokens"])
def test_balance_gives_every_batch_the_same_sequences_and_loses_nothing(by):
    rng = np.random.default_rng(0)
    examples = [{"input_ids": [1 + i % 50] * int(n)} for i, n in
                enumerate(rng.integers(1, 33, 120))]
    ds, batches, packer = packs_of(examples, max_length=32, max_sequences_per_pack=6,
                                   algorithm="ffd", batch_size=5, balance=by, seed=3)
    assert ds.element_spec["input_ids"].shape == (5, 32)  # static shapes unchanged
    packs = [{k: v[i] for k, v in b.items()} for b in batches for i in range(5)]
    assert_same_examples(examples, packs)
    per_batch = [int(b["sequence_mask"].sum()) if by == "sequences"
                 else int((b["sequence_ids"] > 0).sum()) for b in batches]
    report = packer.report.balance
    full = per_batch[:report.batches]
    assert (min(full), max(full)) == (report.low, report.high)
    if by == "tokens":
        return
    assert report.within_tolerance and report.high - report.low <= 1
    # Without balance the same packs give uneven batches.
    plain = [int(b["sequence_mask"].sum())
             for b in packs_of(examples, max_length=32, max_sequences_per_pack=6,
                               algorithm="ffd", batch_size=5, seed=3)[1]]
    assert max(plain[:report.batches]) - min(plain[:report.batches]) > 1


def test_balance_spans_the_batches_of_all_workers_of_a_step():
    examples = [{"input_ids": [1] * (i % 13 + 1)} for i in range(80)]
    shares, reports, packs = [], [], []
    for worker in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                             num_replicas_in_sync=2)
        _, batches, packer = packs_of(examples, max_length=16, algorithm="ffd", batch_size=3,
                                      balance=True, input_context=context)
        shares.append([int(b["sequence_mask"].sum()) for b in batches])
        reports.append(packer.report.balance)
        packs += [{k: v[i] for k, v in b.items()} for b in batches for i in range(3)]
    steps = [a + b for a, b in zip(*shares)][:reports[0].batches]
    assert reports[0].batch_size == 6 and max(steps) - min(steps) <= 1
    assert_same_examples(examples, packs)


def test_balance_size_balances_groups_of_unbatched_packs():
    # For a trainer that batches packs itself: groups of 6 packs (one update) balanced.
    examples = [{"input_ids": [1] * (i % 13 + 1)} for i in range(80)]
    ds, packs, packer = packs_of(examples, max_length=16, algorithm="ffd", balance=True,
                                 balance_size=6)
    assert ds.element_spec["input_ids"].shape == (16,)
    report = packer.report.balance
    groups = [sum(int(p["sequence_mask"].sum()) for p in packs[i:i + 6])
              for i in range(0, 6 * report.batches, 6)]
    assert report.batch_size == 6 and (min(groups), max(groups)) == (report.low, report.high)
    assert report.high - report.low <= 1
    assert_same_examples(examples, packs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(balance=True), r"needs `batch_size`"),
    (dict(balance=True, batch_size=4, balance_size=6), r"multiple of `batch_size`"),
    (dict(balance=True, batch_size=2, window=4), r"offline mode only"),
    (dict(balance="words", batch_size=2), r"`balance` must be"),
])
def test_balance_arguments(kwargs, match):
    with pytest.raises(TfpackError, match=match):
        tfpack.data.pack(max_length=8, max_sequences_per_pack=2, **kwargs)


@pytest.mark.parametrize("batch_size", [None, 4])
def test_one_chunk_at_once_and_the_chunked_map_give_the_same_packs(monkeypatch, batch_size):
    # An offline pack of at most `CHUNK_PACKS` packs is assembled at once, eagerly; more
    # packs go through the chunked `tf.data` map. Both must give the same batches.
    examples = [{"input_ids": [i + 1] * (i % 7 + 1)} for i in range(23)]
    _, at_once, _ = packs_of(examples, max_length=8, algorithm="ffd", batch_size=batch_size)
    monkeypatch.setattr(tfpack.data.emit, "CHUNK_PACKS", 2)
    _, chunked, _ = packs_of(examples, max_length=8, algorithm="ffd", batch_size=batch_size)
    assert len(at_once) == len(chunked) > 2
    for a, b in zip(at_once, chunked):
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
