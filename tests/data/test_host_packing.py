"""Packing per host (`pack(input_sharded=True)`): each host packs only its own share,
every host emits the same number of packs, nothing is lost but the reported drops.

Hosts are simulated by threads (one `Packer` each, an all-gather through a barrier), and
for real by two MultiWorkerMirroredStrategy processes on 127.0.0.1, which then also join
`jax.distributed` (one process pair for both)."""

import functools
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfpack
from tfpack.errors import TfpackError
from tfpack.packing.hosts import agreed_packs, check_counts, fit_to_count, split_files

from open_trace import traced
from packed_checks import dataset_from_examples, unpack
from unused_imports import with_site

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ThreadGather:
    """An ``all_gather`` across threads standing for hosts (a barrier, no TensorFlow)."""

    def __init__(self, hosts):
        self.values = [None] * hosts
        self.barrier = threading.Barrier(hosts, timeout=60)  # A bug fails, never hangs.

    def for_host(self, host):
        def all_gather(count):
            self.values[host] = count
            self.barrier.wait()
            out = list(self.values)
            self.barrier.wait()
            return out
        return all_gather


def share_dataset(examples):
    if examples:
        return dataset_from_examples(examples)
    return dataset_from_examples([{"input_ids": [1]}]).take(0)


def pack_on_hosts(shares, *, window=None, **kwargs):
    """Apply one packer per host (threads); each host's packs, report or error."""
    hosts = len(shares)
    gather = ThreadGather(hosts)
    results = [None] * hosts

    def host(h):
        context = tf.distribute.InputContext(num_input_pipelines=hosts, input_pipeline_id=h,
                                             num_replicas_in_sync=hosts)
        extra = {} if window or "num_packs" in kwargs else {"all_gather": gather.for_host(h)}
        packer = tfpack.data.pack(input_context=context, input_sharded=True, window=window,
                                  **extra, **kwargs)
        try:
            packs = list(share_dataset(shares[h]).apply(packer).as_numpy_iterator())
            results[h] = (packs, packer.report)
        except TfpackError as error:
            results[h] = error

    threads = [threading.Thread(target=host, args=(h,)) for h in range(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a host hung"
    return results


def ids_of(packs):
    return [e["input_ids"][0] for p in packs for e in unpack(p)]


# -- the numpy rules, by hand --------------------------------------------------------

def test_agreed_packs_pad_to_the_largest_drop_to_the_smallest():
    assert agreed_packs([5, 2, 4], multiple=1, remainder="pad") == 5
    assert agreed_packs([2, 5, 4], multiple=1, remainder="pad") == 5
    assert agreed_packs([5, 2, 4], multiple=4, remainder="pad") == 8
    assert agreed_packs([5, 2, 4], multiple=1, remainder="drop") == 2
    assert agreed_packs([5, 3, 4], multiple=2, remainder="drop") == 2
    assert agreed_packs([5, 4, 3], multiple=2, remainder="drop") == 2
    assert agreed_packs([5, 0], multiple=2, remainder="drop") == 0


def test_fit_to_count_pads_with_empty_packs_and_cuts_the_last():
    order, splits = np.array([4, 0, 1, 2, 3]), np.array([0, 2, 3, 5])
    o, s, added, dropped, sequences = fit_to_count(order, splits, 5)
    assert (o.tolist(), s.tolist(), added, dropped, sequences) == (
        [4, 0, 1, 2, 3], [0, 2, 3, 5, 5, 5], 2, 0, 0)
    o, s, added, dropped, sequences = fit_to_count(order, splits, 1)
    assert (o.tolist(), s.tolist(), added, dropped, sequences) == ([4, 0], [0, 2], 0, 2, 3)
    o, s, *_ = fit_to_count(np.zeros([0], np.int64), np.zeros([1], np.int64), 2)
    assert (o.tolist(), s.tolist()) == ([], [0, 0, 0])


def test_split_files_strided_and_refuses_fewer_files_than_hosts():
    files = ["f0", "f1", "f2", "f3", "f4"]
    shares = [split_files(files, num_hosts=3, host=h) for h in range(3)]
    assert shares == [["f0", "f3"], ["f1", "f4"], ["f2"]]
    with pytest.raises(TfpackError, match=r"at least one file per host \(3 hosts\).*"
                                          r"Received: 2 files"):
        split_files(["a", "b"], num_hosts=3, host=0)
    with pytest.raises(TfpackError, match=r"must not repeat a file. Received: 'a' twice"):
        split_files(["a", "b", "a"], num_hosts=1, host=0)


def test_check_counts_per_replica_and_a_failed_host():
    assert check_counts([3, 1], 2) == [3, 1]
    assert check_counts(np.array([3.0, 3.0, 1.0, 1.0]), 2) == [3, 1]
    with pytest.raises(TfpackError, match=r"host\(s\) \[1\] failed"):
        check_counts([3, 3, -1, -1], 2)
    with pytest.raises(TfpackError, match="one count per host"):
        check_counts([3, 1, 2], 2)
    with pytest.raises(TfpackError, match="the same for every replica"):
        check_counts([3, 2, 1, 1], 2)


# -- the transformation, by hand -----------------------------------------------------

def test_offline_pad_and_drop_by_hand():
    # L=8, K=2, ffd. Host 0: [4] + [4] share one pack; host 1: three full packs.
    halves = [{"input_ids": [i] * 4} for i in (1, 2)]
    full = [{"input_ids": [i] * 8} for i in (3, 4, 5)]
    padded = pack_on_hosts([halves, full], max_length=8, max_sequences_per_pack=2,
                           algorithm="ffd", shuffle=False)
    (packs0, report0), (packs1, report1) = padded
    assert len(packs0) == len(packs1) == 3
    assert sorted(ids_of(packs0)) == [1, 2] and sorted(ids_of(packs1)) == [3, 4, 5]
    assert [p["sequence_mask"].tolist() for p in packs0] == [[1, 1], [0, 0], [0, 0]]
    assert packs0[2]["example_ids"].tolist() == [-1, -1]
    assert (report0.host_packs, report1.host_packs) == ([1, 3], [1, 3])
    assert (report0.padding_packs, report1.padding_packs) == (2, 0)
    assert report0.input_sharded and report0.packs == 3 and report0.sequences == 2

    with pytest.warns(UserWarning, match=r"Host 1 cut 2 packs \(2 sequences\)"):
        dropped = pack_on_hosts([halves, full], max_length=8, max_sequences_per_pack=2,
                                algorithm="ffd", shuffle=False, remainder="drop")
    (packs0, report0), (packs1, report1) = dropped
    assert sorted(ids_of(packs0)) == [1, 2] and len(ids_of(packs1)) == 1
    assert (report0.dropped_packs, report0.dropped_sequences) == (0, 0)
    assert (report1.dropped_packs, report1.dropped_sequences, report1.packs) == (2, 2, 1)


def test_offline_whole_batches_of_this_hosts_replicas():
    # 2 hosts, 4 replicas (2 a host), 1 pack a replica and batches of 2: multiples of 2.
    shares = [[{"input_ids": [i] * 8} for i in range(1, 4)], [{"input_ids": [9] * 8}]]
    results = [None, None]
    gather = ThreadGather(2)

    def host(h):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=h,
                                             num_replicas_in_sync=4)
        packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2, algorithm="ffd",
                                  input_context=context, input_sharded=True, batch_size=2,
                                  all_gather=gather.for_host(h))
        batches = list(share_dataset(shares[h]).apply(packer).as_numpy_iterator())
        results[h] = [b["input_ids"].shape for b in batches], packer.report.packs

    threads = [threading.Thread(target=host, args=(h,)) for h in range(2)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert results == [([(2, 8), (2, 8)], 4)] * 2


def test_empty_share_pads_and_all_empty_is_an_error_on_every_host():
    share = [{"input_ids": [1, 2]}, {"input_ids": [3]}]
    (packs0, _), (packs1, report1) = pack_on_hosts([share, []], max_length=4,
                                                   max_sequences_per_pack=2, algorithm="ffd")
    assert len(packs0) == len(packs1) == 1 and ids_of(packs1) == []
    assert report1.host_packs == [1, 0] and report1.sequences == 0
    errors = pack_on_hosts([[], []], max_length=4, max_sequences_per_pack=2)
    assert all(isinstance(e, TfpackError) and "at least one example" in str(e) for e in errors)


def test_a_failing_host_makes_every_host_raise_instead_of_hanging():
    good, bad = [{"input_ids": [1, 2]}], [{"input_ids": list(range(1, 20))}]
    first, second = pack_on_hosts([good, bad], max_length=8, max_sequences_per_pack=2)
    assert isinstance(second, TfpackError) and "length=19" in str(second)
    assert isinstance(first, TfpackError) and "host(s) [1] failed" in str(first)


def test_streaming_emits_exactly_num_packs_padding_or_stopping():
    long = [{"input_ids": [i] * 8} for i in range(1, 7)]   # 6 full packs
    short = [{"input_ids": [i] * 8} for i in (7, 8)]       # 2
    (packs0, report0), (packs1, _) = pack_on_hosts(
        [long, short], window=4, max_length=8, max_sequences_per_pack=2, algorithm="ffd",
        num_packs=4, shuffle=False)
    assert len(packs0) == len(packs1) == 4 and report0.packs == 4
    # Windows of 4 in order: the first window's packs, nothing of the second.
    assert sorted(ids_of(packs0)) == [1, 2, 3, 4] and sorted(ids_of(packs1)) == [7, 8]
    assert [int(p["sequence_mask"].sum()) for p in packs1] == [1, 1, 0, 0]


def test_streaming_stops_reading_its_share_after_num_packs():
    read = []

    def note(i):
        read.append(int(i))
        return i

    ds = tf.data.Dataset.range(100_000).map(
        lambda i: tf.numpy_function(note, [i], tf.int64, stateful=True)).map(
        lambda i: {"input_ids": tf.fill([8], tf.cast(i + 1, tf.int32))})
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=2, window=4,
                              algorithm="ffd", input_context=context, input_sharded=True,
                              num_packs=6)
    packs = list(ds.apply(packer).as_numpy_iterator())
    # Read by windows of 4, not all of the share: what tf.data prefetches ahead of the
    # last pack (66 examples once under load) is bounded, the share is not.
    assert len(packs) == 6 and max(read) < 1_000


