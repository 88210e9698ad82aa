"""Fault injection, packing per host (issue 24 item 3): careless file lists, a collective
that returns nonsense, settings that cannot agree, and features of unknown shape are
refused with one clear error; a host never waits forever for another.

Each scenario asserts ``verdict.outcome == "held"`` (`tests.faults.outcomes`)."""


import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfpack
from tests.faults.outcomes import HELD, judge_call, snapshot


def _context(hosts=2, host=0):
    return tf.distribute.InputContext(num_input_pipelines=hosts, input_pipeline_id=host,
                                      num_replicas_in_sync=hosts)


def _files(folder, n):
    for i in range(n):
        (folder / f"part-{i}.rec").write_bytes(b"")
    return folder


@pytest.mark.parametrize("files, match", [
    (lambda d: str(d / "*.none"), "matches no file"),
    (lambda d: [str(d / "part-0.rec"), str(d / "gone.rec")], "matches no file"),
    (lambda d: str(d), "not directories"),
    (lambda d: str(d / "part-0.rec"), "at least one file per host"),
    (lambda d: [str(d / "part-0.rec")] * 2, "must not repeat"),
    (lambda d: [], "non-empty list"),
    (lambda d: 7, "path or pattern"),
    (lambda d: {"a": 1}, "path or pattern"),
])
def test_host_files_refuses_careless_lists(tmp_path, files, match):
    folder = _files(tmp_path, 1)
    before = snapshot(folder)
    verdict = judge_call(lambda: tfpack.data.host_files(files(folder), _context()),
                         refuse=True, match=match, user_files=(folder, before))
    assert verdict.outcome == HELD, verdict


def test_host_files_takes_pathlib_paths(tmp_path):
    folder = _files(tmp_path, 2)
    verdict = judge_call(
        lambda: tfpack.data.host_files(folder / "part-1.rec", None),
        check=lambda files: files == [str(folder / "part-1.rec")])
    assert verdict.outcome == HELD, verdict
    verdict = judge_call(
        lambda: tfpack.data.host_files((folder / "part-0.rec", folder / "part-1.rec"),
                                       _context(2, 1)),
        check=lambda files: files == [str(folder / "part-1.rec")])
    assert verdict.outcome == HELD, verdict


@settings(max_examples=15, deadline=None)
@given(st.one_of(st.just("x"), st.just([]), st.just([1, 2, 3]), st.just([1.5, 2]),
                 st.just([None, None]), st.just([[1], [2, 3]]), st.just({"a": 1}),
                 st.lists(st.integers(-5, -2), min_size=2, max_size=2)))
def test_a_collective_returning_nonsense_is_one_clear_error(returned):
    dataset = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1, 2])})
    packer = tfpack.data.pack(max_length=4, max_sequences_per_pack=2,
                              input_context=_context(), input_sharded=True,
                              all_gather=lambda count: returned)
    verdict = judge_call(lambda: dataset.apply(packer), refuse=True, match="all_gather")
    assert verdict.outcome == HELD, verdict


@settings(max_examples=15, deadline=None)
@given(st.one_of(st.integers(-3, 0), st.just(True), st.just(2.5), st.just("4"),
                 st.integers(1, 9).map(lambda n: 2 * n + 1)))
def test_num_packs_that_cannot_be_whole_steps_is_refused(num_packs):
    verdict = judge_call(
        lambda: tfpack.data.pack(max_length=4, max_sequences_per_pack=2,
                                 input_context=_context(), input_sharded=True,
                                 num_packs=num_packs, per_replica_batch_size=2),
        refuse=True, match="num_packs")
    assert verdict.outcome == HELD, verdict


def test_unknown_rank_features_are_refused_naming_them(tmp_path):
    path = tmp_path / "part-0.rec"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(tf.io.serialize_tensor(tf.constant([1, 2])).numpy())
    dataset = tf.data.TFRecordDataset([str(path)]).map(
        lambda r: {"input_ids": tf.io.parse_tensor(r, tf.int32)})
    verdict = judge_call(
        lambda: dataset.apply(tfpack.data.pack(
            max_length=4, max_sequences_per_pack=2, input_context=_context(1),
            input_sharded=True)),
        refuse=True, match="unknown rank")
    assert verdict.outcome == HELD, verdict


def test_a_host_whose_share_is_bad_tells_the_others():
    calls = []
    dataset = tf.data.Dataset.from_tensors({"input_ids": tf.range(1, 20)})
    packer = tfpack.data.pack(max_length=4, max_sequences_per_pack=2,
                              input_context=_context(), input_sharded=True,
                              all_gather=lambda count: calls.append(count) or [count, 3])
    verdict = judge_call(lambda: dataset.apply(packer), refuse=True, match="length=19")
    assert verdict.outcome == HELD and calls == [-1], (verdict, calls)