def test_balance_arranges_each_hosts_own_batches():
    shares = [[{"input_ids": [i] * (i % 7 + 1)} for i in range(1, 30)],
              [{"input_ids": [i] * (i % 5 + 1)} for i in range(30, 40)]]
    results = pack_on_hosts(shares, max_length=8, max_sequences_per_pack=3, algorithm="ffd",
                            batch_size=2, balance=True)
    assert len(results[0][0]) == len(results[1][0])
    for h, (batches, report) in enumerate(results):
        assert report.balance is not None and report.balance.batch_size == 2
        ids = [int(i) for b in batches for row in b["input_ids"] for i in set(row) - {0}]
        assert sorted(ids) == [e["input_ids"][0] for e in shares[h]]


def test_streaming_share_resumes_mid_stream(tmp_path):
    examples = [{"input_ids": [i] * (i % 5 + 1)} for i in range(1, 30)]
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    packs = dataset_from_examples(examples).apply(tfpack.data.pack(
        max_length=8, max_sequences_per_pack=3, window=6, algorithm="ffd",
        input_context=context, input_sharded=True, num_packs=20))
    iterator = iter(packs)
    for _ in range(7):
        next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    rest = [p["input_ids"].numpy().tolist() for p in iterator]
    restored = iter(packs)
    tf.train.Checkpoint(iterator=restored).restore(path)
    assert [p["input_ids"].numpy().tolist() for p in restored] == rest and len(rest) == 13


def test_whole_input_mode_is_unchanged_by_default():
    examples = [{"input_ids": [i] * (i % 5 + 1)} for i in range(1, 12)]
    shares = []
    for h in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=h,
                                             num_replicas_in_sync=2)
        packer = tfpack.data.pack(max_length=8, max_sequences_per_pack=3, algorithm="ffd",
                                  input_context=context)
        shares.append(list(dataset_from_examples(examples).apply(packer).as_numpy_iterator()))
        assert not packer.report.input_sharded and packer.report.host_packs is None
    assert sorted(ids_of(shares[0]) + ids_of(shares[1])) == list(range(1, 12))


@pytest.mark.parametrize("kwargs, message", [
    ({"input_sharded": True}, r"needs the `input_context`"),
    ({"all_gather": len}, r"are for `input_sharded=True`"),
    ({"input_sharded": True, "context": 2}, r"needs `all_gather` \(offline\) or `num_packs`"),
    ({"input_sharded": True, "context": 2, "window": 4, "all_gather": len},
     r"pass `num_packs` instead of `all_gather`"),
    ({"input_sharded": True, "context": 2, "num_packs": 3, "all_gather": len},
     r"not both"),
    ({"input_sharded": True, "context": 2, "max_sequences_per_pack": None, "num_packs": 2},
     r"fixed `max_sequences_per_pack`"),
    ({"input_sharded": True, "context": 2, "all_gather": 3}, r"must be callable"),
    ({"input_sharded": True, "context": 2, "num_packs": 3, "per_replica_batch_size": 2},
     r"`num_packs` must be a multiple of 2"),
    ({"input_sharded": True, "context": 2, "num_packs": 0}, r"`num_packs` must be a positive"),
])
def test_bad_settings_fail_naming_them(kwargs, message):
    kwargs = {"max_length": 8, "max_sequences_per_pack": 2, **kwargs}
    workers = kwargs.pop("context", None)
    if workers:
        kwargs["input_context"] = tf.distribute.InputContext(
            num_input_pipelines=workers, input_pipeline_id=0, num_replicas_in_sync=workers)
    with pytest.raises(TfpackError, match=message):
        tfpack.data.pack(**kwargs)


def test_masked_lm_needs_a_fixed_m_per_host():
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    ds = tf.data.Dataset.from_tensors({"input_ids": tf.constant([1, 2]),
                                       "masked_lm_positions": tf.constant([0]),
                                       "masked_lm_ids": tf.constant([1]),
                                       "next_sentence_labels": tf.constant(0)})
    with pytest.raises(TfpackError, match="fixed `max_predictions_per_pack`"):
        ds.apply(tfpack.data.pack(max_length=8, max_sequences_per_pack=2,
                                  input_context=context, input_sharded=True, num_packs=2))


def test_host_files_expands_then_strides(tmp_path):
    for name in ("b.rec", "a.rec", "c.rec"):
        (tmp_path / name).write_bytes(b"")
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    names = [os.path.basename(f) for f in tfpack.data.host_files(str(tmp_path / "*.rec"),
                                                                  context)]
    assert names == ["a.rec", "c.rec"]
    listed = [str(tmp_path / "c.rec"), str(tmp_path / "a.rec")]
    assert tfpack.data.host_files(listed, None) == listed
    with pytest.raises(TfpackError, match=r"matches no file"):
        tfpack.data.host_files(str(tmp_path / "*.none"), context)
    with pytest.raises(TfpackError, match=r"matches no file"):
        tfpack.data.host_files([str(tmp_path / "missing.rec")], context)
    with pytest.raises(TfpackError, match=r"at least one file per host"):
        tfpack.data.host_files(str(tmp_path / "a.rec"), context)


# -- the property --------------------------------------------------------------------

@st.composite
def host_shares(draw):
    hosts = draw(st.integers(1, 4))
    shares, uid = [], 1
    for _ in range(hosts):
        share = []
        for _ in range(draw(st.integers(0, 9))):
            share.append({"input_ids": [uid] * draw(st.integers(1, 8))})
            uid += 1
        shares.append(share)
    if uid == 1:  # At least one example somewhere.
        shares[0].append({"input_ids": [1] * 3})
    return shares


@pytest.mark.filterwarnings("ignore:Host .* cut")
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(host_shares(), st.sampled_from(["pad", "drop"]), st.integers(1, 2),
       st.sampled_from(["ffd", "greedy"]), st.integers(0, 2))
def test_every_example_in_exactly_one_pack_and_equal_counts(shares, remainder, per_replica,
                                                             algorithm, seed):
    results = pack_on_hosts(shares, max_length=8, max_sequences_per_pack=3,
                            algorithm=algorithm, seed=seed, remainder=remainder,
                            per_replica_batch_size=per_replica)
    counts = {len(packs) for packs, _ in results}
    assert len(counts) == 1 and counts.pop() % per_replica == 0
    dropped = sum(report.dropped_sequences for _, report in results)
    seen = []
    for h, (packs, report) in enumerate(results):
        ids = ids_of(packs)
        own = {e["input_ids"][0] for e in shares[h]}
        assert set(ids) <= own  # A host packs only its own share.
        assert len(ids) == len(set(ids)) == len(own) - report.dropped_sequences
        seen += ids
    everything = [e["input_ids"][0] for s in shares for e in s]
    assert len(seen) == len(set(seen)) == len(everything) - dropped
    if remainder == "pad":
        assert dropped == 0


# -- for real: two MultiWorkerMirroredStrategy processes -----------------------------

SIZES = [20, 6, 9]  # records a file; worker 0 gets files 0 and 2 (29), worker 1 file 1 (6)


@functools.cache
def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _write_files(folder):
    """The files of `SIZES` records; record ``uid`` is ``[uid] * (uid * 7 % 13 + 1)``."""
    uid, files = 1, []
    for i, n in enumerate(SIZES):
        files.append(f"part-{i}.tfrecord")
        with tf.io.TFRecordWriter(str(folder / files[-1])) as writer:
            for _ in range(n):
                tokens = tf.constant([uid] * (uid * 7 % 13 + 1), tf.int32)
                writer.write(tf.io.serialize_tensor(tokens).numpy())
                uid += 1
    return files


def _communicate(runs, what, timeout=90):
    outputs = []
    for run in runs:
        try:
            output, _ = run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for r in runs:
                r.kill()
            pytest.fail(f"a {what} hung (unequal batch counts?)")
        assert run.returncode == 0, output[-3000:]
        outputs.append(output)
    return outputs


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """Two MultiWorkerMirroredStrategy processes, which then join `jax.distributed` (CPU,
    gloo) where JAX is installed: each packs its own files both ways (one TensorFlow start a
    process: `host_packing_run.py --jax`). The files, and each worker's results."""
    folder = tmp_path_factory.mktemp("hosts")
    files = _write_files(folder)
    *tf_ports, jax_port = _free_ports(3)  # held at once: three distinct ports
    with_jax = importlib.util.find_spec("jax") is not None
    cluster = {"worker": [f"127.0.0.1:{p}" for p in tf_ports]}
    runs = []
    for i in range(2):
        # XLA at LLVM level 0 for the JAX all-gathers (``XLA_FLAGS`` from conftest.py,
        # inherited): how fast the code runs, not what it computes.
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "",
               "JAX_PLATFORMS": "cpu", "PYTHONPATH": with_site(ROOT),
               "TF_CONFIG": json.dumps({"cluster": cluster,
                                        "task": {"type": "worker", "index": i}})}
        command = [sys.executable, os.path.join(os.path.dirname(__file__),
                                                "host_packing_run.py"),
                   str(folder / "part-*.tfrecord"), str(folder / f"out{i}.json")]
        command += ["--jax", f"127.0.0.1:{jax_port}"] if with_jax else []
        command = traced(command, folder / f"trace{i}")  # The files each worker really opened.
        runs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True))
    _communicate(runs, "worker", timeout=180)
    return folder, files, [json.loads((folder / f"out{i}.json").read_text()) for i in range(2)]


@pytest.mark.slow  # two TensorFlow processes (with the JAX run): ~45 s
def test_two_workers_pack_their_own_files_and_run_equal_steps(workers):
    folder, files, results = workers
    assert [r["pad"]["files"] for r in results] == [files[0::2], files[1::2]]
    for i in range(2):
        trace = folder / f"trace{i}"
        if trace.exists():
            opened = {f for f in files if f in trace.read_text()}
            assert opened == set(results[i]["pad"]["files"]), (i, opened)
    everything = set(range(1, sum(SIZES) + 1))
    pad = [r["pad"] for r in results]
    assert pad[0]["host_packs"][0] > pad[0]["host_packs"][1]  # Uneven shares.
    assert pad[0]["steps"] == pad[1]["steps"] > 0
    assert sorted(pad[0]["ids"] + pad[1]["ids"]) == sorted(everything)
    assert pad[0]["global_sequences"] == len(everything)
    assert pad[1]["padding_packs"] > 0
    drop = [r["drop"] for r in results]
    assert drop[0]["steps"] == drop[1]["steps"] > 0
    assert drop[0]["steps"] < pad[0]["steps"]
    kept = drop[0]["ids"] + drop[1]["ids"]
    assert len(kept) == len(set(kept)) == len(everything) - drop[0]["dropped_sequences"]
    assert drop[1]["dropped_sequences"] == 0 and drop[0]["dropped_packs"] > 0


@pytest.mark.slow  # the same two processes, joined by `jax.distributed` (CPU, gloo)
def test_two_jax_processes_pack_their_own_files_and_run_equal_steps(workers):
    pytest.importorskip("jax")
    _, files, results = workers
    first, second = (r["jax"] for r in results)
    assert (first["files"], second["files"]) == (files[0::2], files[1::2])
    assert first["host_packs"] == second["host_packs"]
    assert first["host_packs"][0] > first["host_packs"][1]
    assert first["steps"] == second["steps"] == -(-max(first["host_packs"]) // 2)
    assert sorted(first["ids"] + second["ids"]) == list(range(1, sum(SIZES) + 1))
